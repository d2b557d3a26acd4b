"""Bounded parallel work: every "do this for each item, on a pool" in s3commit goes through here.

- :func:`run_each` calls a function for its effect (complete, abort, revert, copy) on every item. At most
  ``window`` calls are queued or running at once, and a finished call leaves nothing behind (no future is
  kept), so memory stays flat however many items there are. Failures are collected with their items and
  returned, never raised; with ``stop_on_failure`` the first one stops the rest (calls already running
  finish, calls not yet started are skipped).
- :func:`map_ordered` is for results: they come back in the order of the items, while at most ``window``
  calls run ahead of the consumer. :func:`gather` collects it: every result, in order, and every failure.
- :func:`quiet_collector` keeps Python's garbage collector from scanning, again and again, the objects that were
  there before a burst of work began (a job commit of 100,000 files).

Items are drawn lazily, so an iterator of 100,000 uploads is never held whole. The pool is the caller's: its
threads bound the concurrency, the window bounds the work waiting for them. This module knows nothing of S3.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

IN_FLIGHT_PER_THREAD = 4
"""A window of this many calls per pool thread keeps every thread busy with little queued."""


@dataclass(frozen=True)
class Failure(Generic[Item]):
    """One call that raised: the item it was given and what it raised."""

    item: Item
    error: BaseException


_QUIET = threading.Lock()
_quiet_depth = 0


@contextlib.contextmanager
def quiet_collector() -> Iterator[None]:
    """Within: every object that existed on entry is left out of the garbage collector's passes (``gc.freeze``),
    and put back on the way out (``gc.unfreeze``); nothing is lost, cycles made before are collected after.

    Why: a burst of work that makes many objects living for a while (a job commit reading 100,000 pendingset
    entries, its Completes' tasks and answers) sets off the collector's full passes, each a scan of the whole heap
    (the client's models, the caller's data): measured, ~80 ms each, stalling every request's answer, 4-5 s of a
    100,000-file commit's 27 s of CPU. Nested and concurrent uses share one freeze; where something else froze the
    heap (``gc.get_freeze_count()`` at entry), it is left as it is."""
    global _quiet_depth
    with _QUIET:
        mine = _quiet_depth > 0 or gc.get_freeze_count() == 0
        if mine:
            if _quiet_depth == 0:
                # The young generations first: their garbage freed, their survivors counted into the oldest (as
                # their promotion is counted, which decides the next full pass). Frozen young garbage would be put
                # back into the oldest generation uncounted, to wait for a full pass: a sidecar committing job after
                # job grew by 37 MB in 900 jobs that way.
                gc.collect(1)
                gc.freeze()
            _quiet_depth += 1
    try:
        yield
    finally:
        if mine:
            with _QUIET:
                _quiet_depth -= 1
                if _quiet_depth == 0:
                    gc.unfreeze()


def window_for(threads: int) -> int:
    """The window for a pool of ``threads`` threads (:data:`IN_FLIGHT_PER_THREAD` calls per thread)."""
    return max(1, threads) * IN_FLIGHT_PER_THREAD


def run_each(pool: Executor, items: Iterable[Item], fn: Callable[[Item], object], *, window: int,
             stop_on_failure: bool = False) -> list[Failure[Item]]:
    """Call ``fn(item)`` for every item on ``pool``, at most ``window`` calls queued or running at once;
    return the failures (none is raised), in the order they happened.

    With ``stop_on_failure`` the first failure stops the submission of more items, and calls submitted
    but not started are skipped. Returns once every call that started has finished.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    slots = threading.Semaphore(window)
    pending: set[Future[None]] = set()
    failures: list[Failure[Item]] = []
    lock = threading.Lock()
    stopped = threading.Event()

    def call(item: Item) -> None:
        if stopped.is_set():
            return
        try:
            fn(item)
        except BaseException as err:
            with lock:
                failures.append(Failure(item, err))
            if stop_on_failure:
                stopped.set()

    def finished(future: Future[None]) -> None:
        with lock:
            pending.discard(future)
        slots.release()

    for item in items:
        if stopped.is_set():
            break
        slots.acquire()
        future = pool.submit(call, item)
        with lock:
            pending.add(future)
        future.add_done_callback(finished)
    with lock:
        outstanding = list(pending)
    wait(outstanding)
    return failures


def resolved(value: Result) -> Future[Result]:
    """``value`` as a future already done: where a caller takes futures, a value it has already."""
    future: Future[Result] = Future()
    future.set_result(value)
    return future


def map_ordered(pool: Executor, items: Iterable[Item], fn: Callable[[Item], Result], *,
                window: int) -> Iterator[tuple[Item, Future[Result]]]:
    """``fn(item)`` for every item on ``pool``, yielded in the order of the items as ``(item, future)``, with
    at most ``window`` calls submitted ahead of the consumer (``future.result()`` returns or raises).

    A consumer that stops early leaves the calls already submitted to finish on the pool.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    ahead: deque[tuple[Item, Future[Result]]] = deque()
    for item in items:
        ahead.append((item, pool.submit(fn, item)))
        if len(ahead) >= window:
            yield ahead.popleft()
    while ahead:
        yield ahead.popleft()


def gather(pool: Executor, items: Iterable[Item], fn: Callable[[Item], Result], *,
           window: int) -> tuple[list[Result], list[Failure[Item]]]:
    """Every result of ``fn`` over ``items`` (in their order) and every failure; runs them all, raises none."""
    results: list[Result] = []
    failures: list[Failure[Item]] = []
    for item, future in map_ordered(pool, items, fn, window=window):
        try:
            results.append(future.result())
        except Exception as err:
            failures.append(Failure(item, err))
    return results, failures


class RateLimiter:
    """At most ``rate`` acquisitions per second across threads (0: unlimited)."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self._sleep(start - now)


class SerialExecutor(Executor):
    """Runs each call in the calling thread, as it is submitted (a writer with no pool: tests, ``threads=0``)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:
            future.set_exception(err)
        return future
