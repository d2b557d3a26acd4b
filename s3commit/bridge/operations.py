"""The bridge's operation table (``operations.json`` beside this module): the one specification of what the JVM
may ask the sidecar, with which fields, what comes back, which requests a new sidecar may be sent again after
the one they went to died, and how long the JVM waits for each.

The sidecar checks every request against it (an unknown or missing field is refused, naming it), checks its own
handlers against it when it starts, and hands the JVM the parts the JVM acts on (restartable operations and
timeouts) in its hello, so the Java side keeps no copy. With ``S3COMMIT_BRIDGE_STRICT=1`` (the test suites set
it) the sidecar also checks each reply's fields and refuses a handler's read of a field the table lacks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from s3commit.errors import ConfigError

FRAMING = frozenset({"op", "body"})
"""Header fields of the framing, not of an operation: the operation's name and "a body follows"."""
REPLY_FRAMING = frozenset({"ok", "body"})
STRICT_ENV = "S3COMMIT_BRIDGE_STRICT"
METADATA_TIMEOUT_ENV = "S3COMMIT_BRIDGE_METADATA_TIMEOUT"
DEFAULT_METADATA_TIMEOUT = 600.0
"""Seconds the JVM waits for the answer to a ``metadata`` operation (the store's retries of one request fit
well inside); ``data`` and ``commit`` operations wait as long as the sidecar lives."""
TIMEOUT_CLASSES = ("metadata", "data", "commit")
BODIES = ("none", "bytes", "ndjson", "optional bytes", "optional ndjson")


class BadRequest(ConfigError):
    """A request whose fields are not those of its operation (reaches the JVM as an IllegalArgument error)."""


@dataclass(frozen=True)
class Operation:
    """One row of the table."""

    name: str
    required: frozenset[str]
    optional: frozenset[str]
    reply: frozenset[str]
    restartable: bool
    timeout: str
    request_body: str = "none"
    reply_body: str = "none"

    def check_request(self, header: Mapping[str, Any]) -> None:
        fields = set(header) - FRAMING
        unknown = sorted(fields - self.required - self.optional)
        if unknown:
            raise BadRequest(f"bridge operation {self.name!r} does not take the field(s) {', '.join(unknown)}")
        missing = sorted(self.required - fields)
        if missing:
            raise BadRequest(f"bridge operation {self.name!r} needs the field(s) {', '.join(missing)}")

    def check_reply(self, header: Mapping[str, Any]) -> None:
        undeclared = sorted(set(header) - REPLY_FRAMING - self.reply)
        if undeclared:
            raise AssertionError(f"the reply to {self.name!r} has field(s) the operation table lacks: "
                                 f"{', '.join(undeclared)}")


def _load() -> dict[str, Operation]:
    text = resources.files("s3commit.bridge").joinpath("operations.json").read_text(encoding="utf-8")
    table: dict[str, Operation] = {}
    for name, row in json.loads(text)["operations"].items():
        request = row["request"]
        operation = Operation(name=name,
                              required=frozenset(k for k, v in request.items() if v == "required"),
                              optional=frozenset(k for k, v in request.items() if v == "optional"),
                              reply=frozenset(row["reply"]), restartable=bool(row["restartable"]),
                              timeout=row["timeout"], request_body=row.get("request_body", "none"),
                              reply_body=row.get("reply_body", "none"))
        if operation.timeout not in TIMEOUT_CLASSES or {operation.request_body, operation.reply_body} - set(BODIES):
            raise ValueError(f"operations.json: {name}: bad timeout or body class")
        if set(request.values()) - {"required", "optional"}:
            raise ValueError(f"operations.json: {name}: a request field must be required or optional")
        table[name] = operation
    return table


OPERATIONS: Mapping[str, Operation] = _load()


def strict() -> bool:
    """Whether replies and handler reads are checked too (``S3COMMIT_BRIDGE_STRICT=1``)."""
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def metadata_timeout() -> float:
    raw = os.environ.get(METADATA_TIMEOUT_ENV)
    if not raw:
        return DEFAULT_METADATA_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{METADATA_TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if value < 0:
        raise ConfigError(f"{METADATA_TIMEOUT_ENV}={raw!r} must be >= 0 (0: no limit)")
    return value


def hello_table() -> dict[str, Any]:
    """What the JVM acts on, sent in the sidecar's hello: the restartable operations and each operation's
    timeout in seconds (0: none)."""
    limit = metadata_timeout()
    return {"restartable": sorted(name for name, op in OPERATIONS.items() if op.restartable),
            "timeouts": {name: (limit if op.timeout == "metadata" else 0) for name, op in OPERATIONS.items()}}


def check_handlers(names: Iterable[str]) -> None:
    """Raise unless the sidecar handles exactly the table's operations."""
    handled = set(names)
    extra, missing = sorted(handled - set(OPERATIONS)), sorted(set(OPERATIONS) - handled)
    if extra or missing:
        raise ValueError(f"the sidecar's handlers do not match operations.json: handled but not in the table "
                         f"{extra}, in the table but not handled {missing}")


class DeclaredFields(dict[str, Any]):
    """A request as a handler sees it in strict mode: reading a field its operation does not declare fails."""

    def __init__(self, operation: Operation, header: Mapping[str, Any]) -> None:
        super().__init__(header)
        self._declared = operation.required | operation.optional | FRAMING
        self._name = operation.name

    def _check(self, key: object) -> None:
        if key not in self._declared:
            raise AssertionError(f"the handler of {self._name!r} reads {key!r}, a field the operation table lacks")

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)
