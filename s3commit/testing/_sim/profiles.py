"""The performance envelope of S3 the simulator imitates: latency profiles and a request-rate throttle.

A :class:`LatencyProfile` says how long S3 takes per operation (time to first byte), how fast one request
moves its body, and how fast S3 copies bytes server-side (CopyObject, UploadPartCopy). Three named profiles
are provided (``none``, ``s3-standard``, ``s3-express``); every number carries its source (AWS's
published S3 performance figures and measurements). A :class:`Throttle` answers "may this write go through now?"
per prefix with a token bucket, the way S3 answers 503 SlowDown above its per-prefix request rate, and splits a
prefix's partition once it has throttled for a sustained period, as S3 does.

This module only computes delays and admissions. Sleeping, counting and answering are the simulator's job
(:mod:`s3commit.testing._sim.simulator`, over HTTP) and the memory store's (:mod:`s3commit.testing.memory_wire`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from s3commit.testing._sim.classify import WRITE_OPERATIONS, S3Operation

MB = 1_000_000

_Op = S3Operation


class ProfileName(str, Enum):
    """The named latency profiles."""

    NONE = "none"
    S3_STANDARD = "s3-standard"
    S3_EXPRESS = "s3-express"

    @classmethod
    def parse(cls, name: str) -> ProfileName:
        """Return the profile name ``name``; raise ``ValueError`` listing the valid values otherwise."""
        try:
            return cls(name)
        except ValueError:
            valid = ", ".join(profile.value for profile in cls)
            raise ValueError(f"unknown latency profile {name!r}; valid values are {valid}") from None


@dataclass(frozen=True, kw_only=True)
class LatencyProfile:
    """How slow S3 is: per-operation first-byte latency, per-request transfer rate, COPY bandwidth.

    Attributes:
        name: a label for reports (``"s3-standard"``, or anything for a custom profile).
        first_byte_seconds: latency added to each request of an operation before it is forwarded.
        default_first_byte_seconds: latency for operations not in ``first_byte_seconds``.
        transfer_bytes_per_second: rate at which one request moves its request or response body;
            ``None`` means bodies move instantly.
        copy_bytes_per_second: rate at which S3 copies one CopyObject / UploadPartCopy source server-side;
            ``None`` means copies are instant.
    """

    name: str
    first_byte_seconds: Mapping[S3Operation, float] = field(default_factory=dict)
    default_first_byte_seconds: float = 0.0
    transfer_bytes_per_second: float | None = None
    copy_bytes_per_second: float | None = None

    def __post_init__(self) -> None:
        latencies = {S3Operation.parse(op): float(s) for op, s in self.first_byte_seconds.items()}
        if any(s < 0 for s in latencies.values()) or self.default_first_byte_seconds < 0:
            raise ValueError(f"latency profile {self.name!r}: latencies must be >= 0")
        for rate_name in ("transfer_bytes_per_second", "copy_bytes_per_second"):
            rate = getattr(self, rate_name)
            if rate is not None and rate <= 0:
                raise ValueError(f"latency profile {self.name!r}: {rate_name} must be > 0 or None, got {rate}")
        object.__setattr__(self, "first_byte_seconds", MappingProxyType(latencies))

    def first_byte(self, operation: S3Operation) -> float:
        """Seconds before S3 starts answering one request of ``operation``."""
        return self.first_byte_seconds.get(operation, self.default_first_byte_seconds)

    def transfer_seconds(self, nbytes: int) -> float:
        """Seconds one request needs to move a body of ``nbytes``."""
        if not self.transfer_bytes_per_second or nbytes <= 0:
            return 0.0
        return nbytes / self.transfer_bytes_per_second

    def copy_seconds(self, nbytes: int, *, bandwidth: float | None = None) -> float:
        """Seconds S3 needs to copy ``nbytes`` server-side (``bandwidth`` overrides the profile's)."""
        rate = bandwidth if bandwidth is not None else self.copy_bytes_per_second
        if not rate or nbytes <= 0:
            return 0.0
        return nbytes / rate

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "name": self.name,
            "first_byte_seconds": {op.value: s for op, s in self.first_byte_seconds.items()},
            "default_first_byte_seconds": self.default_first_byte_seconds,
            "transfer_bytes_per_second": self.transfer_bytes_per_second,
            "copy_bytes_per_second": self.copy_bytes_per_second,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyProfile:
        """Build a profile from :meth:`to_dict` output."""
        return cls(
            name=str(data.get("name", "custom")),
            first_byte_seconds=dict(data.get("first_byte_seconds", {})),
            default_first_byte_seconds=float(data.get("default_first_byte_seconds", 0.0)),
            transfer_bytes_per_second=data.get("transfer_bytes_per_second"),
            copy_bytes_per_second=data.get("copy_bytes_per_second"),
        )


NO_LATENCY = LatencyProfile(name=ProfileName.NONE.value)

# S3 Standard. Source for first-byte latency: AWS whitepaper "Timeouts and Retries for Latency-Sensitive
# Applications": small requests (< 512 KB) have "median latencies often in the range of
# tens of milliseconds". We pick values inside that range, ordered by how much work S3 does:
#   - HEAD / small GET 20-25 ms: metadata lookups, the cheapest calls.
#   - PUT, UploadPart, CreateMultipartUpload, copies 30 ms: a durable write of metadata (plus the body's
#     transfer time below).
#   - LIST 40 ms: index scans returning up to 1,000 entries.
#   - CompleteMultipartUpload and DeleteObjects 50 ms: they touch many parts / keys. A published estimate of an
#     "MPU commit of 1 TB in 31 s" assumes ~0.1 s per Complete; 50 ms keeps the whitepaper's "tens of ms".
# Transfer rate, 80 MB/s per request: users measured 37-100 MB/s on one socket (scylladb#22732) and
# ~84 MiB/s for a single 50 MiB PUT (MaterializeInc/materialize#10138).
# Server-side copy, 66 MB/s per copy stream: awslabs/aws-c-s3 PR #288 (1 GiB in 15.57 s with
# 1024 MiB parts). (Older reports from 2017 quote "6-10 MB/s"; we use the newer measurement.)
S3_STANDARD = LatencyProfile(
    name=ProfileName.S3_STANDARD.value,
    first_byte_seconds={
        _Op.HEAD_OBJECT: 0.020,
        _Op.HEAD_BUCKET: 0.020,
        _Op.GET_OBJECT: 0.025,
        _Op.PUT_OBJECT: 0.030,
        _Op.UPLOAD_PART: 0.030,
        _Op.CREATE_MULTIPART_UPLOAD: 0.030,
        _Op.ABORT_MULTIPART_UPLOAD: 0.030,
        _Op.COPY_OBJECT: 0.030,
        _Op.UPLOAD_PART_COPY: 0.030,
        _Op.DELETE_OBJECT: 0.025,
        _Op.LIST_PARTS: 0.030,
        _Op.LIST_OBJECTS: 0.040,
        _Op.LIST_OBJECTS_V2: 0.040,
        _Op.LIST_MULTIPART_UPLOADS: 0.040,
        _Op.COMPLETE_MULTIPART_UPLOAD: 0.050,
        _Op.DELETE_OBJECTS: 0.050,
        _Op.CREATE_BUCKET: 0.050,
    },
    default_first_byte_seconds=0.030,
    transfer_bytes_per_second=80 * MB,
    copy_bytes_per_second=66 * MB,
)

# S3 Express One Zone: "single-digit millisecond latency" (AWS's product page). Reads 3 ms, writes 5 ms,
# multi-object work (Complete, DeleteObjects, LIST) 8 ms. No published per-connection transfer or copy
# rate exists for Express in our references, so we assume the S3 Standard rates (80 MB/s, 66 MB/s).
S3_EXPRESS = LatencyProfile(
    name=ProfileName.S3_EXPRESS.value,
    first_byte_seconds={
        _Op.HEAD_OBJECT: 0.003,
        _Op.HEAD_BUCKET: 0.003,
        _Op.GET_OBJECT: 0.003,
        _Op.LIST_OBJECTS: 0.008,
        _Op.LIST_OBJECTS_V2: 0.008,
        _Op.LIST_MULTIPART_UPLOADS: 0.008,
        _Op.COMPLETE_MULTIPART_UPLOAD: 0.008,
        _Op.DELETE_OBJECTS: 0.008,
    },
    default_first_byte_seconds=0.005,
    transfer_bytes_per_second=80 * MB,
    copy_bytes_per_second=66 * MB,
)

PROFILES: Mapping[ProfileName, LatencyProfile] = MappingProxyType(
    {ProfileName.NONE: NO_LATENCY, ProfileName.S3_STANDARD: S3_STANDARD, ProfileName.S3_EXPRESS: S3_EXPRESS}
)


def get_profile(profile: str | LatencyProfile) -> LatencyProfile:
    """Return the named profile (``"none"``, ``"s3-standard"``, ``"s3-express"``), or ``profile`` itself."""
    if isinstance(profile, LatencyProfile):
        return profile
    return PROFILES[ProfileName.parse(profile)]


@dataclass(frozen=True, kw_only=True)
class ThrottleSpec:
    """Per-prefix request-rate limits, answered with 503 SlowDown when exceeded; a prefix throttled for long enough
    splits, as S3's partitions do.

    S3 supports "at least 3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests per second per
    partitioned prefix" (AWS's S3 performance guidelines; the defaults). The simulator treats the first path element
    of the key (``a`` in ``a/b/c``; ``""`` for keys without ``/``) as a bucket's first partitions. S3 raises a hot
    prefix's limit by splitting its partition, and only once the load has lasted (AWS's guidelines: 503s "while S3
    scales"; minutes in practice), so a burst is throttled and a long run gains throughput: a partition that has been
    refusing requests for ``split_after_seconds`` (a refusal at least every second) splits one level deeper
    (:meth:`Throttle.partition`), and each part gets the whole rate.

    Attributes:
        writes_per_second: sustained write rate per partition.
        reads_per_second: sustained read rate per partition; ``None`` leaves reads unthrottled.
        burst_seconds: bucket capacity in seconds of the rate (how long a burst may run at full speed).
        split_after_seconds: how long a partition throttles before it splits; ``None``: partitions never split.
    """

    writes_per_second: float = 3500.0
    reads_per_second: float | None = 5500.0
    burst_seconds: float = 1.0
    split_after_seconds: float | None = 60.0

    def __post_init__(self) -> None:
        if self.writes_per_second <= 0 or (self.reads_per_second is not None and self.reads_per_second <= 0):
            raise ValueError("throttle rates must be > 0")
        if self.burst_seconds <= 0:
            raise ValueError(f"burst_seconds must be > 0, got {self.burst_seconds}")
        if self.split_after_seconds is not None and self.split_after_seconds <= 0:
            raise ValueError(f"split_after_seconds must be > 0 or None, got {self.split_after_seconds}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {name: getattr(self, name) for name in _THROTTLE_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThrottleSpec:
        """Build a spec from :meth:`to_dict` output (missing keys take the defaults)."""
        return cls(**{name: data[name] for name in _THROTTLE_FIELDS if name in data})


_THROTTLE_FIELDS = ("writes_per_second", "reads_per_second", "burst_seconds", "split_after_seconds")

STREAK_GAP_SECONDS = 1.0
"""A partition's run of refusals ends after this long without one (its sustained load stopped)."""


class TokenBucket:
    """A token bucket: ``rate`` tokens per second, holding at most ``capacity``; starts full."""

    def __init__(self, *, rate: float, capacity: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._capacity = capacity
        self._clock = clock
        self._tokens = capacity
        self._stamp = clock()

    def try_take(self, tokens: float = 1.0) -> bool:
        """Take ``tokens`` if there are as many (a request costing more than the capacity takes a full bucket);
        return whether they were taken. Not thread-safe by itself."""
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        needed = min(tokens, self._capacity)
        if self._tokens >= needed:
            self._tokens -= needed
            return True
        return False


def partition_prefix(key: str) -> str:
    """The prefix S3 would first partition ``key`` under in this model: its first path element."""
    return key.split("/", 1)[0] if "/" in key else ""


def deeper_prefix(key: str, prefix: str) -> str | None:
    """The partition of ``key`` one level below ``prefix`` (a prefix of ``key``) once ``prefix`` has split: the key's
    next path element (``a/b`` for ``a/b/c`` under ``a``), else its next character (``a/x`` for ``a/xyz``); ``None``
    when nothing of the key is left to split by."""
    rest = key[len(prefix):]
    base = prefix
    if rest.startswith("/"):
        base, rest = prefix + "/", rest[1:]
    if not rest:
        return None
    element = rest.split("/", 1)[0] if "/" in rest else rest[0]
    return base + (element or "/")


@dataclass
class _Streak:
    """A partition's current run of refusals: when it began and when the last one was."""

    first: float
    last: float


class Throttle:
    """Admits or refuses requests per (bucket, partition, read/write) following a :class:`ThrottleSpec`, and splits
    a partition once it has throttled for ``spec.split_after_seconds``. Thread-safe."""

    def __init__(self, spec: ThrottleSpec, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._buckets: dict[tuple[str, str, bool], TokenBucket] = {}
        self._streaks: dict[tuple[str, str], _Streak] = {}
        self._split: set[tuple[str, str]] = set()  # (bucket, prefix) of the partitions that split
        self._lock = threading.Lock()

    def partition(self, bucket: str, key: str) -> str:
        """The prefix of the partition ``key`` is in now (:func:`partition_prefix`, deeper for each split)."""
        with self._lock:
            return self._partition(bucket, key)

    def splits(self, bucket: str) -> list[str]:
        """The prefixes of ``bucket``'s partitions that have split, sorted."""
        with self._lock:
            return sorted(prefix for name, prefix in self._split if name == bucket)

    def _partition(self, bucket: str, key: str) -> str:
        prefix = partition_prefix(key)
        while (bucket, prefix) in self._split:
            deeper = deeper_prefix(key, prefix)
            if deeper is None:
                break
            prefix = deeper
        return prefix

    def admit(self, operation: S3Operation, bucket: str, key: str, *, cost: int = 1) -> bool:
        """Return ``True`` if the request may proceed, ``False`` if S3 would answer 503 SlowDown. ``cost``: the
        writes it counts as (S3 counts each key of a DeleteObjects as one)."""
        write = operation in WRITE_OPERATIONS
        rate = self.spec.writes_per_second if write else self.spec.reads_per_second
        if rate is None or not bucket:
            return True
        with self._lock:
            prefix = self._partition(bucket, key)
            slot = (bucket, prefix, write)
            token_bucket = self._buckets.get(slot)
            if token_bucket is None:
                capacity = max(1.0, rate * self.spec.burst_seconds)
                token_bucket = self._buckets[slot] = TokenBucket(rate=rate, capacity=capacity, clock=self._clock)
            if token_bucket.try_take(cost):
                return True
            self._refused(bucket, prefix, key)
            return False

    def _refused(self, bucket: str, prefix: str, key: str) -> None:
        """Count a refusal in the partition's run; split the partition once the run has lasted."""
        now = self._clock()
        streak = self._streaks.get((bucket, prefix))
        if streak is None or now - streak.last > STREAK_GAP_SECONDS:
            self._streaks[(bucket, prefix)] = _Streak(now, now)
            return
        streak.last = now
        after = self.spec.split_after_seconds
        if after is None or now - streak.first < after or deeper_prefix(key, prefix) is None:
            return
        self._split.add((bucket, prefix))
        del self._streaks[(bucket, prefix)]
        for write in (False, True):  # its keys start afresh in the partitions below
            self._buckets.pop((bucket, prefix, write), None)
