"""Counters of the requests a store makes, by S3 operation: requests, retries, failures, throttling answers
(attempts answered 503 SlowDown or the like, each retried or counted a failure too), bytes uploaded and
bytes copied server-side. Thread-safe; ``snapshot()`` gives a plain dict (what ``_SUCCESS`` metrics, benchmark
reports and tests read)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class StoreCounters:
    """Thread-safe counters of requests by operation; ``snapshot()`` gives a plain dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.throttles: Counter[str] = Counter()
        self.bytes_uploaded = 0
        self.bytes_copied = 0

    def add(self, name: str, operation: str, amount: int = 1) -> None:
        with self._lock:
            getattr(self, name)[operation] += amount

    def add_bytes(self, *, uploaded: int = 0, copied: int = 0) -> None:
        with self._lock:
            self.bytes_uploaded += uploaded
            self.bytes_copied += copied

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "retries": dict(self.retries),
                "failures": dict(self.failures),
                "throttles": dict(self.throttles),
                "total_requests": sum(self.requests.values()),
                "bytes_uploaded": self.bytes_uploaded,
                "bytes_copied": self.bytes_copied,
            }

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.retries.clear()
            self.failures.clear()
            self.throttles.clear()
            self.bytes_uploaded = 0
            self.bytes_copied = 0
