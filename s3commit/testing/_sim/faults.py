"""Seeded and scripted fault injection decisions for the simulated S3.

A :class:`FaultSpec` says how often each :class:`FaultKind` happens, for every operation or per operation.
A :class:`FaultInjector` turns a spec and a seed into one decision per request: no fault, or which fault
(and, for a connection reset, whether the request reached S3 before the connection dropped). Tests that
need an exact fault use :meth:`FaultInjector.script` ("fail the next 2 UploadParts with 503"), which takes
precedence over the random draw.

Determinism: every operation draws from its own random stream seeded with ``(seed, operation)``, and every
request draws the same number of values whatever the outcome. So a given seed gives the same faults for
the same sequence of requests of each operation, however requests of *different* operations interleave.
Concurrent requests of one operation can still swap draws between them; that is thread scheduling.

This module only decides. Answering with an error body or dropping the socket is the simulator's job.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from s3commit.testing._sim.classify import S3Operation


class FaultKind(str, Enum):
    """A kind of injected fault (the value is the name used in JSON and stats)."""

    SLOW_DOWN = "503"
    """HTTP 503 with an S3 ``SlowDown`` error body; the request is not forwarded."""
    INTERNAL_ERROR = "500"
    """HTTP 500 with an S3 ``InternalError`` error body; the request is not forwarded."""
    RESET = "reset"
    """The connection is dropped (TCP RST) without a response, before or after forwarding."""
    ERROR_200 = "200-error"
    """HTTP 200 whose body is an ``<Error>``; only for CompleteMultipartUpload and CopyObject."""
    CORRUPT = "corrupt"
    """The request is forwarded with one bit of its body flipped and its headers unchanged (bytes damaged in
    transit, past TCP's checksum): the server sees a body that does not match its checksum headers."""

    @classmethod
    def parse(cls, name: str | FaultKind) -> FaultKind:
        """Return the kind named ``name``; raise ``ValueError`` listing the valid values otherwise."""
        if isinstance(name, FaultKind):
            return name
        try:
            return cls(name)
        except ValueError:
            valid = ", ".join(kind.value for kind in cls)
            raise ValueError(f"unknown fault kind {name!r}; valid values are {valid}") from None


#: S3 documents that these two may answer 200 OK and put the error in the body.
ERROR_200_OPERATIONS = frozenset({S3Operation.COMPLETE_MULTIPART_UPLOAD, S3Operation.COPY_OBJECT})


def _parse_rates(rates: Mapping[Any, Any], where: str) -> dict[FaultKind, float]:
    parsed = {FaultKind.parse(kind): float(rate) for kind, rate in rates.items()}
    for kind, rate in parsed.items():
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"fault rate for {kind.value!r} {where} must be within [0, 1], got {rate}")
    if sum(parsed.values()) > 1.0 + 1e-9:
        raise ValueError(f"fault rates {where} add up to more than 1: {sum(parsed.values())}")
    return parsed


@dataclass(frozen=True, kw_only=True)
class FaultSpec:
    """How often faults happen.

    Attributes:
        rates: probability per request of each fault kind, for every operation. ``200-error`` applies only
            to the operations that can answer it (CompleteMultipartUpload, CopyObject); others ignore it.
        operation_rates: per-operation rates that *replace* ``rates`` for that operation.
        reset_after_forward: for a ``reset`` fault, the probability that the request was forwarded (and
            applied by S3) before the connection dropped, so that only the response is lost.

    Kinds and operations may be given as enum members or as their names (``"503"``, ``"UploadPart"``).
    """

    rates: Mapping[FaultKind | str, float] = field(default_factory=dict)
    operation_rates: Mapping[S3Operation | str, Mapping[FaultKind | str, float]] = field(default_factory=dict)
    reset_after_forward: float = 0.5

    def __post_init__(self) -> None:
        rates = _parse_rates(self.rates, "for all operations")
        per_operation: dict[S3Operation, Mapping[FaultKind, float]] = {}
        for name, op_rates in self.operation_rates.items():
            operation = S3Operation.parse(name)
            parsed = _parse_rates(op_rates, f"for {operation.value}")
            if parsed.get(FaultKind.ERROR_200) and operation not in ERROR_200_OPERATIONS:
                allowed = ", ".join(sorted(op.value for op in ERROR_200_OPERATIONS))
                raise ValueError(f"fault '200-error' cannot apply to {operation.value}; valid operations are {allowed}")
            per_operation[operation] = MappingProxyType(parsed)
        if not 0.0 <= self.reset_after_forward <= 1.0:
            raise ValueError(f"reset_after_forward must be within [0, 1], got {self.reset_after_forward}")
        object.__setattr__(self, "rates", MappingProxyType(rates))
        object.__setattr__(self, "operation_rates", MappingProxyType(per_operation))

    @property
    def enabled(self) -> bool:
        """Whether any fault can happen at all."""
        return any(self.rates.values()) or any(any(r.values()) for r in self.operation_rates.values())

    def rates_for(self, operation: S3Operation) -> Mapping[FaultKind, float]:
        """The fault rates that apply to ``operation``."""
        rates: Mapping[Any, float] = self.operation_rates.get(operation, self.rates)
        if operation not in ERROR_200_OPERATIONS and FaultKind.ERROR_200 in rates:
            return {kind: rate for kind, rate in rates.items() if kind is not FaultKind.ERROR_200}
        return rates

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "rates": {FaultKind.parse(k).value: v for k, v in self.rates.items()},
            "operation_rates": {
                S3Operation.parse(op).value: {FaultKind.parse(k).value: v for k, v in rates.items()}
                for op, rates in self.operation_rates.items()
            },
            "reset_after_forward": self.reset_after_forward,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultSpec:
        """Build a spec from :meth:`to_dict` output (missing keys take the defaults)."""
        unknown = set(data) - {"rates", "operation_rates", "reset_after_forward"}
        if unknown:
            raise ValueError(
                f"unknown fault spec keys {sorted(unknown)}; valid keys are rates, operation_rates, reset_after_forward"
            )
        return cls(
            rates=dict(data.get("rates", {})),
            operation_rates={op: dict(r) for op, r in data.get("operation_rates", {}).items()},
            reset_after_forward=float(data.get("reset_after_forward", 0.5)),
        )


NO_FAULTS = FaultSpec()


@dataclass(frozen=True)
class Fault:
    """One decided fault.

    Attributes:
        kind: what happens.
        after_forward: for :attr:`FaultKind.RESET`: the request reaches S3 (and takes effect) and only
            the response is lost. Always ``False`` for the other kinds, which are never forwarded (but for
            :attr:`FaultKind.CORRUPT`, whose damaged request always is).
    """

    kind: FaultKind
    after_forward: bool = False


class FaultInjector:
    """Decides, per request, whether and how it fails. Thread-safe."""

    def __init__(self, spec: FaultSpec = NO_FAULTS, *, seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self._streams: dict[S3Operation, random.Random] = {}
        self._scripted: dict[S3Operation, deque[Fault]] = {}
        self._lock = threading.Lock()

    def script(
        self, operation: S3Operation | str, kind: FaultKind | str, count: int = 1, *, after_forward: bool = False
    ) -> None:
        """Make the next ``count`` requests of ``operation`` fail with ``kind``, before any random fault.

        Args:
            operation: the operation to fail.
            kind: the fault.
            count: how many consecutive requests of ``operation`` fail.
            after_forward: for ``reset`` only: forward each request before dropping the connection.

        Raises:
            ValueError: unknown names, ``count < 1``, ``200-error`` for an operation that cannot answer it,
                or ``after_forward`` with a kind other than ``reset``.
        """
        op, fault_kind = S3Operation.parse(operation), FaultKind.parse(kind)
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        if fault_kind is FaultKind.ERROR_200 and op not in ERROR_200_OPERATIONS:
            raise ValueError(f"fault '200-error' cannot apply to {op.value}")
        if after_forward and fault_kind is not FaultKind.RESET:
            raise ValueError("after_forward applies only to the 'reset' fault")
        with self._lock:
            self._scripted.setdefault(op, deque()).extend([Fault(fault_kind, after_forward)] * count)

    def configure(self, spec: FaultSpec, *, seed: int) -> None:
        """Use ``spec`` and ``seed`` from now on; the random streams restart, scripted faults stay."""
        with self._lock:
            self.spec, self.seed = spec, seed
            self._streams.clear()

    def clear_script(self) -> None:
        """Forget every scripted fault not yet used."""
        with self._lock:
            self._scripted.clear()

    def pending_script(self) -> dict[str, int]:
        """Scripted faults not yet used, by operation name."""
        with self._lock:
            return {op.value: len(queue) for op, queue in self._scripted.items() if queue}

    def decide(self, operation: S3Operation) -> Fault | None:
        """Return the fault for the next request of ``operation``, or ``None`` to serve it normally."""
        with self._lock:
            queue = self._scripted.get(operation)
            if queue:
                return queue.popleft()
            rates = self.spec.rates_for(operation)
            if not any(rates.values()):
                return None
            stream = self._streams.get(operation)
            if stream is None:
                stream = self._streams[operation] = random.Random(f"{self.seed}/{operation.value}")
            # Always draw both values so the stream advances the same way whatever the outcome.
            draw, timing = stream.random(), stream.random()
        threshold = 0.0
        for kind in FaultKind:  # fixed order, independent of the mapping's order
            threshold += rates.get(kind, 0.0)
            if draw < threshold:
                after = kind is FaultKind.RESET and timing < self.spec.reset_after_forward
                return Fault(kind, after)
        return None
