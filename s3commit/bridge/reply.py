"""What a sidecar handler returns, and how errors travel back to the JVM."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from s3commit.errors import CommitConflictError, CommitStateError, ConfigError


@dataclass
class Reply:
    """A response: header fields (``ok`` is added), and either a body in hand or one streamed chunk by chunk.

    A streamed body that fails part way reaches the JVM as an error after the bytes already sent.
    """

    header: dict[str, Any] = field(default_factory=dict)
    body: bytes | bytearray | memoryview | None = None
    stream: Iterable[bytes | bytearray | memoryview] | None = None


def error_type(err: BaseException) -> str:
    """The Java exception family the client raises for ``err`` (``Sidecar.toException`` in the jar)."""
    from s3commit.bridge.protocol import FrameTooLarge
    from s3commit.bridge.registry import UnknownConfiguration

    if isinstance(err, UnknownConfiguration):
        return "UnknownConfiguration"
    if isinstance(err, FrameTooLarge):
        return "FrameTooLarge"
    if isinstance(err, FileNotFoundError):
        return "FileNotFound"
    if isinstance(err, CommitConflictError | FileExistsError):
        return "FileAlreadyExists"
    if isinstance(err, ConfigError):
        return "IllegalArgument"
    if isinstance(err, CommitStateError):
        return "IllegalState"
    return "IO"


def error_header(err: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": {"type": error_type(err), "message": str(err) or type(err).__name__}}
