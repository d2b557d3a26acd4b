"""The simulated store's clock, which a test moves on instead of sleeping.

Whether a liveness record or a commit lease is old is judged on the store's clock: the ``Date`` of an answer against
an object's ``Last-Modified``. To make a record old, a test *advances* the clock of its bucket (``POST
/__sim/advance``): from then on every ``Date`` of an answer about that bucket is that much later, while the objects
written there before keep the dates they had, so they are that much older; an object written after it is dated on
the advanced clock, so it is new. The clock moves per bucket, as each test has a bucket of its own: a test's
advance never ages another test's objects, nor moves the time another test reads. It only moves forward: a reset of
the simulator keeps it (the objects dated on it stay consistent).

moto dates an object on this host's clock; the simulator notes, for each object written through it in a bucket whose
clock has moved, how far it had moved then, and moves that object's ``Last-Modified`` (headers and listings) by as
much. Objects written before the first advance need no note; objects written behind its back (on moto's raw
endpoint) keep moto's date. ``clock_offset`` (a store whose clock is off this host's) applies on top of both.
"""

from __future__ import annotations

import threading
import time


class StoreClock:
    """This host's clock moved on by :meth:`advance` per bucket, and the objects dated on a moved clock.
    Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._advanced: dict[str, float] = {}
        self._written: dict[tuple[str, str], float] = {}

    def advanced(self, bucket: str) -> float:
        """Seconds ``bucket``'s clock has moved on from this host's."""
        with self._lock:
            return self._advanced.get(bucket, 0.0)

    def now(self, bucket: str) -> float:
        """The store's time for ``bucket``, in ``time.time()`` seconds (without ``clock_offset``)."""
        return time.time() + self.advanced(bucket)

    def advance(self, bucket: str, seconds: float) -> float:
        """Move ``bucket``'s clock on by ``seconds`` (>= 0); returns how far it has moved in all."""
        if not bucket:
            raise ValueError("the clock moved on is a bucket's: name one")
        if not seconds >= 0:
            raise ValueError(f"the store's clock only moves forward: advance by {seconds!r} s")
        with self._lock:
            moved = self._advanced[bucket] = self._advanced.get(bucket, 0.0) + seconds
            return moved

    def written(self, bucket: str, key: str) -> None:
        """An object was written through the simulator now: it is dated on its bucket's clock as it is now."""
        with self._lock:
            moved = self._advanced.get(bucket, 0.0)
            if moved:
                self._written[(bucket, key)] = moved
            else:
                self._written.pop((bucket, key), None)

    def deleted(self, bucket: str, key: str) -> None:
        with self._lock:
            self._written.pop((bucket, key), None)

    def shift(self, bucket: str, key: str) -> float:
        """Seconds to add to moto's date of the object ``bucket/key`` (0: written before its clock moved)."""
        with self._lock:
            return self._written.get((bucket, key), 0.0)
