"""In-memory tracking of magic task attempts, in the process that writes them (Hadoop's HADOOP-19047,
``fs.s3a.committer.magic.track.commits.in.memory.enabled``).

For each attempt the registry knows: that it was set up here, its uploads in progress, its files being closed
in the background (their last parts still uploading), the pending uploads of its closed files, the files whose
close failed, and whether anything about it was also written to S3 (``.pending`` files, upload markers). A task
commit takes all of it at once (after every background close has ended), so that with nothing written to S3
it needs no LIST, no GET and no DELETE: one PUT of the ``.pendingset``. An attempt this process never set up
(its process died and a new one took over) is unknown: its task commit fails and the task is retried.

An attempt whose uploads were taken (committed or aborted), or whose job ended, is remembered as closed: a
file of it that starts or closes afterwards (a request of a cancelled task still running while the task's abort
arrives on another connection) is refused, and its upload aborted by the caller. Setting the attempt up again
opens it again.

Memory: files closing in the background hold their unsent parts; an attempt may have at most ``budget`` bytes
of them (a file's close waits for older ones past that), so a task holds at most twice what one open file may.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from s3commit.model.manifests import PendingUpload

log = logging.getLogger(__name__)

CLOSED_ATTEMPTS_KEPT = 4096
"""How many committed or aborted attempts the registry remembers, to refuse their late files."""

SETTLE_TIMEOUT_SECONDS = 600.0
"""How long a job's end waits for its attempts' files still closing (their last parts uploading)."""

Attempt = tuple[str, str]
"""(job id, task attempt id)."""


@dataclass
class _State:
    pending: dict[str, PendingUpload] = field(default_factory=dict)
    open: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    closing: dict[str, int] = field(default_factory=dict)
    failures: list[tuple[str, BaseException]] = field(default_factory=list)
    durable: bool = False


@dataclass(frozen=True)
class TakenAttempt:
    """What an attempt left when it was taken for its commit or abort."""

    pending: dict[str, PendingUpload]
    """The pending uploads of its closed files, by ``.pending`` key."""
    still_open: list[tuple[str, str, str]]
    """``(bucket, key, upload id)`` of uploads whose file was never closed."""
    failures: list[tuple[str, BaseException]]
    """``(file, error)`` of files whose background close failed (their uploads were aborted)."""
    known: bool
    """The attempt was set up in this process."""
    durable: bool
    """Something of it was written to S3 too (``.pending`` files, upload markers): list its directory."""


class MagicTaskRegistry:
    """Process-wide memory of each magic task attempt (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._states: dict[Attempt, _State] = {}
        self._known: set[Attempt] = set()
        self._closed: OrderedDict[Attempt, None] = OrderedDict()

    def opened(self, job_id: str, attempt: str) -> None:
        """The attempt is set up (again) in this process: its files are accepted."""
        with self._lock:
            self._closed.pop((job_id, attempt), None)
            self._known.add((job_id, attempt))

    def is_closed(self, job_id: str, attempt: str) -> bool:
        with self._lock:
            return (job_id, attempt) in self._closed

    def started(self, job_id: str, attempt: str, *, bucket: str, key: str, upload_id: str) -> bool:
        """Remember an upload in progress; False if the attempt is closed (the caller aborts the upload)."""
        with self._lock:
            if (job_id, attempt) in self._closed:
                return False
            self._state(job_id, attempt).open[upload_id] = (bucket, key, upload_id)
            return True

    def recorded_durably(self, job_id: str, attempt: str) -> None:
        """Something of the attempt was written to S3 (a ``.pending``, an upload marker)."""
        with self._lock:
            if (job_id, attempt) not in self._closed:
                self._state(job_id, attempt).durable = True

    def closing(self, job_id: str, attempt: str, name: str, held: int, *, budget: int) -> bool:
        """A file of the attempt closes in the background, holding ``held`` bytes until its parts are sent;
        False if the attempt is closed (the caller aborts the file). Waits while the attempt's closing files
        hold more than ``budget`` (never when none is closing)."""
        with self._lock:
            if (job_id, attempt) in self._closed:
                return False
            state = self._state(job_id, attempt)
            self._lock.wait_for(lambda: not state.closing or sum(state.closing.values()) + held <= budget)
            state.closing[name] = held
            return True

    def finished(self, job_id: str, attempt: str, pending_key: str, pending: PendingUpload) -> bool:
        """Remember a closed file's pending upload; False if the attempt is closed (the caller aborts it)."""
        with self._lock:
            self._end_closing(job_id, attempt, pending_key)
            if (job_id, attempt) in self._closed:
                return False
            state = self._state(job_id, attempt)
            state.open.pop(pending.upload_id, None)
            state.pending[pending_key] = pending
            return True

    def close_failed(self, job_id: str, attempt: str, name: str, error: BaseException) -> None:
        """A background close failed (its upload aborted): the task commit raises it, naming the file."""
        with self._lock:
            self._end_closing(job_id, attempt, name)
            if (job_id, attempt) not in self._closed:
                self._state(job_id, attempt).failures.append((name, error))

    def aborted(self, job_id: str, attempt: str, upload_id: str) -> None:
        with self._lock:
            state = self._states.get((job_id, attempt))
            if state is not None:
                state.open.pop(upload_id, None)

    def take(self, job_id: str, attempt: str) -> TakenAttempt:
        """Wait until none of the attempt's files is closing, then remove and return what it left; the
        attempt is closed from here on."""
        key = (job_id, attempt)
        with self._lock:
            state = self._states.get(key)
            if state is not None:
                self._lock.wait_for(lambda s=state: not s.closing)  # type: ignore[misc]
            self._states.pop(key, None)
            state = state or _State()
            known = key in self._known
            self._known.discard(key)
            self._mark_closed(key)
        return TakenAttempt(state.pending, list(state.open.values()), state.failures, known, state.durable)

    def end_job(self, job_id: str, *, timeout: float = SETTLE_TIMEOUT_SECONDS) -> None:
        """The job commits or aborts: wait (up to ``timeout``) until no file of its attempts is closing, then
        close the attempts left (those that never committed or aborted here) and drop what they held.

        Waiting first makes the job's sweep of orphan uploads final: an abort must not overtake a part still
        uploading (S3 says an abort may have to be repeated while parts are in flight; in one CI run such an
        upload stayed pending on SeaweedFS). A file of the job that closes later is refused, and its upload
        aborted by its writer.
        """
        with self._lock:
            settled = self._lock.wait_for(
                lambda: not any(s.closing for k, s in self._states.items() if k[0] == job_id), timeout)
            if not settled:
                log.warning("job %s ends with files of its task attempts still closing after %.0f s; their "
                            "uploads are aborted as they finish", job_id, timeout)
            ended = {k for k in self._states if k[0] == job_id} | {k for k in self._known if k[0] == job_id}
            for key in ended:
                self._states.pop(key, None)
                self._known.discard(key)
                self._mark_closed(key)

    def __len__(self) -> int:
        with self._lock:
            return len(self._states)

    def _mark_closed(self, key: Attempt) -> None:
        self._closed[key] = None
        self._closed.move_to_end(key)
        while len(self._closed) > CLOSED_ATTEMPTS_KEPT:
            self._closed.popitem(last=False)

    def _end_closing(self, job_id: str, attempt: str, name: str) -> None:
        state = self._states.get((job_id, attempt))
        if state is not None:
            state.closing.pop(name, None)
        self._lock.notify_all()

    def _state(self, job_id: str, attempt: str) -> _State:
        return self._states.setdefault((job_id, attempt), _State())

