"""Requests held at the simulator until the test lets them go: a race staged by order, not by latency.

A test that needs "the commit is reading its pendingsets while another run writes the sink's log" once made GETs
slow for a few seconds and hoped the other write landed within them; a loaded machine lost that race. Instead the
test *holds* an operation (``POST /__sim/hold``; only on keys with a given ending if it says so): each such
request waits, before it is forwarded, until the test *releases* it (``POST /__sim/release``, or a reset).
``GET /__sim/held`` says how many wait now, so the test knows the code under test has reached the request before it
acts. A request waits at most :data:`HOLD_LIMIT` seconds (a test that forgot to release fails instead of hanging).
"""

from __future__ import annotations

import threading
from collections import Counter

from s3commit.testing._sim.classify import S3Operation

HOLD_LIMIT = 300.0
"""Seconds a held request waits at most before it goes on by itself."""


class Holds:
    """The operations held now, and how many requests of each wait. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[S3Operation, tuple[str, threading.Event]] = {}
        self._waiting: Counter[S3Operation] = Counter()

    def hold(self, operation: S3Operation, ending: str = "") -> None:
        """Hold the requests of ``operation`` on a key ending with ``ending`` that arrive from now on (until
        :meth:`release`); a second hold of one operation replaces the first's ending."""
        with self._lock:
            gate = self._gates[operation][1] if operation in self._gates else threading.Event()
            self._gates[operation] = (ending, gate)

    def release(self, operation: S3Operation | None = None) -> None:
        """Let ``operation``'s held requests go, and hold no more of them (``None``: every operation's)."""
        with self._lock:
            if operation is None:
                gates = [gate for _ending, gate in self._gates.values()]
                self._gates.clear()
            else:
                gates = [gate for _ending, gate in [self._gates.pop(operation, ("", None))] if gate is not None]
        for gate in gates:
            gate.set()

    def waiting(self) -> dict[str, int]:
        """How many requests wait now, by operation (its boto3 name)."""
        with self._lock:
            return {operation.value: count for operation, count in self._waiting.items() if count}

    def pass_through(self, operation: S3Operation, key: str) -> None:
        """Called by each request before it is forwarded: returns at once, or once its operation is released."""
        with self._lock:
            ending, gate = self._gates.get(operation, ("", None))
            if gate is None or not key.endswith(ending):
                return
            self._waiting[operation] += 1
        try:
            gate.wait(HOLD_LIMIT)
        finally:
            with self._lock:
                self._waiting[operation] -= 1
