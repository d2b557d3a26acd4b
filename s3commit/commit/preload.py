"""Pendingsets read as their tasks commit, before the job commit asks for them (:class:`PendingsetPreloads`).

A job commit reads every committed task's pendingset before its first Complete: a GET each and their parsing, on
the commit's path. The driver hears of each task commit while the others still run (Spark's ``onTaskCommit``, a
Python driver as each task's message arrives: :meth:`~s3commit.committers.base.Committer.task_committed`), so the
pendingset can be read then, off that path. The job commit takes what was read (:meth:`PendingsetPreloads.take`)
and validates it as it validates what it reads itself; it reads the rest.

It is only ever a head start, never a source of truth:

- a pendingset is read only after its task commit wrote it (strong read-after-write consistency, as on S3);
- the commit takes only a pendingset written by the one task attempt it accepted for it (one rewritten since by
  another attempt is read again by the commit); it waits for reads under way, never for more than one round of
  the few readers (what is queued behind them it reads itself, many at once);
- a read that failed is left to the commit, which reads it and reports what it finds;
- at most :data:`PRELOAD_FILES` files a job are held, parsed (the entries the commit keeps parsed anyway), and a
  job's are dropped when it commits or aborts; one whose commit never comes here holds them until
  :data:`PRELOAD_JOBS` later jobs have begun.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Set
from concurrent.futures import Future, ThreadPoolExecutor, wait

from s3commit.commit.manifest_store import load_pendingset
from s3commit.model.manifests import PendingSet
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

PRELOAD_FILES = 10_000
"""Files a job's preloaded pendingsets may hold at most: as many entries as the job commit keeps parsed between its
validation and its Completes (:data:`s3commit.commit.engine.CACHE_BUDGET`), where it holds what it takes. A larger
job's later pendingsets are read by its commit."""
PRELOAD_JOBS = 8
"""Jobs whose pendingsets are held at once; a job begun past them drops the oldest one's (one whose commit never
came to this process)."""
PRELOAD_THREADS = 8
"""Threads that read the preloaded pendingsets, for every job of the process (a GET each: ~300 a second on S3)."""
WAIT_AT_MOST = 30.0
"""Seconds a job commit waits for the reads under way at most: one whose connection stopped answering costs it no
more (the commit reads that pendingset itself)."""
ENDED_JOBS = 1024
"""Jobs remembered as ended (committed or aborted here), whose late reports are ignored."""


class _JobPreload:
    """One job's pendingsets being read or read, by key."""

    def __init__(self) -> None:
        self.files = 0
        self.reads: dict[str, Future[PendingSet]] = {}


class PendingsetPreloads:
    """The pendingsets a process reads ahead for the jobs it commits (one per process: :class:`~s3commit.commit.
    process_state.ProcessState`). Thread-safe: a sidecar reports task commits from many requests at once."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[tuple[str, str], _JobPreload] = OrderedDict()
        self._ended: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()
        self._readers: ThreadPoolExecutor | None = None

    def add(self, store: S3Store, dest: S3Uri, message: TaskCommitMessage) -> bool:
        """Begin reading the pendingset of the task commit ``message`` reports, for the job's commit to ``dest``;
        returns whether it was begun (not where the message names none, carries it whole, its job ended here or
        holds :data:`PRELOAD_FILES` files already). Never raises for the read: its failure is the commit's to
        meet."""
        key = message.pendingset_key
        if key is None or message.completed:
            return False
        job = (str(dest), message.job_id)
        with self._lock:
            if job in self._ended:
                return False
            preload = self._jobs.get(job)
            if preload is None:
                preload = self._jobs[job] = _JobPreload()
                while len(self._jobs) > PRELOAD_JOBS:
                    self._jobs.popitem(last=False)
            if preload.files + message.files > PRELOAD_FILES:
                return False
            preload.files += message.files
            if self._readers is None:
                self._readers = ThreadPoolExecutor(PRELOAD_THREADS, thread_name_prefix="s3commit-preload")
            # (a later attempt of the task that reports it replaces the read: the commit takes the one it accepted)
            preload.reads[key] = self._readers.submit(load_pendingset, store, dest.bucket, key)
        return True

    def take(self, dest: S3Uri, job_id: str, accepted: Mapping[str, Set[str]]) -> dict[str, PendingSet]:
        """End the job's preload: the pendingsets read for it, by key, among ``accepted`` (each pendingset's task
        attempts the commit accepts), each written by the one attempt accepted for it. Reads under way are waited
        for (at most one round of the readers: more than :data:`PRELOAD_THREADS` left, those not begun are
        cancelled; at most :data:`WAIT_AT_MOST`); those that failed, were cancelled or did not end are left out (the
        commit reads them)."""
        preload = self._end(dest, job_id)
        if preload is None:
            return {}
        futures = list(preload.reads.values())
        if sum(1 for f in futures if not f.done()) > PRELOAD_THREADS:
            for future in futures:  # queued behind the few readers: the commit reads those, many at once
                future.cancel()
        wait(futures, timeout=WAIT_AT_MOST)  # those being read: about as long as the commit's own GET would take
        taken: dict[str, PendingSet] = {}
        for key, future in preload.reads.items():
            attempts = accepted.get(key)
            if attempts is None or not future.done() or future.cancelled() or future.exception() is not None:
                continue
            pendingset = future.result()
            # One attempt accepted, and the one that wrote what was read. (Where two attempts of the task committed,
            # the last to write it wins, and a read between their writes may hold the other's: the commit reads it.)
            if len(attempts) == 1 and pendingset.task_attempt_id in attempts:
                taken[key] = pendingset
        log.debug("job %s: %d of %d pendingsets read as their tasks committed", job_id, len(taken), len(accepted))
        return taken

    def forget(self, dest: S3Uri, job_id: str) -> None:
        """End the job's preload, taking nothing (its commit failed before it took them, or the job aborted)."""
        preload = self._end(dest, job_id)
        if preload is not None:
            for future in preload.reads.values():
                future.cancel()

    def held(self, dest: S3Uri, job_id: str) -> int:
        """How many pendingsets are being read or read for the job now."""
        with self._lock:
            preload = self._jobs.get((str(dest), job_id))
            return len(preload.reads) if preload is not None else 0

    def wait_read(self, dest: S3Uri, job_id: str, timeout: float | None = None) -> int:
        """Wait until the reads begun for the job have ended (up to ``timeout`` seconds); returns how many ended
        with their pendingset."""
        with self._lock:
            preload = self._jobs.get((str(dest), job_id))
            futures = list(preload.reads.values()) if preload is not None else []
        wait(futures, timeout=timeout)
        return sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is None)

    def _end(self, dest: S3Uri, job_id: str) -> _JobPreload | None:
        job = (str(dest), job_id)
        with self._lock:
            self._ended[job] = None
            while len(self._ended) > ENDED_JOBS:
                self._ended.popitem(last=False)
            return self._jobs.pop(job, None)

    def close(self) -> None:
        """Drop every job's preload and stop the readers (the process's work ends)."""
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), OrderedDict()
            readers, self._readers = self._readers, None
        for preload in jobs:
            for future in preload.reads.values():
                future.cancel()
        if readers is not None:
            readers.shutdown(wait=False, cancel_futures=True)
