"""The simulated store's clock, which a test moves on instead of sleeping.

Whether a liveness record or a commit lease is old is judged on the store's clock: the ``Date`` of an answer against
an object's ``Last-Modified``. To make a record old, a test *advances* the store's clock (``POST /__sim/advance``):
from then on every ``Date`` the simulator sends is that much later, while the objects written before keep the dates
they had, so they are that much older; an object written after it is dated on the advanced clock, so it is new.
Time at the store only moves forward: a reset of the simulator keeps the advance (the objects dated on it stay
consistent).

moto dates an object on this host's clock; the simulator notes, for each object written through it once the clock
has moved, how far the clock had moved then, and moves that object's ``Last-Modified`` (headers and listings) by as
much. Objects written before the first advance need no note; objects written behind its back (on moto's raw
endpoint) keep moto's date. ``clock_offset`` (a store whose clock is off this host's) applies on top of both.
"""

from __future__ import annotations

import threading
import time


class StoreClock:
    """This host's clock moved on by :meth:`advance`, and the objects dated on the moved clock. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._advanced = 0.0
        self._written: dict[tuple[str, str], float] = {}

    @property
    def advanced(self) -> float:
        """Seconds the store's clock has moved on from this host's."""
        return self._advanced

    def now(self) -> float:
        """The store's time, in ``time.time()`` seconds (without ``clock_offset``)."""
        return time.time() + self._advanced

    def advance(self, seconds: float) -> float:
        """Move the store's clock on by ``seconds`` (>= 0); returns how far it has moved in all."""
        if not seconds >= 0:
            raise ValueError(f"the store's clock only moves forward: advance by {seconds!r} s")
        with self._lock:
            self._advanced += seconds
            return self._advanced

    def written(self, bucket: str, key: str) -> None:
        """An object was written through the simulator now: it is dated on the clock as it is now."""
        with self._lock:
            if self._advanced:
                self._written[(bucket, key)] = self._advanced
            else:
                self._written.pop((bucket, key), None)

    def deleted(self, bucket: str, key: str) -> None:
        with self._lock:
            self._written.pop((bucket, key), None)

    def shift(self, bucket: str, key: str) -> float:
        """Seconds to add to moto's date of the object ``bucket/key`` (0: written before the clock moved)."""
        with self._lock:
            return self._written.get((bucket, key), 0.0)
