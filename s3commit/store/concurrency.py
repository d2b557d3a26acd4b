"""How many requests the store may have in flight to one partitioned prefix at once: an adaptive (AIMD) limit.

S3 throttles per partitioned prefix (about 3,500 writes a second) and answers a request above the rate with 503
SlowDown. A fixed number of threads is either too few for a store that takes more or too many for one that does not,
so every attempt of every request (:meth:`~s3commit.store.requests.Requests.attempt`, retries included) first takes a
slot of its prefix's :class:`ConcurrencyLimit`, and frees it when the attempt ends:

- a throttling answer (:class:`~s3commit.errors.ThrottledError`: SlowDown, RequestLimitExceeded, 429...) lowers the
  limit to :data:`DECREASE` times the requests then in flight (never below 1), once per *generation*: attempts sent
  before the last decrease met the overload that decrease already answered, so a burst of 503s counts once;
- while none comes, each limit's worth of attempts answered without throttling raises it by one, up to the ceiling
  (``s3commit.store.concurrency.max``), but only while the limit is in use (some attempt found every slot taken):
  a process sending one request at a time learns nothing of what the store would take.

The limit starts at its ceiling, so a small job sends as it did before the limit existed, and goes back to it once
it has met no throttle for :data:`RECOVER_SECONDS` (at the next attempt): what it learnt is then stale, and a
process that started anew would send as many. Without this, a limit brought down by a few heavy requests (an
overwrite's DeleteObjects of 1,000 keys, 2 in flight, lower it to 1) left the next job of a long-lived process (a
Spark sidecar) sending its Completes 1 or 2 at a time, growing one slot per limit's worth of answers: ~33,000
answers to reach 256. :data:`DECREASE` is 0.7
rather than TCP's half: a sawtooth between a limit and half of it uses about 75% of the rate the store allows, which
alone would leave a long commit at 1.33x its throttled floor; between a limit and 0.7 of it, about 85%.

**What it keys on.** The endpoint, the bucket and the first path element of the key (``warehouse`` of
``warehouse/t/part-0``; ``""`` for keys without ``/`` and requests without a key), as the simulator's
``ThrottleSpec`` models S3's partitions: a job's Completes, deletes and ``_SUCCESS`` under one table share one limit,
while a process writing to two top-level prefixes adapts to each on its own. S3 may split a prefix further (deeper
partitions take more); one limit over them is conservative, and a bucket S3 has not split yet throttles two
top-level prefixes together: each limit then backs off on its own throttles, as two TCP flows on one link do.

**Weight.** Every request counts one, a DeleteObjects of 1,000 keys too, though S3 counts each key as a write: the
limit is on requests in flight and learns, from the throttles, how many of the requests being sent the prefix
takes; weighing a request by its keys would equate a key being deleted with a Complete in flight, whose latencies
differ, and a 1,000-key request would take every slot of any ceiling (deletes one at a time, below S3's rate).

**Shared by the process.** :data:`PROCESS_LIMITS` holds the limits of every :class:`~s3commit.store.s3store.S3Store`
of the process (one endpoint, bucket, prefix and settings: one limit), because S3 throttles what the process
sends, not what one store object sends: a Spark sidecar has a store per configuration registered
(:mod:`s3commit.bridge.registry`), and a committer unpickled in a worker builds its own store. Another process (an
executor's sidecar, a Dask worker) has its own limits and backs off on its own throttles. A
:class:`~s3commit.testing.memory.MemoryS3` store, one simulated process, gets limits of its own.

Nothing here sleeps: a request waits for a slot on a condition variable; the clock (injectable) only times the waits.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DECREASE = 0.7
"""A throttle lowers the limit to this fraction of the requests in flight (see the module docstring)."""


RECOVER_SECONDS = 10.0
"""A limit below its ceiling that has met no throttle for this long goes back to its ceiling (module docstring)."""


def limit_partition(key: str | None) -> str:
    """The partition a request to ``key`` is limited under: the key's first path element (``""`` without one)."""
    if not key or "/" not in key:
        return ""
    return key.split("/", 1)[0]


SLOT_POLL_SECONDS = 0.005
"""How often an event loop waiting for a slot (:meth:`ConcurrencyLimit.try_acquire`) looks again when none of its own
requests ended (another thread's may have: the limit is the process's)."""


@dataclass
class LimitWatch:
    """What one limit did while a caller (a job commit) watched it (:meth:`ConcurrencyLimit.watch`)."""

    low: int
    high: int
    throttles: int = 0
    """Throttling answers to attempts under this limit while watched."""
    decreases: int = 0
    final: int = 0
    """The limit when the watch ended (:meth:`ConcurrencyLimit.unwatch`), or now while it runs."""


@dataclass(frozen=True)
class LimitState:
    """A limit's state (:meth:`ConcurrencyLimit.state`): what a run or a benchmark reads after the fact."""

    limit: int
    ceiling: int
    in_flight: int
    low: int
    """The lowest the limit has been since it was made."""
    high: int
    attempts: int
    throttles: int
    decreases: int
    increases: int
    recoveries: int
    """Times the limit went back to its ceiling after :data:`RECOVER_SECONDS` without a throttle."""
    waits: int
    """Attempts that found every slot taken and waited."""
    waited_seconds: float


class ConcurrencyLimit:
    """At most :attr:`limit` attempts in flight, the limit adapting to throttling answers (module docstring).

    Args:
        ceiling: the largest (and first) limit.
        adaptive: False: the limit stays at ``ceiling`` (throttles are still counted).
        decrease: the fraction of the requests in flight a throttle leaves as the limit.
        recover_after: seconds without a throttle after which a lowered limit goes back to its ceiling.
        clock: times the waits for a slot and the time since the last throttle (injectable; nothing here sleeps).
    """

    def __init__(self, ceiling: int, *, adaptive: bool = True, decrease: float = DECREASE,
                 recover_after: float = RECOVER_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        if ceiling < 1:
            raise ValueError(f"ceiling must be >= 1, got {ceiling}")
        if not 0 < decrease < 1:
            raise ValueError(f"decrease must be between 0 and 1, got {decrease}")
        self.ceiling = ceiling
        self.adaptive = adaptive
        self.decrease = decrease
        self.recover_after = recover_after
        self._clock = clock
        self._last_throttle = 0.0
        self._free = threading.Condition()
        self.limit = ceiling
        self.in_flight = 0
        self._generation = 0
        self._answered = 0  # attempts answered without a throttle since the limit last changed
        self._saturated = False  # some attempt found every slot taken since the limit last changed
        self._low = self._high = ceiling
        self._attempts = self._throttles = self._decreases = self._increases = self._recoveries = self._waits = 0
        self._waited = 0.0
        self._watches: list[LimitWatch] = []

    def acquire(self) -> int:
        """Wait for a slot and take it; returns the generation to give back to :meth:`release`."""
        with self._free:
            if self.limit < self.ceiling:
                self._recover()
            if self.in_flight >= self.limit:
                self._saturated = True
                self._waits += 1
                started = self._clock()
                while self.in_flight >= self.limit:
                    self._free.wait()
                self._waited += self._clock() - started
            self.in_flight += 1
            self._attempts += 1
            if self.in_flight >= self.limit:
                self._saturated = True
            return self._generation

    def try_acquire(self) -> int | None:
        """Take a slot if one is free (its generation, for :meth:`release`), else None at once: for a caller that
        waits for slots its own way (an event loop, which must not block)."""
        with self._free:
            if self.limit < self.ceiling:
                self._recover()
            if self.in_flight >= self.limit:
                self._saturated = True
                return None
            self.in_flight += 1
            self._attempts += 1
            if self.in_flight >= self.limit:
                self._saturated = True
            return self._generation

    def release(self, generation: int, *, throttled: bool) -> None:
        """Free the slot taken at ``generation``; ``throttled``: the attempt was answered with a throttle."""
        with self._free:
            flight = self.in_flight
            self.in_flight -= 1
            if throttled:
                self._throttles += 1
                self._last_throttle = self._clock()
                for watch in self._watches:
                    watch.throttles += 1
                if self.adaptive and generation == self._generation:
                    self._set(max(1, min(self.limit, math.floor(flight * self.decrease))))
                    self._generation += 1
                    self._decreases += 1
                    for watch in self._watches:
                        watch.decreases += 1
            elif self.adaptive and self.limit < self.ceiling:
                self._answered += 1
                if self._answered >= self.limit and self._saturated:
                    self._set(self.limit + 1)
                    self._increases += 1
            self._free.notify()

    def _recover(self) -> None:
        """Back to the ceiling if no throttle came for :attr:`recover_after` seconds (the lock held)."""
        if self.adaptive and self._clock() - self._last_throttle >= self.recover_after:
            self._set(self.ceiling)
            self._recoveries += 1

    def _set(self, limit: int) -> None:
        grown = limit > self.limit
        self.limit = limit
        self._answered = 0
        self._saturated = False
        self._low, self._high = min(self._low, limit), max(self._high, limit)
        for watch in self._watches:
            watch.low, watch.high = min(watch.low, limit), max(watch.high, limit)
        if grown:
            self._free.notify_all()

    def watch(self) -> LimitWatch:
        """Start recording the limit's low, high and throttles for a caller, until :meth:`unwatch`."""
        with self._free:
            watch = LimitWatch(low=self.limit, high=self.limit, final=self.limit)
            self._watches.append(watch)
            return watch

    def unwatch(self, watch: LimitWatch) -> LimitWatch:
        """Stop ``watch`` and return it, its :attr:`~LimitWatch.final` the limit now."""
        with self._free:
            if watch in self._watches:
                self._watches.remove(watch)
            watch.final = self.limit
            return watch

    def state(self) -> LimitState:
        with self._free:
            return LimitState(limit=self.limit, ceiling=self.ceiling, in_flight=self.in_flight, low=self._low,
                              high=self._high, attempts=self._attempts, throttles=self._throttles,
                              decreases=self._decreases, increases=self._increases,
                              recoveries=self._recoveries, waits=self._waits,
                              waited_seconds=self._waited)


LimitKey = tuple[str, str, str, int, bool]
"""(endpoint, bucket, partition, ceiling, adaptive): stores with other settings have limits of their own."""


class ConcurrencyLimits:
    """The limits of one process (or one simulated process), one per endpoint, bucket and partition."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._limits: dict[LimitKey, ConcurrencyLimit] = {}

    def get(self, endpoint: str, bucket: str, key: str | None, *, ceiling: int,
            adaptive: bool = True) -> ConcurrencyLimit:
        """The limit of requests to ``key`` in ``bucket`` at ``endpoint`` (made on first use)."""
        slot = (endpoint, bucket, limit_partition(key), ceiling, adaptive)
        with self._lock:
            found = self._limits.get(slot)
            if found is None:
                found = self._limits[slot] = ConcurrencyLimit(ceiling, adaptive=adaptive, clock=self._clock)
            return found

    def states(self) -> dict[str, LimitState]:
        """Every limit's state, by ``bucket/partition`` (``endpoint`` first where it is set)."""
        with self._lock:
            limits = dict(self._limits)
        return {"/".join(p for p in (endpoint, bucket, partition) if p) or "/": limit.state()
                for (endpoint, bucket, partition, _, _), limit in limits.items()}


PROCESS_LIMITS = ConcurrencyLimits()
"""The limits every store of this process shares (module docstring)."""
