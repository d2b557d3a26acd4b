"""What the simulated S3 saw and did: request counts, bytes, injected faults and delays.

The simulator records into a :class:`StatsRecorder` (thread-safe, lives in the server process) and serves
:meth:`StatsRecorder.snapshot` as JSON at ``GET /__sim/stats``. The test side reads it back as a
:class:`StatsSnapshot` (frozen) and subtracts two snapshots to get what one piece of code cost.

Delays are the ones the simulator *chose to inject* (the latency model's numbers), not wall-clock
measurements, so tests can assert on them exactly without timing races.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from s3commit.testing._sim.classify import RequestTarget, S3Operation
from s3commit.testing._sim.faults import FaultKind

REQUEST_LOG_LIMIT = 100_000
"""How many of the latest requests the simulator remembers (``GET /__sim/requests``), for tests that look at
which objects and byte ranges were asked for, not only how many requests."""


def _minus_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    delta = {name: a.get(name, 0) - b.get(name, 0) for name in set(a) | set(b)}
    return {name: n for name, n in sorted(delta.items()) if n}


def _minus_seconds(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    delta = {name: a.get(name, 0.0) - b.get(name, 0.0) for name in set(a) | set(b)}
    return {name: s for name, s in sorted(delta.items()) if abs(s) > 1e-12}


@dataclass(frozen=True, kw_only=True)
class StatsSnapshot:
    """Counters of the simulated S3 at one moment (or, from :meth:`minus`, between two moments).

    All mappings are keyed by boto3 operation name (``"UploadPart"``; ``"other"`` for the rest).

    Attributes:
        requests: requests received, including those answered with an injected fault or throttled.
        bytes_in: request body bytes received.
        bytes_out: response body bytes sent.
        faults: injected faults, ``{operation: {kind: n}}`` with kinds ``503``, ``500``, ``reset``,
            ``200-error``.
        resets_after_forward: ``reset`` faults whose request S3 had applied before the drop.
        throttled: requests refused with 503 SlowDown by the throttle.
        delay_seconds: latency injected by the profile (first byte + transfer + copy).
        copy_bytes: bytes copied server-side by CopyObject / UploadPartCopy.
        copy_seconds: delay injected for those copies (included in ``delay_seconds``).
        translated: upstream errors rewritten to what AWS answers, by S3 error code (``NoSuchUpload``).
        max_in_flight: the most requests of each operation the simulator was serving at one time, since the
            last reset (not a count: :meth:`minus` keeps the later value).
    """

    requests: Mapping[str, int] = field(default_factory=dict)
    bytes_in: Mapping[str, int] = field(default_factory=dict)
    bytes_out: Mapping[str, int] = field(default_factory=dict)
    faults: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    resets_after_forward: Mapping[str, int] = field(default_factory=dict)
    throttled: Mapping[str, int] = field(default_factory=dict)
    delay_seconds: Mapping[str, float] = field(default_factory=dict)
    copy_bytes: int = 0
    copy_seconds: float = 0.0
    translated: Mapping[str, int] = field(default_factory=dict)
    max_in_flight: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_requests(self) -> int:
        """All requests received."""
        return sum(self.requests.values())

    @property
    def total_faults(self) -> int:
        """All faults injected."""
        return sum(sum(kinds.values()) for kinds in self.faults.values())

    @property
    def total_delay_seconds(self) -> float:
        """All latency injected."""
        return sum(self.delay_seconds.values())

    def faults_of(self, kind: FaultKind | str) -> int:
        """Faults of one kind injected, over all operations."""
        name = FaultKind.parse(kind).value
        return sum(kinds.get(name, 0) for kinds in self.faults.values())

    def minus(self, earlier: StatsSnapshot) -> StatsSnapshot:
        """The counts accumulated between ``earlier`` and this snapshot (zero entries left out)."""
        operations = set(self.faults) | set(earlier.faults)
        faults = {op: _minus_counts(self.faults.get(op, {}), earlier.faults.get(op, {})) for op in operations}
        return StatsSnapshot(
            requests=_minus_counts(self.requests, earlier.requests),
            bytes_in=_minus_counts(self.bytes_in, earlier.bytes_in),
            bytes_out=_minus_counts(self.bytes_out, earlier.bytes_out),
            faults={op: kinds for op, kinds in sorted(faults.items()) if kinds},
            resets_after_forward=_minus_counts(self.resets_after_forward, earlier.resets_after_forward),
            throttled=_minus_counts(self.throttled, earlier.throttled),
            delay_seconds=_minus_seconds(self.delay_seconds, earlier.delay_seconds),
            copy_bytes=self.copy_bytes - earlier.copy_bytes,
            copy_seconds=self.copy_seconds - earlier.copy_seconds,
            translated=_minus_counts(self.translated, earlier.translated),
            max_in_flight=dict(self.max_in_flight),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "requests": dict(self.requests),
            "bytes_in": dict(self.bytes_in),
            "bytes_out": dict(self.bytes_out),
            "faults": {op: dict(kinds) for op, kinds in self.faults.items()},
            "resets_after_forward": dict(self.resets_after_forward),
            "throttled": dict(self.throttled),
            "delay_seconds": dict(self.delay_seconds),
            "copy_bytes": self.copy_bytes,
            "copy_seconds": self.copy_seconds,
            "translated": dict(self.translated),
            "max_in_flight": dict(self.max_in_flight),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StatsSnapshot:
        """Build a snapshot from :meth:`to_dict` output."""
        return cls(
            requests=dict(data.get("requests", {})),
            bytes_in=dict(data.get("bytes_in", {})),
            bytes_out=dict(data.get("bytes_out", {})),
            faults={op: dict(kinds) for op, kinds in data.get("faults", {}).items()},
            resets_after_forward=dict(data.get("resets_after_forward", {})),
            throttled=dict(data.get("throttled", {})),
            delay_seconds=dict(data.get("delay_seconds", {})),
            copy_bytes=int(data.get("copy_bytes", 0)),
            copy_seconds=float(data.get("copy_seconds", 0.0)),
            translated=dict(data.get("translated", {})),
            max_in_flight=dict(data.get("max_in_flight", {})),
        )


class StatsRecorder:
    """Thread-safe counters the simulator updates for every request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset_unlocked()

    def _reset_unlocked(self) -> None:
        self._requests: Counter[str] = Counter()
        self._bytes_in: Counter[str] = Counter()
        self._bytes_out: Counter[str] = Counter()
        self._faults: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._resets_after_forward: Counter[str] = Counter()
        self._throttled: Counter[str] = Counter()
        self._delay: defaultdict[str, float] = defaultdict(float)
        self._copy_bytes = 0
        self._copy_seconds = 0.0
        self._translated: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._max_in_flight: Counter[str] = Counter()
        self._log: deque[list[Any]] = deque(maxlen=REQUEST_LOG_LIMIT)

    def reset(self) -> None:
        """Zero every counter (requests being served stay counted as in flight)."""
        with self._lock:
            in_flight = self._in_flight
            self._reset_unlocked()
            self._in_flight = in_flight

    def request(self, operation: S3Operation, target: RequestTarget | None = None,
                byte_range: str | None = None) -> list[Any] | None:
        """Count one request received; with its ``target``, remember it (and its ``Range`` header) in the log, and
        return its entry, for :meth:`answered`."""
        with self._lock:
            self._requests[operation.value] += 1
            if target is None:
                return None
            entry = [operation.value, target.bucket, target.key, byte_range or "", time.time(), None]
            self._log.append(entry)
            return entry

    @staticmethod
    def answered(entry: list[Any] | None) -> None:
        """The request of a log ``entry`` (:meth:`request`'s) was answered or dropped: its time is kept."""
        if entry is not None:
            entry[5] = time.time()

    def log(self) -> list[dict[str, Any]]:
        """The latest requests (at most :data:`REQUEST_LOG_LIMIT`), oldest first: ``operation``, ``bucket``,
        ``key``, ``range`` (the ``Range`` header, ``""`` without one), ``at`` (the server's wall clock, in seconds
        since the epoch, when the request arrived, before its latency) and ``answered`` (when it was answered or
        dropped; ``None`` while it is served): a timeline of the requests a test or benchmark can read against its
        own (a job commit's round trips). Zeroed with the counters."""
        with self._lock:
            return [{"operation": op, "bucket": bucket, "key": key, "range": byte_range, "at": at,
                     "answered": answered}
                    for op, bucket, key, byte_range, at, answered in self._log]

    def begin(self, operation: S3Operation) -> None:
        """A request of ``operation`` is being served (until :meth:`end`)."""
        with self._lock:
            self._in_flight[operation.value] += 1
            now = self._in_flight[operation.value]
            if now > self._max_in_flight[operation.value]:
                self._max_in_flight[operation.value] = now

    def serving(self) -> int:
        """Requests being served now, of every operation."""
        with self._lock:
            return sum(self._in_flight.values())

    def end(self, operation: S3Operation) -> None:
        """A request of ``operation`` was answered (or dropped)."""
        with self._lock:
            if self._in_flight[operation.value] > 0:
                self._in_flight[operation.value] -= 1

    def body_in(self, operation: S3Operation, nbytes: int) -> None:
        """Count request body bytes received."""
        if nbytes:
            with self._lock:
                self._bytes_in[operation.value] += nbytes

    def body_out(self, operation: S3Operation, nbytes: int) -> None:
        """Count response body bytes sent."""
        if nbytes:
            with self._lock:
                self._bytes_out[operation.value] += nbytes

    def fault(self, operation: S3Operation, kind: FaultKind, *, after_forward: bool = False) -> None:
        """Count one injected fault."""
        with self._lock:
            self._faults[operation.value][kind.value] += 1
            if after_forward:
                self._resets_after_forward[operation.value] += 1

    def throttle(self, operation: S3Operation) -> None:
        """Count one request refused by the throttle."""
        with self._lock:
            self._throttled[operation.value] += 1

    def delay(self, operation: S3Operation, seconds: float) -> None:
        """Add injected latency."""
        if seconds > 0:
            with self._lock:
                self._delay[operation.value] += seconds

    def copy(self, nbytes: int, seconds: float) -> None:
        """Count a server-side copy of ``nbytes`` and the delay injected for it."""
        with self._lock:
            self._copy_bytes += nbytes
            self._copy_seconds += seconds

    def translate(self, code: str) -> None:
        """Count an upstream error rewritten to the AWS error ``code``."""
        with self._lock:
            self._translated[code] += 1

    def snapshot(self) -> StatsSnapshot:
        """A consistent copy of every counter."""
        with self._lock:
            return StatsSnapshot(
                requests=dict(sorted(self._requests.items())),
                bytes_in=dict(sorted(self._bytes_in.items())),
                bytes_out=dict(sorted(self._bytes_out.items())),
                faults={op: dict(sorted(kinds.items())) for op, kinds in sorted(self._faults.items())},
                resets_after_forward=dict(sorted(self._resets_after_forward.items())),
                throttled=dict(sorted(self._throttled.items())),
                delay_seconds=dict(sorted(self._delay.items())),
                copy_bytes=self._copy_bytes,
                copy_seconds=self._copy_seconds,
                translated=dict(sorted(self._translated.items())),
                max_in_flight=dict(sorted(self._max_in_flight.items())),
            )
