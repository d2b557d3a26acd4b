"""Time in tests without sleeping: a client clock the test moves (:class:`ManualClock`), the store's clock moved on
(:func:`let_store_time_pass`), and a job's liveness keeper put on a test's clock (:func:`keeper_on`).

A record or a lease is old by the store's clock (its ``Date`` against an object's ``Last-Modified``): on moto the
simulator's clock of the test's bucket is moved on (``S3TestServer.advance_clock``); SeaweedFS and rclone (the slow
tier) have no such clock, and there the time passes for real. When a job renews is the client's clock: a
:class:`ManualClock`, passed to the timer, makes each renewal happen at the test's word.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from s3commit.commit.liveness import JobLiveness

SETTLE = 30.0
"""Seconds a :meth:`ManualClock.advance` waits at most for the timers it woke to finish what they do."""


class ManualClock:
    """A :class:`s3commit.commit.clock.Clock` whose time moves only when the test calls :meth:`advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._changed = threading.Condition()
        self._deadlines: dict[threading.Thread, float] = {}

    def monotonic(self) -> float:
        with self._changed:
            return self._now

    def wait(self, event: threading.Event, seconds: float) -> bool:
        me = threading.current_thread()
        with self._changed:
            deadline = self._deadlines[me] = self._now + seconds
            try:
                while not event.is_set() and self._now < deadline:
                    self._changed.wait(0.05)  # an event's set() does not notify this condition: look again soon
                return event.is_set()
            finally:
                del self._deadlines[me]

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    def until_waiting(self, thread: threading.Thread) -> bool:
        """Return once ``thread`` waits on this clock (True), or has ended (False)."""
        limit = time.monotonic() + SETTLE
        with self._changed:
            while thread not in self._deadlines:
                if not thread.is_alive():
                    return False
                if time.monotonic() > limit:
                    raise AssertionError(f"{thread.name} neither waited on the clock nor ended within {SETTLE:g} s")
                self._changed.wait(0.01)  # a wait's start notifies nothing: look again soon
        return True

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``, and return once every timer it woke has done its work: it waits again, or
        its thread ended."""
        with self._changed:
            self._now += seconds
            woken = [thread for thread, deadline in self._deadlines.items() if deadline <= self._now]
            self._changed.notify_all()
            limit = time.monotonic() + SETTLE
            while any(thread.is_alive() and self._deadlines.get(thread, self._now) <= self._now for thread in woken):
                if time.monotonic() > limit:
                    raise AssertionError(f"a timer woken at {self._now:g} s did not wait again within {SETTLE:g} s")
                self._changed.wait(0.01)  # a thread's end notifies nothing: look again soon


def let_store_time_pass(server: Any, bucket: str, seconds: float) -> None:
    """``seconds`` pass on ``server``'s clock for ``bucket``: moved on where the server can (moto's simulator),
    slept elsewhere."""
    if hasattr(server, "advance_clock"):
        server.advance_clock(bucket, seconds)
    else:
        time.sleep(seconds)


def keeper_on(clock: ManualClock, committer: Any) -> JobLiveness:
    """``committer``'s liveness keeper (started at its job's setup) stopped and replaced by one on ``clock`` that
    holds the same record and ETag: the job's renewals then come as the test advances ``clock``."""
    started = committer.process.keepers.keeper_of(committer.dest, committer.job_id)
    assert started is not None, "the job keeps no liveness record in this process"
    started.stop()
    replacement = JobLiveness(started.store, started.dest, committer.layout, started.record, started.etag,
                              conditional=started.conditional, clock=clock)
    return committer.process.keepers.keep(replacement, owner=committer)
