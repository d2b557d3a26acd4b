"""The client's clock, as the commit layer's timers see it: passed in, so a test drives time instead of sleeping.

Only the timers of this process use it: when a liveness record or a lease is renewed, how long a waiter has waited.
Whether a record or a lease is *old* is never judged by it, but by the store's clock (the ``Date`` of an answer
against an object's ``Last-Modified``: :mod:`s3commit.commit.lease`, :mod:`s3commit.commit.sweep`).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic seconds, and the two ways a timer lets time pass."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (its origin means nothing)."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed; True if it was set."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        ...


class SystemClock:
    """This host's monotonic clock: what every timer uses unless a test gives it another."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(seconds)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()
"""The one :class:`SystemClock` (it holds no state)."""
