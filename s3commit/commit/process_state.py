"""What one process keeps across the jobs it serves, in one object you can see (:class:`ProcessState`).

- ``tasks``: the magic task attempts this process writes files for, what their task commits take
  (:class:`~s3commit.commit.task_registry.MagicTaskRegistry`);
- ``keepers``: the liveness records this process keeps fresh, each ending with its job
  (:class:`~s3commit.commit.liveness.Keepers`);
- ``preloads``: the pendingsets it reads as tasks commit, for the jobs it commits
  (:class:`~s3commit.commit.preload.PendingsetPreloads`);
- ``said``: the warnings said once in this process (``say_once``);
- ``seen``: objects it wrote or read whose ETag says whether they changed since (its commit lease as it released
  it, a snapshot log's settings and latest entry) (:class:`SeenObjects`);
- ``clock``: what its waits and timers run on (a lease's wait, a liveness record's renewals); a test passes one
  it moves (:class:`~s3commit.commit.clock.Clock`). Whether a lease or a record is old is never this clock's to
  say: the store's clock says it.

The rest is not kept past its use: a job's lock in this process lives while operations of the job run
(:func:`s3commit.commit.ownership.one_operation`); what a store honours is a cache of facts about the store, by
endpoint and bucket (:mod:`s3commit.store.capability_cache`), not of any job; and the requests in flight to each
prefix are the process's, whichever job sends them (:data:`s3commit.store.concurrency.PROCESS_LIMITS`, below this
layer: S3 throttles what the process sends; a store may be given limits of its own, as a simulated process's are).

Who owns it: the sidecar server makes one for everything it serves (:class:`s3commit.bridge.handlers.BridgeHandlers`),
and the committer factory hands one to each committer (``create_committer(..., process=)``; by default
:data:`THIS_PROCESS`, the process's own). A committer pickled to another process takes that process's own there. A
test that runs several simulated processes in one gives each its own: a process that dies takes its state with it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from s3commit.commit.clock import SYSTEM_CLOCK, Clock
from s3commit.commit.liveness import Keepers
from s3commit.commit.preload import PendingsetPreloads
from s3commit.commit.task_registry import MagicTaskRegistry


class SeenObjects:
    """Objects this process wrote or read, by store endpoint, bucket and key: the ETag it saw and what the object
    held then (parsed, or its bytes: a snapshot log's latest entry). S3 gives every write a new ETag, so a listing or
    a conditional request that finds the same ETag finds the same object: what it held need not be read again.
    Bounded in objects and in the bytes of those kept as bytes (the oldest forgotten first)."""

    LIMIT = 1024
    BYTES = 64 << 20
    """The most bytes kept in values that are bytes (a larger one is not kept at all)."""
    ABSENT = "(absent)"
    """The ETag recorded for a key seen to hold no object (no ETag has this form)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], tuple[str, Any]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, endpoint: str, bucket: str, key: str) -> tuple[str, Any] | None:
        """(ETag, what it held) of the object last seen at ``key``, or None."""
        with self._lock:
            return self._seen.get((endpoint, bucket, key))

    def put(self, endpoint: str, bucket: str, key: str, etag: str, value: Any) -> None:
        size = len(value) if isinstance(value, bytes) else 0
        if not etag or size > self.BYTES:
            self.forget(endpoint, bucket, key)
            return
        with self._lock:
            self._pop((endpoint, bucket, key))
            while self._seen and (len(self._seen) >= self.LIMIT or self._bytes + size > self.BYTES):
                self._pop(next(iter(self._seen)))
            self._seen[(endpoint, bucket, key)] = (etag, value)
            self._bytes += size

    def forget(self, endpoint: str, bucket: str, key: str) -> None:
        with self._lock:
            self._pop((endpoint, bucket, key))

    def _pop(self, where: tuple[str, str, str]) -> None:
        gone = self._seen.pop(where, None)
        if gone is not None and isinstance(gone[1], bytes):
            self._bytes -= len(gone[1])


@dataclass(eq=False)
class ProcessState:
    """One process's state across jobs (see the module docstring)."""

    tasks: MagicTaskRegistry = field(default_factory=MagicTaskRegistry)
    keepers: Keepers = field(default_factory=Keepers)
    preloads: PendingsetPreloads = field(default_factory=PendingsetPreloads)
    """Pendingsets read as their tasks commit, for the jobs this process commits (:mod:`s3commit.commit.preload`)."""
    said: set[tuple[str, ...]] = field(default_factory=set)
    clock: Clock = SYSTEM_CLOCK
    seen: SeenObjects = field(default_factory=SeenObjects)
    snapshot_dests: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(destination, job id) -> whether the job's destination kept a snapshot log when a task of the job first
    asked in this process: a sidecar asks once a job, not once a task (the job commit copes with a change since);
    (sink, "") for a streaming sink, asked once a sink."""
    _said_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot_destination(self, dest: str, job_id: str, ask: Callable[[], bool]) -> bool:
        """Whether ``dest`` is a snapshot destination for job ``job_id`` (``ask`` the first time in this process)."""
        key = (dest, job_id)
        known = self.snapshot_dests.get(key)
        if known is None:
            known = ask()
            with self._said_lock:
                if len(self.snapshot_dests) >= 1024:  # a long-lived sidecar: forget the oldest jobs
                    self.snapshot_dests.pop(next(iter(self.snapshot_dests)))
                self.snapshot_dests[key] = known
        return known

    def end(self) -> None:
        """The process's work ends (a sidecar closing; a simulated process dying): no record is kept fresh after it."""
        self.keepers.stop_all()
        self.preloads.close()

    def say_once(self, log: logging.Logger, what: tuple[str, ...], level: int, message: str, *args: object) -> None:
        """Log ``message`` once in this process for ``what``."""
        with self._said_lock:
            if what in self.said:
                return
            self.said.add(what)
        log.log(level, message, *args)


THIS_PROCESS = ProcessState()
"""This process's own state: what the committer factory hands a committer unless told otherwise."""
