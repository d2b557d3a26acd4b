"""The commit engine: one journal-driven state machine for every commit s3commit makes.

A commit goes through these states, in this order; a process may die at any request, and whoever comes next (the job
run again, ``s3commit recover``, a job that takes the destination's lease over, the sink's next batch) finds where it
stopped from the journal and what S3 holds, and enters the same machine there::

      LOADED ──> LEASED ──> JOURNALLED ──> COMPLETED ──> OVERWRITTEN ──> COMMITTED ──> CLEANED
         │          │            │     (batch: the sink's log entry,      (job: _SUCCESS)   (job directory,
         │          │            │      its commit point, comes here)                        orphans, journal last)
         └──────────┴────────────┴──> ROLLED BACK (a failure before the commit point: every upload aborted or
                                      reverted) ──> CLEANED

1. **Load**: every pendingset read (in parallel, a window at a time) and validated: format, job id, bucket, every key
   under the destination (or in an absolute directory a committed task declared) and outside any scratch directory,
   no key written twice. Nothing is completed or deleted before every pendingset has passed. Loaded pendingsets are
   kept up to a budget of uploads; past it they are dropped and re-read, so memory does not grow with the job.
2. **Lease**: the destination's commit lease (:mod:`s3commit.commit.lease`) for a job, taken while the pendingsets load
   (it changes nothing of the destination); a streaming batch is serialized by its sink's log instead.
3. **Journal** (``If-None-Match: *``): what is about to be completed (the pendingsets, the task attempts accepted for
   each, so that a recovery validates them as the commit did; the overwrite plan); from here an interrupted commit is
   finished or rolled back, never guessed at. Written only once every pendingset has passed: a recovery that finds
   one missing knows the clean-up (after the commit point) deleted it, and never meets one the commit refused.
   Where every upload is still pending it is written beside the lease's taking, not after it (a round trip less):
   a job that dies before it holds the lease leaves a journal naming only pending uploads (nothing is completed
   but under the lease), which the next sweep of dead jobs rolls back (:mod:`s3commit.commit.sweep`).
4. **Complete** every upload on a bounded pool (optionally rate-limited): as many in flight as the store's adaptive
   concurrency limit of the destination's prefix allows (:meth:`CommitEngine.completes_in_flight`). An upload its
   task commit completed already (a snapshot destination, :func:`s3commit.commit.task_commit.complete_at_task_commit`)
   is counted as completed with no request. On the first
   failure before the commit point: stop, abort every upload not completed, delete (revert) the completed ones,
   raise one :class:`JobCommitError`.
5. **Overwrite**: the plan applied *after* completion: old objects under the given prefixes (or the partitions just
   written) deleted, never the keys just committed, never a scratch key.
6. **The commit point** (:class:`CommitPoint`): ``_SUCCESS`` for a job; for a job on a snapshot destination
   (:mod:`s3commit.commit.snapshots`), the next snapshot's entry in its log, which replaces step 5: nothing is
   deleted, the replaced files leave the snapshot and a bounded vacuum deletes those past the retention horizon (the
   entry is made while the journal is written and the uploads completed, :class:`PreparedSnapshot`, on the latest
   entry as the job's setup read it where the log is unchanged, and written once every upload is complete);
   for a streaming batch, its entry in the sink's log, which the JVM writes between the journal and the Completes
   (so a batch is finished forward once the log has it, never rolled back).
7. **Clean up**: this job's orphan uploads aborted (:mod:`s3commit.commit.job_uploads`), the job directory deleted
   (its first LIST sent once the journal is written, beside the commit; nothing deleted before ``_SUCCESS`` is
   written, or, under the lease, where the journal holds what ``_SUCCESS`` says, beside its PUT), the journal
   last (so a clean-up cut short is finished from the same records), the lease released beside the journal's DELETE
   (a journal left then names pendingsets already deleted: it is finished as a clean-up).

The variants, each a path through the same states (the public methods, in this order below):

- :meth:`CommitEngine.run`: a job commit, from LOADED to CLEANED;
- :meth:`CommitEngine.resume`: from a journal (``s3commit recover``, a job committed again after its first commit's
  process died, a lease taken over): CLEANED only if the commit point was passed, else COMPLETED onwards;
- :meth:`CommitEngine.roll_back_from_journal`: ``recover --abort`` and the abort of a job whose commit began:
  ROLLED BACK then CLEANED, refused where it would lose data (the commit point passed; every upload complete under an
  overwrite plan that may have begun);
- :meth:`CommitEngine.prepare` and :meth:`CommitEngine.finish`: a streaming batch's two halves around its log entry.

The committers decide *when* (:mod:`s3commit.committers`); :mod:`s3commit.commit.session` holds what is around one
job's commit (the lease it passes in, the sweep of dead jobs, the report), :mod:`s3commit.commit.recovery` finds the
journal and chooses the variant.
"""

from __future__ import annotations

import contextlib
import enum
import heapq
import itertools
import logging
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from s3commit.commit.job_uploads import JobRecords, JobUploads
from s3commit.commit.lease import CommitLease, NoLease, committed_here
from s3commit.commit.manifest_store import load_pendingset, pendingset_keys_under, read_pendingsets
from s3commit.commit.overwrite import OldObjects, OverwritePlan
from s3commit.commit.prefixes import delete_prefix, list_ahead
from s3commit.commit.recovery_result import AlreadyCommittedError, RecoveryAction, RecoveryError, RecoveryReport
from s3commit.commit.snapshots import (
    VACUUM_ENTRIES_AT_COMMIT,
    LogState,
    SnapshotLog,
    data_files,
    file_of,
    next_snapshot,
    vacuum,
    write_manifests,
)
from s3commit.commit.upload_actions import abort_upload_quietly, commit_upload, complete_call, revert_upload_quietly
from s3commit.commit.validate_output import validate_committed
from s3commit.config.options import CommitterOptions
from s3commit.errors import (
    CommitConflictError,
    CommitStateError,
    CompletionUnknownError,
    ConfigError,
    JobCommitError,
    JournalExistsError,
    LeaseLostError,
    ManifestError,
    NotFoundError,
    PendingsetMissingError,
    PreconditionFailedError,
    S3CommitError,
    SinkRecoveryError,
)
from s3commit.model.batch_journal import BatchJournal
from s3commit.model.manifests import SUCCESS_FILENAME_LIMIT, CommitJournal, PendingSet, PendingUpload, SuccessData
from s3commit.model.object_info import CREATE_WINDOW_KEY, ObjectInfo
from s3commit.model.paths import SCRATCH_PREFIXES, JobLayout, carries_job_id, is_scratch_key
from s3commit.model.snapshot_log import SETTINGS_NAME, Snapshot, SnapshotFile, SnapshotSettings, entry_uris, file_uri
from s3commit.model.uri import S3Uri
from s3commit.store.concurrency import ConcurrencyLimit, LimitWatch
from s3commit.store.lean_http import LeanLoop
from s3commit.store.s3store import S3Store
from s3commit.store.uploads import CompleteCall
from s3commit.transfer.parallel import (
    Failure,
    RateLimiter,
    map_ordered,
    quiet_collector,
    resolved,
    run_each,
    window_for,
)

if TYPE_CHECKING:
    from s3commit.commit.process_state import SeenObjects

log = logging.getLogger(__name__)

_SCRATCH_ELEMENT = re.compile("(?:^|/)(?:" + "|".join(re.escape(element) for element in SCRATCH_PREFIXES) + ")")
"""A key element that starts with one of SCRATCH_PREFIXES (one search per key: a commit checks 100,000)."""
QUIET_FROM_PENDINGSETS = 100
"""A commit of this many pendingsets or more keeps the garbage collector off the heap that was there
(:func:`~s3commit.transfer.parallel.quiet_collector`): a large one, whose full collections would stall its requests.
A small one leaves the collector as it is."""
CACHE_BUDGET = 10_000
"""Uploads kept in memory, parsed, between validation and completion; past them a job keeps pendingsets' bodies."""
BODIES_BUDGET = 64 << 20
"""Bytes of pendingsets' bodies, compressed, kept past CACHE_BUDGET (about 9 KB for 100 files: 100,000 files keep
~9 MB) and parsed again at completion: a GET each saved (its request's CPU, beside the Completes, was most of the
cost of reading them again), and what is completed is what was validated. Past both budgets a job reads its
pendingsets again."""
PENDINGSETS_AHEAD = 8
"""Pendingsets read again at once, ahead of the Completes, where they were not held (past CACHE_BUDGET): one at a
time, a GET's latency each (~60 ms for 100 files) paced a commit of 100,000 files at ~2,300 Completes a second."""

RECOVERED_DIAGNOSTIC = "s3commit.recovered"
"""``_SUCCESS`` diagnostics key set to ``"true"`` when the commit was finished from its journal by another process."""


class CommitPoint(enum.Enum):
    """Where a commit is decided: before it, a failure rolls the commit back; after it, the commit is finished."""

    SUCCESS = "_SUCCESS"
    """A job: decided once every upload is complete and the overwrite applied; ``_SUCCESS`` marks it (the journal
    records the commit, :class:`CommitJournal`)."""
    SNAPSHOT = "the snapshot log"
    """A job on a snapshot destination (:mod:`s3commit.commit.snapshots`): decided by the next snapshot's entry in
    the destination's log, written with ``If-None-Match: *`` once every upload is complete; ``_SUCCESS`` follows.
    Chosen by the engine from the log it finds under the lease, not by the caller."""
    SINK_LOG = "the sink's log"
    """A Structured Streaming batch: decided by the batch's entry in the sink's log, which the JVM writes after the
    journal (:class:`BatchJournal`) and before the Completes. No lease (the log serializes batches), no overwrite, and
    every file name carries the job id (the clean-up finds the job's uploads by it, with no record to read)."""


@dataclass
class CommitStats:
    """What a job commit did; becomes ``_SUCCESS`` metrics."""

    pendingsets: int = 0
    pendingsets_preloaded: int = 0
    """Pendingsets read as their tasks committed (:mod:`s3commit.commit.preload`): the commit read none of them."""
    files: int = 0
    bytes: int = 0
    completed: int = 0
    completed_at_task_commit: int = 0
    """Uploads the task commits completed (a snapshot destination): the job commit sent no request for them."""
    aborted: int = 0
    reverted: int = 0
    deleted_by_overwrite: int = 0
    orphans_aborted: int = 0
    kept_changed: int = 0
    undo_failed: int = 0
    validated: int = 0
    checksums_verified: int = 0
    dead_jobs_swept: int = 0
    dead_job_uploads_aborted: int = 0
    snapshot: int = -1
    """The snapshot this commit published (a snapshot destination), else -1."""
    snapshot_files: int = 0
    replaced: int = 0
    """Files the published snapshot no longer lists (replaced by the overwrite; deleted after the retention)."""
    vacuumed: int = 0
    timings_ms: dict[str, int] = field(default_factory=dict)
    limit: LimitWatch | None = None
    """What the store's concurrency limit of the destination's prefix did from the first Complete to ``_SUCCESS``
    (its low, high and final limit, the throttling answers it met): :mod:`s3commit.store.concurrency`."""


@dataclass(frozen=True)
class PreparedSnapshot:
    """A snapshot commit's next snapshot before it is published (:meth:`CommitEngine.prepare_snapshot`)."""

    snapshot: Snapshot
    entry: bytes
    """The snapshot's log entry, as written."""
    state: LogState
    """The log it follows."""
    latest: Future[bytes | None]
    """The current snapshot's entry (being fetched)."""
    base: Snapshot | None
    """The current snapshot, where it was needed (None: a whole overwrite, made without it)."""
    current: Callable[[], Snapshot]
    """The current snapshot, parsed when called."""
    whole: bool
    """An overwrite of the whole destination."""


@contextlib.contextmanager
def _shut_beside(side: ThreadPoolExecutor, pool: ThreadPoolExecutor) -> Iterator[ThreadPoolExecutor]:
    """``pool``, its idle threads joined on ``side`` once the block ends (beside what follows: a join each)."""
    try:
        yield pool
    finally:
        side.submit(pool.shutdown)


class CommitEngine:
    """One commit of one job (or streaming batch), through the states of the module docstring. Not reusable.

    Args:
        point: where the commit is decided (:class:`CommitPoint`).
        finisher: who finishes a commit another process began (``"s3commit recover"``...), named in ``_SUCCESS``;
            None for the job's own commit.
        journal: the journal found, when this engine resumes or rolls back a commit (:meth:`open_journal`).
    """

    def __init__(self, store: S3Store, *, dest: S3Uri, layout: JobLayout, job_id: str, committer: str,
                 options: CommitterOptions, job_id_source: str = "s3commit",
                 absolute_dirs: Sequence[str] = (), lease: CommitLease | NoLease | None = None,
                 create_only: bool = False, point: CommitPoint = CommitPoint.SUCCESS,
                 finisher: str | None = None, journal: CommitJournal | None = None,
                 seen: SeenObjects | None = None) -> None:
        self.store = store
        #: What the process saw of the destination's log (:class:`~s3commit.commit.process_state.SeenObjects`).
        self.seen = seen
        self.point = point
        self.finisher = finisher
        self.journal = journal
        #: The job's ``_SUCCESS`` data once :meth:`run` or :meth:`resume` ended.
        self.success: SuccessData | None = None
        #: The destination's commit lease: taken while the pendingsets load and are validated (:meth:`run`), held
        #: before the journal, checked before every step that changes the destination.
        self.lease = lease or NoLease()
        #: Complete with If-None-Match (conflict-mode=fail, mode="error") where the store honours it.
        self.create_only = create_only
        self.dest = dest
        # The job's uploads: under the destination, and in the directories outside it (same bucket) that
        # committed tasks declared they wrote to.
        self.uploads = JobUploads(store, dest, job_id, layouts=(layout,), absolute_dirs=absolute_dirs)
        self.absolute_dirs = self.uploads.absolute_dirs
        self.layout = layout
        self.job_id = job_id
        self.committer = committer
        self.options = options
        self.job_id_source = job_id_source
        self.stats = CommitStats()
        self._cache: dict[str, PendingSet] = {}
        self._bodies: dict[str, bytes] = {}
        """Pendingsets' bodies as validated, compressed, past CACHE_BUDGET (:data:`BODIES_BUDGET`)."""
        self._from_messages: set[str] = set()
        """Pendingsets taken from the task commit messages (:attr:`TaskCommitMessage.completed`), never read."""
        self._log_before: LogState | None = None
        """The snapshot log as this commit found it before it published (its vacuum's view)."""
        self._keys_there: list[PendingUpload] = []
        """Uploads their task commits left pending because the key was there (found while validating)."""
        self._committed: dict[str, str] = {}  # key -> upload id
        self._written: set[str] = set()  # every key the pendingsets name (their validation's)
        self._uncertain: dict[str, str] = {}  # key -> upload id: Completes that may have taken effect unseen
        # Committed uploads whose Create lost an answer (few): their windows find the orphans at clean-up.
        self._create_windows = JobRecords()
        self._lock = threading.Lock()
        self._limit: ConcurrencyLimit | None = None  # the store's limit of the destination's prefix, once watched
        # A snapshot commit's snapshot, the one before it, and the destination's settings, once published.
        self._published: tuple[Snapshot, Snapshot | None, SnapshotSettings] | None = None
        #: Where :meth:`run` sends its pendingsets' GETs and then its Completes, on the same connections (those the
        #: Completes need beyond the GETs' opened while the lease and the journal are written; None where the lean
        #: path does not serve the destination, or outside run).
        self._lean: LeanLoop | None = None
        #: ``_SUCCESS`` goes beside the job directory's deletion (:meth:`write_journal` decides it for a new commit;
        #: a resumed one does as its journal says).
        self._success_beside_cleanup = journal is not None and journal.success_beside_cleanup
        self._done_at_task_commit = 0  # entries validated that their task commit completed (no Complete to send)

    # --- LOADED: every pendingset read and validated ----------------------------------------------------------

    def _validate(self, pendingset: PendingSet, source: str, seen: set[str], accepted: set[str]) -> None:
        if accepted and pendingset.task_attempt_id and pendingset.task_attempt_id not in accepted:
            # Another attempt of the task committed after the one the caller accepted (speculation without
            # a commit coordinator): committing it would publish output the caller never accepted.
            raise ManifestError(
                f"the pendingset was written by task attempt {pendingset.task_attempt_id}, but the committed "
                f"attempt is {', '.join(sorted(accepted))}: two attempts of one task committed", source=source)
        if pendingset.job_id and pendingset.job_id != self.job_id:
            raise ManifestError(f"Mismatch in Job ID ({self.job_id}) and commit job ID ({pendingset.job_id})",
                                source=source)
        # Per entry (a commit may check 100,000): the destination's prefix and the declared directories hoisted.
        bucket, prefix, absolute = self.dest.bucket, self.dest.prefix, self.uploads.absolute_dirs
        under = len(prefix)
        for commit in pendingset.commits:
            key = commit.destination_key
            if commit.bucket != bucket:
                raise ManifestError(f"upload for {commit.dest_uri} is in another bucket than the destination "
                                    f"{self.dest}", source=source)
            if (not ((len(key) > under and key.startswith(prefix)) or key.rpartition("/")[0] in absolute)
                    or ("__" in key and _SCRATCH_ELEMENT.search(key))):  # every scratch element starts "__"
                raise ManifestError(f"upload for {commit.dest_uri} points outside the destination {self.dest}",
                                    source=source)
            if not key or "//" in key or "/." in key or key[0] == "." or key[-1] == "/":  # else no "", "." or ".."
                elements = key.split("/")
                if "" in elements or "." in elements or ".." in elements:
                    raise ManifestError(f"upload key {key!r} has an empty, '.' or '..' element", source=source)
            count = len(seen)
            seen.add(key)
            if len(seen) == count:
                raise ManifestError(f"Destination {commit.dest_uri} is written by more than one task",
                                    source=source)
            if commit.extra_data:  # marks and windows live there; most entries a message carries have one only
                if commit.key_there_at_task_commit:
                    self._keys_there.append(commit)
                if CREATE_WINDOW_KEY in commit.extra_data:
                    self._create_windows.add_pending(commit)
                if commit.completed_at_task_commit:
                    self._done_at_task_commit += 1

    def in_scope(self, key: str) -> bool:
        """True if this job may write ``key``: under the destination, or a file directly in one of the
        declared absolute directories."""
        return self.uploads.in_scope(key)

    def scopes(self) -> list[str]:
        """The prefixes this job's uploads live under: the destination's, then each absolute directory's."""
        return self.uploads.scopes()

    def _load(self, key: str) -> PendingSet:
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        body = self._bodies.get(key)
        if body is not None:
            return PendingSet.from_json(zlib.decompress(body), source=f"s3://{self.dest.bucket}/{key}")
        return load_pendingset(self.store, self.dest.bucket, key)

    def load_and_validate(self, pool: ThreadPoolExecutor, keys: Sequence[str],
                          accepted_attempts: dict[str, set[str]] | None = None,
                          known: Mapping[str, PendingSet] | None = None,
                          preloaded: Mapping[str, PendingSet] | None = None) -> None:
        """Read and check every pendingset before anything is completed (raises on the first problem). ``known``:
        pendingsets the caller has already (from the task commit messages); ``preloaded``: read as their tasks
        committed (:mod:`s3commit.commit.preload`): both checked the same, not read."""
        seen: set[str] = set()
        cached = kept = 0
        known = known or {}
        preloaded = {key: p for key, p in (preloaded or {}).items() if key not in known}
        held = {**preloaded, **known}
        packing = threading.Event()  # past CACHE_BUDGET: the readers compress the bodies (zlib lets go of the GIL)

        def to_keep(pendingset: PendingSet, body: bytes) -> tuple[PendingSet, bytes, bool]:  # on the readers
            packed = packing.is_set()
            return pendingset, zlib.compress(body, 1) if packed else body, packed

        # In order, a bounded window ahead: only about ``2 x threads`` parsed pendingsets exist at once, so
        # memory does not grow with the number of tasks.
        read = read_pendingsets(self.store, self.dest.bucket, [k for k in keys if k not in held], pool=pool,
                                ahead=2 * self.options.pool_size, then=to_keep, loop=self._lean)
        loads = chain(((k, resolved((held[k], b"", False))) for k in keys if k in held), read)
        for key, future in loads:
            try:
                pendingset, body, packed = future.result()
            except NotFoundError as err:
                raise PendingsetMissingError(
                    f"pendingset s3://{self.dest.bucket}/{key} of job {self.job_id} is missing: was the job "
                    "already committed or aborted?"
                ) from err
            self._validate(pendingset, f"s3://{self.dest.bucket}/{key}", seen,
                           (accepted_attempts or {}).get(key, set()))
            self.stats.files += len(pendingset.commits)
            self.stats.bytes += pendingset.total_length
            if key in known:
                self._cache[key] = pendingset  # held already: never read again
                self._from_messages.add(key)
            elif key in preloaded:  # held already (within the entries kept parsed: preload.PRELOAD_FILES)
                self._cache[key] = pendingset
                cached += len(pendingset.commits)
                self.stats.pendingsets_preloaded += 1
            elif cached + len(pendingset.commits) <= CACHE_BUDGET:
                self._cache[key] = pendingset
                cached += len(pendingset.commits)
            elif kept < BODIES_BUDGET:
                packing.set()
                self._bodies[key] = body = body if packed else zlib.compress(body, 1)
                kept += len(body)
                if kept >= BODIES_BUDGET:
                    packing.clear()
        self.stats.pendingsets = len(keys)
        self._written = seen

    def _warm_for_completes(self) -> None:
        """Have as many connections open as the first wave of Completes will use (the files to complete, up to the
        Completes in flight and the limit of the destination's prefix), opened while the lease and the journal are
        written (a wait on the store, where the load before them is bound by the CPU), so that wave does not wait
        for each to be opened (and on TLS, handshaken) as it goes."""
        lean = self._lean
        if lean is None or self.options.rate_limit or self.options.validate_output:
            return  # (those Completes are sent from threads, through botocore: complete_all)
        limit = self.store.requests.limit(self.dest.bucket, f"{self.dest.key}/")
        lean.warm(min(self.stats.files - self._done_at_task_commit, self.completes_in_flight(), limit.limit))

    # --- JOURNALLED: what is about to be completed, recorded before anything changes --------------------------

    @property
    def journal_key(self) -> str:
        """Where this commit's journal is (a job's, or a streaming batch's)."""
        return self.layout.batch_journal_key if self.point is CommitPoint.SINK_LOG else self.layout.journal_key

    def write_journal(self, keys: Sequence[str], plan: OverwritePlan,
                      accepted_attempts: Mapping[str, set[str]] | None = None, *,
                      leased: bool | None = None) -> None:
        """JOURNALLED (``If-None-Match: *``): what this commit is about to complete, its overwrite plan and the task
        attempts accepted for each pendingset (a recovery validates them as the commit did), once every pendingset
        has loaded and passed. ``leased``: written for a commit that holds the lease, or is taking it (the journal
        written beside the lease's taking: :meth:`_load_and_lease`); by default, whether it holds it now."""
        record: CommitJournal | BatchJournal
        if self.point is CommitPoint.SINK_LOG:
            record = BatchJournal(job_id=self.job_id, batch_id=_batch_of(self.job_id), bucket=self.dest.bucket,
                                  dest_key=self.dest.key, pendingsets=tuple(keys))
        else:
            # Under the lease (no other commit to this destination can pass this one's journal: one taking the lease
            # over settles it first), _SUCCESS goes beside the job directory's deletion, and the journal says what
            # a recovery that finds the pendingsets gone writes in it.
            beside = (self.point is CommitPoint.SUCCESS and self.options.success_marker
                      and (self.lease.held if leased is None else leased))
            record = CommitJournal(job_id=self.job_id, committer=self.committer, bucket=self.dest.bucket,
                                   dest_key=self.dest.key, pendingsets=tuple(keys),
                                   delete_paths=plan.delete_paths, replace_partitions=plan.replace_partitions,
                                   delete_outside=plan.delete_outside,
                                   success_marker=self.options.success_marker, absolute_dirs=self.absolute_dirs,
                                   success_beside_cleanup=beside, files=self.stats.files, total_bytes=self.stats.bytes,
                                   first_files=tuple(heapq.nsmallest(SUCCESS_FILENAME_LIMIT, self._written))
                                   if beside else (),
                                   accepted_attempts={key: tuple(sorted(attempts))
                                                      for key, attempts in (accepted_attempts or {}).items()
                                                      if attempts})
        try:
            # A PUT whose answer was lost and whose retry then meets our own journal is verified by the store
            # (Retry.VERIFIED): a 412 here is another commit's journal.
            self.store.objects.put_object(self.dest.bucket, self.journal_key, record.to_json(),
                                          if_none_match=True, content_type="application/json")
            self._success_beside_cleanup = isinstance(record, CommitJournal) and record.success_beside_cleanup
        except PreconditionFailedError as err:
            if self.point is CommitPoint.SINK_LOG:
                raise S3CommitError(f"batch job {self.job_id} already has a journal at s3://{self.dest.bucket}/"
                                    f"{self.journal_key}: was this batch job prepared twice?") from err
            raise JournalExistsError(
                f"job {self.job_id} already has a commit journal at s3://{self.dest.bucket}/"
                f"{self.layout.journal_key}: another commit of this job is running or was interrupted; "
                f"run `s3commit recover {self.dest} --job {self.job_id}`"
            ) from err

    # --- COMPLETED: every upload completed (or, on a failure before the commit point, ROLLED BACK) -------------

    def _complete_one(self, limiter: RateLimiter, commit: PendingUpload, if_none_match: bool) -> None:
        limiter.acquire()
        self.lease.check()
        try:
            commit_upload(self.store, commit, if_none_match=if_none_match)
        except (CompletionUnknownError, PreconditionFailedError) as err:
            error = self._completion_error(commit, err)
            if error is err:
                raise
            raise error from err
        self._completed(commit)
        if self.options.validate_output:  # a mismatch fails complete_all: the job then rolls back
            verified = validate_committed(self.store, commit)
            with self._lock:
                self.stats.validated += 1
                self.stats.checksums_verified += verified

    def _completed(self, commit: PendingUpload, _etag: str = "") -> None:
        with self._lock:
            self._committed[commit.destination_key] = commit.upload_id
            self.stats.completed += 1

    def _completion_error(self, commit: PendingUpload, err: BaseException) -> BaseException:
        """What a Complete's failure fails the commit with: an unknown outcome is noted (the roll-back resolves it
        before it decides: it may have been completed); a key that appeared is a conflict."""
        if isinstance(err, CompletionUnknownError):
            with self._lock:
                self._uncertain[commit.destination_key] = commit.upload_id
        elif isinstance(err, PreconditionFailedError):
            conflict = CommitConflictError(f"{commit.dest_uri} appeared after the job's conflict check (another "
                                           "writer made it): it is not replaced")
            conflict.__cause__ = err
            return conflict
        return err

    def completes_in_flight(self) -> int:
        """How many Completes the commit keeps in flight: ``fs.s3a.committer.threads`` where a user chose it (any
        value but its default: a cap, as S3A's committers take it) or the store's concurrency is not adaptive; else
        as many as the store's adaptive limit of the destination's prefix may allow (its ceiling,
        ``s3commit.store.concurrency.max``): the limit decides how many are sent at once, and a thread waiting for
        a slot costs little."""
        store = self.store.options
        chosen = self.options.threads != CommitterOptions().threads
        return self.options.pool_size if chosen or not store.concurrency_adaptive else store.concurrency_max

    def watch_limit(self) -> None:
        """Start recording what the store's concurrency limit of the destination's prefix does
        (:attr:`CommitStats.limit`, ended by :meth:`end_limit_watch`)."""
        if self._limit is None:
            self._limit = self.store.requests.limit(self.dest.bucket, f"{self.dest.key}/")
            self.stats.limit = self._limit.watch()

    def end_limit_watch(self) -> None:
        """Stop recording the limit (idempotent); :attr:`CommitStats.limit` keeps what it did."""
        if self._limit is not None and self.stats.limit is not None:
            self._limit.unwatch(self.stats.limit)

    def complete_all(self, pool: ThreadPoolExecutor, keys: Sequence[str]) -> None:
        """Complete every upload (at most :meth:`completes_in_flight` running, four times that queued, no per-upload
        state kept): on ``pool`` where it has that many threads, else on a pool of that many for the Completes alone;
        stop at the first failure and re-raise it. Where the task commits completed every upload (a snapshot
        destination), nothing is started."""
        pending = self._still_pending(keys)
        first = next(pending, None)
        if first is None:
            return
        pending = itertools.chain((first,), pending)
        self.watch_limit()
        limiter = RateLimiter(self.options.rate_limit)
        known = self.store.capabilities.get(self.dest.bucket)
        if_none_match = self.create_only and known is not None and known.conditional_complete
        if self.create_only and not if_none_match:
            log.warning("job %s: the store of %s does not honour If-None-Match on Complete: an object that appears "
                        "there during this commit would be replaced", self.job_id, self.dest)
        in_flight = self.completes_in_flight()

        def complete_on(executor: ThreadPoolExecutor) -> list[Failure[PendingUpload]]:
            return run_each(executor, pending, lambda c: self._complete_one(limiter, c, if_none_match),
                            window=window_for(in_flight), stop_on_failure=True)

        if not self.options.rate_limit and not self.options.validate_output \
                and self.store.uploads.can_complete_many(self.dest.bucket):
            failures = self._complete_many(pending, if_none_match, in_flight)
        elif in_flight == self.options.pool_size:
            failures = complete_on(pool)
        else:  # threads are started as Completes are queued: a small job starts no more than it has files
            with ThreadPoolExecutor(in_flight, thread_name_prefix=f"s3commit-complete-{self.job_id[:8]}") as own:
                failures = complete_on(own)
        if failures:
            raise failures[0].error

    def _complete_many(self, pending: Iterable[PendingUpload], if_none_match: bool,
                       most: int) -> list[Failure[PendingUpload]]:
        """Every upload of ``pending`` completed from one event loop
        (:meth:`~s3commit.store.uploads.UploadRequests.complete_many`: the lean path on connections of its own, no
        thread per Complete in flight), ``most`` in flight at most."""
        def calls() -> Iterator[tuple[PendingUpload, CompleteCall]]:
            for commit in pending:
                self.lease.check()
                yield commit, complete_call(commit, if_none_match=if_none_match)

        cap = most if most != self.store.options.concurrency_max else None
        failed = self.store.uploads.complete_many(calls(), done=self._completed, most=cap, loop=self._lean)
        return [Failure(commit, self._completion_error(commit, err)) for commit, err in failed]

    def _still_pending(self, keys: Sequence[str]) -> Iterator[PendingUpload]:
        """The uploads to complete: those a task commit completed already (a snapshot destination) are counted as
        this commit's, with no request (a roll-back deletes them, the overwrite keeps them), and left out. One
        pendingset at a time: a commit of 10,000 files its tasks completed takes a lock 100 times, not 10,000."""
        for commits in (pendingset.commits for pendingset in self._pendingsets(keys)):
            done = [c for c in commits if c.completed_at_task_commit]
            if done:
                with self._lock:
                    self._committed.update((c.destination_key, c.upload_id) for c in done)
                    self.stats.completed_at_task_commit += len(done)
                if len(done) == len(commits):
                    continue
            yield from (c for c in commits if not c.completed_at_task_commit)

    def _pendingsets(self, keys: Sequence[str]) -> Iterator[PendingSet]:
        """The pendingsets of ``keys``, in order: those held, and the others read again, PENDINGSETS_AHEAD at once."""
        again = [key for key in keys if key not in self._cache]  # parsed again from what is kept, or read
        if not again:
            yield from (self._cache[key] for key in keys)
            return
        with ThreadPoolExecutor(PENDINGSETS_AHEAD, thread_name_prefix=f"s3commit-reread-{self.job_id[:8]}") as readers:
            reads = map_ordered(readers, again, self._load, window=PENDINGSETS_AHEAD)
            for key in keys:
                held = self._cache.get(key)
                yield held if held is not None else next(reads)[1].result()

    def check_completed_at_task_commit(self, pool: ThreadPoolExecutor, keys: Sequence[str]) -> None:
        """On a destination that is not (or no longer) a snapshot one, the files its task commits completed must
        still be there (``snapshot disable`` deletes every file in no snapshot): one HEAD each, only then.

        Raises:
            CommitStateError: one is gone or is another object (the commit then rolls back).
        """
        if not self.stats.completed_at_task_commit:
            return
        # Read from the store where the message gave the entries (it carries no part ETags): a rare path.
        early = [c for key in keys for c in (load_pendingset(self.store, self.dest.bucket, key)
                                             if key in self._from_messages else self._load(key)).commits
                 if c.completed_at_task_commit]
        found = map_ordered(pool, early, lambda c: self.store.uploads.completed_object(
            c.bucket, c.destination_key, c.etags, length=c.length, created_ms=c.created),
                            window=2 * self.options.pool_size)
        for commit, future in found:
            if future.result() is None:
                raise CommitStateError(
                    f"{commit.dest_uri} was completed at its task commit, when {self.dest} kept a snapshot log, and "
                    "is gone or replaced now that it keeps none (was `s3commit snapshot disable` run while the "
                    "job ran?): the job must run again")

    def mark_completed(self, commit: PendingUpload) -> None:
        """Count ``commit`` as completed by this commit (recovery found it complete): a roll-back then
        reverts it, and the overwrite plan keeps it."""
        with self._lock:
            self._committed[commit.destination_key] = commit.upload_id

    def validated_uploads(self, keys: Sequence[str]) -> Iterator[PendingUpload]:
        """The uploads of pendingsets :meth:`load_and_validate` accepted, in order (re-read past the cache)."""
        return self._uploads(keys)

    def _uploads(self, keys: Sequence[str]) -> Iterator[PendingUpload]:
        for key in keys:
            yield from self._load(key).commits

    def roll_back(self, pool: ThreadPoolExecutor, keys: Sequence[str]) -> int:
        """Abort every upload not completed and delete every completed one (after a failure).

        Returns how many uploads could not be undone (their failures are logged).
        """
        def undo(commit: PendingUpload) -> None:
            completed = self._committed.get(commit.destination_key) == commit.upload_id
            if not completed and self._uncertain.get(commit.destination_key) == commit.upload_id:
                try:  # a Complete whose answer was lost: read back again (the store's retries) before deciding
                    completed = self.store.uploads.completed_object(
                        commit.bucket, commit.destination_key, commit.etags, length=commit.length,
                        created_ms=commit.created) is not None
                except S3CommitError as err:
                    log.warning("roll back: cannot tell whether %s was completed (%s): left to `s3commit recover`",
                                commit.dest_uri, err)
                    with self._lock:
                        self.stats.undo_failed += 1
                    return
            if completed:
                done = revert_upload_quietly(self.store, commit.bucket, commit.destination_key)
            else:
                done = abort_upload_quietly(self.store, commit.bucket, commit.destination_key, commit.upload_id)
            with self._lock:
                if not done:
                    self.stats.undo_failed += 1
                elif completed:
                    self.stats.reverted += 1
                else:
                    self.stats.aborted += 1

        def ours() -> Iterator[PendingUpload]:
            for key in keys:
                try:
                    pendingset = self._load(key)
                except Exception as err:  # an unreadable pendingset: its uploads are left to the sweep
                    log.warning("roll back: cannot read %s: %s", key, err)
                    self.stats.undo_failed += 1
                    continue
                yield from (c for c in pendingset.commits
                            if c.bucket == self.dest.bucket and self.in_scope(c.destination_key))

        run_each(pool, ours(), undo, window=window_for(self.options.pool_size))
        return self.stats.undo_failed

    # --- OVERWRITTEN, COMMITTED (the commit point), CLEANED ----------------------------------------------------

    def apply_overwrite(self, plan: OverwritePlan, old: OldObjects | None = None) -> None:
        """Delete the plan's old objects (never the keys just committed, a scratch key or ``_SUCCESS``); ``old``:
        those the commit listed ahead (:meth:`_old_objects`)."""
        if old is None:
            old = OldObjects(self.store, self.dest, plan, set(self._committed), skip=self._not_old)
        if old.prefixes:
            self.lease.check()
        deleted, changed = old.delete(threads=self.options.pool_size)
        self.stats.deleted_by_overwrite += deleted
        self.stats.kept_changed += changed

    def _not_old(self, key: str) -> bool:
        """Whether an overwrite keeps ``key`` whatever its plan: a scratch key, ``_SUCCESS``."""
        return is_scratch_key(key) or key == self.layout.success_key

    def _old_objects(self, plan: OverwritePlan,
                     log_state: Future[tuple[LogState, Future[bytes | None]]]) -> OldObjects | None:
        """The old objects ``plan`` deletes, listed from now on while the Completes run (deleted once they are
        all complete), where the destination keeps no snapshot log (asked of ``log_state`` on the listing's
        thread); None where the plan deletes nothing."""
        if not plan.deletes:
            return None

        def snapshots() -> bool:
            try:
                return log_state.result()[0].enabled
            except Exception:  # (the commit raises it itself)
                return True

        old = OldObjects(self.store, self.dest, plan, self._written, skip=self._not_old)
        old.list_ahead(unless=snapshots)
        return old

    def _read_log(self, beside: ThreadPoolExecutor) -> tuple[LogState, Future[bytes | None]]:
        """The destination's log state, and its latest entry being fetched on ``beside``."""
        return SnapshotLog(self.store, self.dest, seen=self.seen).state_and_latest(beside)

    def _confirm_log(self, early: Future[tuple[LogState, Future[bytes | None]]],
                     beside: ThreadPoolExecutor) -> tuple[LogState, Future[bytes | None]]:
        """What ``early`` read before the lease was taken, confirmed by one listing under it (or read anew)."""
        try:
            found = early.result()
        except S3CommitError:
            return self._read_log(beside)
        return SnapshotLog(self.store, self.dest, seen=self.seen).confirmed(found, beside)

    def _refuse_snapshots_without_conditions(self) -> None:
        """Before anything: a snapshot destination on a store seen to ignore conditional writes (its log copied
        there by hand: ``s3commit snapshot enable`` refuses such a store) is refused, naming why. Its entry, the
        commit point, is an ``If-None-Match`` PUT: ignored, two commits would publish one snapshot id and the later
        entry would hide the earlier job's files. One LIST of the log's settings, on such a store only.

        Raises:
            ConfigError: the destination keeps a snapshot log and the store ignores conditional writes.
        """
        known = self.store.capabilities.get(self.dest.bucket)
        if known is None or known.conditional_writes or not SnapshotLog(self.store, self.dest).enabled():
            return
        raise ConfigError(
            f"{self.dest} keeps a snapshot log (_spark_metadata/{SETTINGS_NAME}), but its store ({known.endpoint}) "
            "was not seen to honour conditional writes: a snapshot is published with If-None-Match, and two jobs "
            "could publish the same one, hiding one's files. Commit to it on a store that honours them, or run "
            f"`s3commit snapshot disable {self.dest}` to make it a plain directory")

    def _refuse_rewriting_live_files(self, log_state: Future[tuple[LogState, Future[bytes | None]]]) -> None:
        """Before any Complete, where task commits completing at task commit (a snapshot destination) found keys
        there and left those uploads pending (:meth:`PendingUpload.key_there_at_task_commit`): a key the current
        snapshot lists would be rewritten in place under its readers. Checked against the log's latest entry (its
        paths, no line parsed); nothing is waited for where no key was there.

        Raises:
            ConfigError: a file of the job has the name of a file of the current snapshot.
        """
        there = self._keys_there  # found by the validation: no second pass over (or read of) the pendingsets
        if not there:
            return
        state, latest = log_state.result()
        data = latest.result()
        if state.settings is None or data is None:
            return
        live, scheme, prefix = entry_uris(data), state.settings.scheme, self.dest.prefix
        clashes = [c.dest_uri for c in there if c.destination_key.startswith(prefix)
                   and file_uri(scheme, self.dest.bucket, self.dest.key, c.destination_key[len(prefix):]) in live]
        if clashes:
            raise ConfigError(
                f"{len(clashes)} files of job {self.job_id} have the names of files of snapshot {state.latest} of "
                f"{self.dest} (first: {clashes[0]}): committing would rewrite them in place under the readers of "
                "that snapshot. On a snapshot destination every job's files need names of their own, as Spark's "
                "DataFrame writes and s3commit's engines give them; an RDD write through the magic committer names "
                "them part-r-NNNNN: set mapreduce.output.basename to a name unique to the job, or write through the "
                "directory committer")

    def _added_files_early(self, early: Future[tuple[LogState, Future[bytes | None]]],
                           keys: Sequence[str]) -> list[SnapshotFile] | None:
        """:meth:`_added_files` where the log read before the lease found a snapshot destination, else None (the
        publish makes them, if the destination is one under the lease). Where the task commits completed the uploads
        (they do only on a snapshot destination), made at once, beside that read."""
        first = next(self.validated_uploads(keys[:1]), None)
        if first is None or not first.completed_at_task_commit:
            try:
                if not early.result()[0].enabled:
                    return None
            except S3CommitError:
                return None
        return self._added_files(keys)

    def _added_files(self, keys: Sequence[str]) -> list[SnapshotFile]:
        """This job's files under the destination as a snapshot lists them, in key order."""
        now = int(time.time() * 1000)
        prefix = self.dest.prefix  # S3Uri.contains_key and relative, inline: a snapshot may add 100,000 files
        under, job = len(prefix), self.job_id
        added = [SnapshotFile(c.destination_key[under:], c.length, now, job) for c in self.validated_uploads(keys)
                 if len(c.destination_key) > under and c.destination_key.startswith(prefix)]
        added.sort(key=itemgetter(0))
        return added

    def _prepare_early(self, keys: Sequence[str], plan: OverwritePlan,
                       log_state: Future[tuple[LogState, Future[bytes | None]]],
                       added: Future[list[SnapshotFile] | None]) -> PreparedSnapshot | None:
        """:meth:`prepare_snapshot` where the confirmed log state is a snapshot destination's, else None: made on
        the pool while the journal is written and the uploads are completed (it sends no request but the current
        entry's GET, begun with the log's read)."""
        state, latest = log_state.result()
        return self.prepare_snapshot(keys, plan, state, latest, added.result()) if state.enabled else None

    def prepare_snapshot(self, keys: Sequence[str], plan: OverwritePlan, state: LogState,
                         latest: Future[bytes | None] | None = None,
                         added: list[SnapshotFile] | None = None) -> PreparedSnapshot:
        """The next snapshot, and its entry as it will be written: the current one (entry ``latest`` where the caller
        is fetching it), less what the overwrite plan replaces under the destination, plus this job's files
        (``added`` where the caller made them). Nothing is written: it is published (:meth:`publish_snapshot`) once
        every upload is complete, and dropped if the commit fails first. An overwrite of the whole destination keeps
        nothing of the current snapshot: it is made without waiting for it."""
        settings = state.settings
        assert settings is not None
        snapshots = SnapshotLog(self.store, self.dest, seen=self.seen)
        if latest is None:
            latest = resolved(snapshots.fetch(state.latest) if state.latest is not None else None)
        job_keys: set[str] | None = None

        def ours() -> set[str]:  # every key this job commits (its commit fails unless each is completed)
            nonlocal job_keys
            if job_keys is None:
                job_keys = {c.destination_key for c in self.validated_uploads(keys)}
            return job_keys

        def current() -> Snapshot:
            data = latest.result()
            if data is not None:
                return snapshots.parse(state.latest or 0, data)
            # Enabled, but its first entry was never written (the enabling process died): the files there now,
            # less this job's, are the snapshot it would have written.
            return Snapshot.of(-1, [file_of(i, self.dest) for i in data_files(self.store, self.dest)
                                    if i.key not in ours()])

        if added is None:
            added = self._added_files(keys)
        replaced = ["" if p == self.dest.prefix else self.dest.relative(p)
                    for p in plan.prefixes(self.dest, ours() if plan.replace_partitions else ())
                    if p == self.dest.prefix or self.dest.contains_key(p)]
        whole = "" in replaced
        base = None if whole else current()
        previous = base if base is not None else Snapshot(state.latest if state.latest is not None else -1)
        snapshot = next_snapshot(previous, added=added, replaced=replaced)
        return PreparedSnapshot(snapshot, snapshot.to_entry(settings.scheme, self.dest.bucket, self.dest.key),
                                state, latest, base, current, whole)

    def publish_snapshot(self, prepared: PreparedSnapshot) -> Snapshot:
        """The commit point of a job on a snapshot destination: the ``prepared`` snapshot published as the log's next
        entry (``If-None-Match: *``), under the lease. What a whole overwrite replaced is counted from the entry
        before it (its paths, parsed only where symlink manifests need it) beside its own PUT. Nothing is deleted
        here: the replaced files stay for the retention horizon."""
        state, snapshot, base, latest = prepared.state, prepared.snapshot, prepared.base, prepared.latest
        settings = state.settings
        assert settings is not None
        self.point = CommitPoint.SNAPSHOT
        self._log_before = state
        snapshots = SnapshotLog(self.store, self.dest, seen=self.seen)
        self.lease.check()
        with ThreadPoolExecutor(1, thread_name_prefix=f"s3commit-count-{self.job_id[:8]}") as beside:
            # A whole overwrite's count of what it replaced, from the entry before it, beside its own PUT.
            counted = beside.submit(lambda: None if (data := latest.result()) is None else snapshot.dropped_from(
                data, settings.scheme, self.dest.bucket, self.dest.key)) if prepared.whole else None
            try:
                snapshots.publish_entry(snapshot.id, prepared.entry)
            except CommitConflictError:
                raise
            except S3CommitError:
                # The answer may have been lost after S3 applied it: published is published.
                if self.published_snapshot() != snapshot.id:
                    raise
        self.stats.snapshot = snapshot.id
        self.stats.snapshot_files = len(snapshot.files)
        try:  # past the commit point: a failure here only leaves the count, or the manifests, to later
            if base is None and settings.symlink_manifests:
                base = prepared.current()
            if base is not None:
                self.stats.replaced = len(base.relatives - snapshot.relatives)
            elif counted is not None:
                self.stats.replaced = counted.result() or 0
        except S3CommitError as err:
            log.warning("job %s: published snapshot %d of %s, but could not read the one before (%s)", self.job_id,
                        snapshot.id, self.dest, err)
        self._published = (snapshot, base, settings)
        log.info("job %s published snapshot %d of %s: %d files, %d replaced", self.job_id, snapshot.id, self.dest,
                 len(snapshot.files), self.stats.replaced)
        return snapshot

    def published_snapshot(self) -> int | None:
        """The id of the snapshot this job published, if the destination's latest one lists a file of this job
        (a job publishes the latest snapshot while it holds the lease, and no later one can be published before its
        commit is settled); None otherwise (and for a job with no file: its commit is then redone, harmlessly)."""
        snapshots = SnapshotLog(self.store, self.dest)
        state = snapshots.state()
        current = snapshots.current(state)
        if current is None or state.settings is None or not any(f.job == self.job_id for f in current.files):
            return None
        self.point = CommitPoint.SNAPSHOT
        self._published = (current, None, state.settings)  # no base: every manifest is written again
        return current.id

    def _outside(self, plan: OverwritePlan) -> OverwritePlan:
        """The part of ``plan`` outside the destination (directories elsewhere in its bucket)."""
        outside = [p.rstrip("/") for p in plan.prefixes(self.dest, self._committed)
                   if p != self.dest.prefix and not self.dest.contains_key(p)]
        return OverwritePlan(delete_outside=tuple(outside))

    def _write_manifests_quietly(self) -> None:
        """After a snapshot's commit point, where the destination keeps symlink manifests: those of the partitions
        it changed (all of them when resumed). A failure is logged: the commit stands, and ``s3commit recover`` or
        the next commit of those partitions writes them again."""
        published = self._published
        if published is None or not published[2].symlink_manifests:
            return
        try:
            write_manifests(self.store, self.dest, published[0], published[1], published[2].scheme,
                            pool_size=self.options.pool_size)
        except S3CommitError as err:
            log.warning("job %s committed snapshot %d; writing its symlink manifests failed (`s3commit recover %s "
                        "--job %s` writes them again): %s", self.job_id, self.stats.snapshot, self.dest,
                        self.job_id, err)

    def _vacuum_quietly(self) -> None:
        """A bounded vacuum after a snapshot commit: the files of expired entries no retained snapshot lists (none of
        this job's). A failure is logged: the next commit or ``s3commit snapshot vacuum`` does it."""
        try:
            # The log as this commit listed it before publishing (the lease kept it so), not listed again: the entry
            # it published left out, its predecessor counts as current and waits for the next commit's vacuum.
            report = vacuum(self.store, self.dest, full=False, max_entries=VACUUM_ENTRIES_AT_COMMIT,
                            pool_size=self.options.pool_size, state=self._log_before)
            self.stats.vacuumed = report.deleted
        except S3CommitError as err:
            log.warning("job %s committed snapshot %d; the vacuum after it failed (the next commit or `s3commit "
                        "snapshot vacuum %s` does it): %s", self.job_id, self.stats.snapshot, self.dest, err)

    def mark(self, success: SuccessData) -> None:
        """The commit point of a job: ``_SUCCESS`` (unless ``success_marker`` is off). A batch's, the sink's log
        entry, is written by the JVM between :meth:`prepare` and :meth:`finish`."""
        if self.point is not CommitPoint.SINK_LOG and self.options.success_marker:
            self.store.objects.put_object(self.dest.bucket, self.layout.success_key, success.to_json(),
                                          content_type="application/json")

    def success_data(self) -> SuccessData:
        names = tuple(f"/{k}" for k in sorted(self._committed)[:SUCCESS_FILENAME_LIMIT])
        self.end_limit_watch()
        counted = self.store.counters.snapshot()
        requests = counted["requests"]
        limit = self.stats.limit
        metrics = {
            "committer_commits_completed": self.stats.completed,
            **({"committer_commits_completed_at_task_commit": self.stats.completed_at_task_commit}
               if self.stats.completed_at_task_commit else {}),
            "committer_bytes_committed": self.stats.bytes,
            "committer_files": self.stats.files,
            "committer_pendingsets": self.stats.pendingsets,
            "committer_pendingsets_preloaded": self.stats.pendingsets_preloaded,
            "committer_commits_reverted": self.stats.reverted,
            "committer_commits_aborted": self.stats.aborted,
            "committer_objects_deleted_by_overwrite": self.stats.deleted_by_overwrite,
            "committer_objects_kept_changed_since_listing": self.stats.kept_changed,
            "committer_lease_wait_ms": int(self.lease.waited * 1000),
            "committer_lease_requests": self.lease.requests,
            "committer_dead_jobs_swept": self.stats.dead_jobs_swept,
            "committer_dead_job_uploads_aborted": self.stats.dead_job_uploads_aborted,
            **({"committer_objects_validated": self.stats.validated,
                "committer_checksums_verified": self.stats.checksums_verified} if self.options.validate_output
               else {}),
            **({"committer_snapshot": self.stats.snapshot, "committer_snapshot_files": self.stats.snapshot_files,
                "committer_files_replaced": self.stats.replaced} if self.stats.snapshot >= 0 else {}),
            **({"committer_throttles": limit.throttles, "committer_concurrency_decreases": limit.decreases,
                "committer_concurrency_low": limit.low, "committer_concurrency_high": limit.high,
                "committer_concurrency_final": limit.final} if limit is not None else {}),
            **{f"op_{op}": n for op, n in sorted(requests.items())},
            **{f"throttled_{op}": n for op, n in sorted(counted["throttles"].items())},
            **{f"duration_{k}_ms": v for k, v in self.stats.timings_ms.items()},
        }
        finished_by = {RECOVERED_DIAGNOSTIC: "true"} if self.finisher else {}
        return SuccessData(
            committer=self.committer, job_id=self.job_id, job_id_source=self.job_id_source,
            description=f"s3commit job committer for {self.dest}"
                        + (f" (finished by {self.finisher})" if self.finisher else ""), metrics=metrics,
            diagnostics={**finished_by, "fs.s3a.committer.threads": str(self.options.threads),
                         "fs.s3a.multipart.size": str(self.options.part_size),
                         "s3commit.commit.rate-limit": str(self.options.rate_limit),
                         "s3commit.store.concurrency.adaptive": str(self.store.options.concurrency_adaptive).lower(),
                         "s3commit.store.concurrency.max": str(self.store.options.concurrency_max),
                         "fs.s3a.create.checksum.algorithm": str(self.store.options.checksum_algorithm or "none"),
                         "s3commit.committer.validate.output": str(self.options.validate_output).lower(),
                         **self._store_diagnostics()},
            filenames=names,
        )

    def _store_diagnostics(self) -> dict[str, str]:
        """What the store was seen to honour, as the job's decisions used it (``_SUCCESS`` diagnostics)."""
        known = self.store.capabilities.get(self.dest.bucket)
        if known is None:
            return {"s3commit.capabilities": "unknown"}
        probed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(known.probed_at))
        return {"s3commit.capabilities": known.summary(), "s3commit.capabilities.probed": probed,
                "s3commit.checksum.verify-etag.effective":
                    str(self.store.bodies.verifies_etags(self.dest.bucket)).lower(),
                "s3commit.checksum.algorithm.effective":
                    str(self.store.uploads.checksum_algorithm(self.dest.bucket,
                                                              object_checked=self.options.validate_output) or "none")}

    def cleanup(self, *, read_pendingsets: bool = False) -> None:
        """Abort this job's orphan uploads, then delete the job directory (journal last).

        The orphans: uploads of task attempts that never committed (failed, lost, killed), recorded in the
        tasks directory, and those the job's rules find by listing (:mod:`s3commit.commit.job_uploads`), never the
        uploads just committed. ``read_pendingsets``: also read the pendingsets' records (a clean-up resumed
        by recovery, whose engine did not load them: the Create windows of committed uploads are there).
        """
        with ThreadPoolExecutor(1, thread_name_prefix="s3commit-sweep") as side:
            records = side.submit(self._records, read_pendingsets)
            self._finish_cleanup(records, side.submit(self._sweep, records))

    def _records(self, read_pendingsets: bool = False) -> JobRecords:
        """The records the clean-up's sweep works from (:meth:`cleanup`)."""
        if self.point is CommitPoint.SINK_LOG:
            return JobRecords()  # every file name of a batch job carries its id: the sweep matches on it
        records = self.uploads.read_records(pendingsets=False)
        if read_pendingsets:  # only what the engine would have kept: the windows of committed uploads
            records.update(self.uploads.read_pendingset_records().windowed())
        return records

    def _sweep(self, records: Future[JobRecords]) -> None:
        """Abort the job's orphan uploads (best effort where listing uploads is refused)."""
        found = records.result()
        found.update(self._create_windows)  # committed uploads whose Create lost an answer (from validation)
        keep = set(self._committed.values())
        known = self.store.capabilities.get(self.dest.bucket)
        # A store seen not to list uploads (named once at job setup): what the records name is aborted.
        listed = self.options.abort_orphans and (known is None or known.lists_uploads)
        if listed:
            try:
                self.stats.orphans_aborted += self.uploads.abort(found, keep=keep)
            except S3CommitError as err:
                # Best effort, as in S3A (HADOOP-17547): listing uploads needs s3:ListBucketMultipartUploads,
                # which many roles lack; the job's output is committed by now and must not be reported failed.
                log.warning("job %s: could not sweep orphan uploads under %s (set s3commit.abort.orphans="
                            "false if this role may not list uploads): %s", self.job_id, self.dest, err)
                listed = False
        if not listed:  # what the records name can be aborted without listing
            self.stats.orphans_aborted += self.uploads.abort(found, keep=keep, list_uploads=False)

    def _mark_snapshot(self, success: SuccessData) -> None:
        """A snapshot commit's ``_SUCCESS``, then its symlink manifests."""
        self.mark(success)  # marked
        self._write_manifests_quietly()

    def _finish_cleanup(self, records: Future[JobRecords], swept: Future[None],
                        listing: Future[Iterator[ObjectInfo]] | None = None,
                        side: ThreadPoolExecutor | None = None, marked: Future[None] | None = None) -> None:
        """Delete the job directory while ``swept`` runs, once the ``records`` it works from are read (they are in
        that directory), then, once it is done, the journal: a clean-up that stops part way is finished by
        `s3commit recover` from the same records. ``listing``: the job directory's listing, started beside the
        commit point (its first page asked for while ``_SUCCESS`` was written; nothing is deleted before
        ``_SUCCESS`` is). ``side``: the job's own commit, whose lease is released on it beside the journal's DELETE,
        once everything else of the job directory is gone (a journal left then names no pendingset that is still
        there: whoever finds it, ``s3commit recover`` or the job committed again, only finishes the clean-up).
        ``marked``: a snapshot commit's ``_SUCCESS`` and manifests, or a job's ``_SUCCESS`` under the lease (its
        journal's ``success_beside_cleanup``), written beside the deletion: the lease is released and the journal
        deleted once they are done; if they failed, neither (the error is raised, and the journal is how a recovery
        writes them)."""
        bucket = self.dest.bucket
        wait([records])
        delete_prefix(self.store, bucket, f"{self.layout.job_dir}/", keep={self.journal_key},
                      listed=listing.result() if listing is not None else None)
        swept.result()
        if marked is not None:
            marked.result()
        released = side.submit(self.lease.release, committed=True, files=self.stats.files) if side else None
        try:
            self.store.objects.delete_object(bucket, self.journal_key)
        finally:
            if released is not None:
                released.result()

    # --- the variants ------------------------------------------------------------------------------------------

    def run(self, keys: Sequence[str], plan: OverwritePlan,
            accepted_attempts: dict[str, set[str]] | None = None, *,
            beside: Callable[[], None] | None = None, known: Mapping[str, PendingSet] | None = None,
            preloaded: Mapping[str, PendingSet] | None = None,
            log_ahead: Future[tuple[LogState, Future[bytes | None]]] | None = None) -> SuccessData:
        """The whole commit. On failure everything this job uploaded is aborted or reverted. ``beside``: work that
        runs beside the commit from its start and is done before ``_SUCCESS`` is written (the session's sweep of
        dead jobs, whose counts ``_SUCCESS`` reports); it must not raise. ``known``, ``preloaded``: pendingsets of
        ``keys`` the caller holds (:meth:`load_and_validate`). ``log_ahead``: the log's early read, begun with the
        lease's taking ahead (:meth:`SnapshotLog.state_ahead`), after the lease noted the ETag it remembers it free
        at."""
        # The requests beside the commit's path: the clean-up's records (task attempts' files, which a commit does
        # not change) are read while the job commits; the pendingsets load while the lease is taken; the sweep of
        # orphan uploads runs beside the _SUCCESS PUT and the job directory's deletion, whose LIST is sent once the
        # journal is written.
        quiet = quiet_collector() if len(keys) >= QUIET_FROM_PENDINGSETS else contextlib.nullcontext()
        with quiet, ThreadPoolExecutor(3, thread_name_prefix="s3commit-side") as side:
            self._lean = self.store.objects.lean_loop(self.dest.bucket)
            try:
                return self._run(keys, plan, accepted_attempts, side, beside, known, log_ahead, preloaded)
            finally:
                self.end_limit_watch()
                lean, self._lean = self._lean, None
                if lean is not None:
                    lean.close()

    def _run(self, keys: Sequence[str], plan: OverwritePlan, accepted_attempts: dict[str, set[str]] | None,
             side: ThreadPoolExecutor, beside: Callable[[], None] | None,
             known: Mapping[str, PendingSet] | None = None,
             log_ahead: Future[tuple[LogState, Future[bytes | None]]] | None = None,
             preloaded: Mapping[str, PendingSet] | None = None) -> SuccessData:
        started = time.monotonic()
        self._refuse_snapshots_without_conditions()
        besides = side.submit(beside) if beside is not None else None
        records = side.submit(self._records)
        bucket = self.dest.bucket
        with _shut_beside(side, ThreadPoolExecutor(self.options.pool_size,
                                                   thread_name_prefix=f"s3commit-{self.job_id[:8]}")) as pool:
            # Whether the destination keeps a snapshot log, and its latest entry: read while the lease is taken.
            # The log is enabled, disabled and written only under the lease, so what a read finds holds while the
            # job holds it. This one comes before: it stands as it is only where the lease is then taken on the ETag
            # this process remembered it free at before this read began (nothing held it since then:
            # CommitLease.taken_as_remembered); otherwise one listing under the lease, beside the journal, confirms it.
            remembered = self.lease.remembered()
            early = log_ahead if log_ahead is not None else pool.submit(self._read_log, pool)
            journalled = self._load_and_lease(pool, side, keys, accepted_attempts, known, preloaded,
                                              plan if self.options.journal else None)  # LOADED and LEASED
            if not keys:
                log.warning("job %s: no pending uploads to commit to %s", self.job_id, self.dest)
            trusted = remembered is not None and self.lease.taken_as_remembered == remembered
            log_state = pool.submit(self._confirm_log, early, pool) if self.lease.held and not trusted else early
            # A snapshot destination's new files, made while the log is confirmed and the journal written.
            added = pool.submit(self._added_files_early, early, keys)
            # And its next entry, made while the journal is written and the uploads are completed (published only
            # once they all are).
            prepared = pool.submit(self._prepare_early, keys, plan, log_state, added)
            # The old objects an overwrite deletes, listed from here on, under the lease (no other job's commit
            # changes them), while the uploads are completed (and the journal's PUT answered, where it comes after
            # the lease).
            old = self._old_objects(plan, log_state)
            try:
                if self.options.journal and not journalled:
                    self.write_journal(keys, plan, accepted_attempts)  # JOURNALLED
            except BaseException:
                if old is not None:
                    old.stop()
                raise
            # The job directory's first LIST for its clean-up, beside the commit: a read, and nothing is written
            # there from here on; nothing is deleted before _SUCCESS is written.
            listing = side.submit(list_ahead, self.store, bucket, f"{self.layout.job_dir}/")
            t0 = time.monotonic()
            try:
                self._refuse_rewriting_live_files(log_state)
                self.complete_all(pool, keys)  # COMPLETED, or ROLLED BACK below
                self.stats.timings_ms["complete"] = _ms(t0)
                lean, self._lean = self._lean, None
                if lean is not None:  # its last requests sent: its connections close beside what follows
                    side.submit(lean.close)
                state = log_state.result()[0]
                if not state.enabled:
                    self.check_completed_at_task_commit(pool, keys)
                if state.enabled:
                    t0 = time.monotonic()
                    ready = prepared.result()  # made from the same log state
                    assert ready is not None
                    self.publish_snapshot(ready)  # COMMITTED (a snapshot destination)
                    self.stats.timings_ms["snapshot"] = _ms(t0)
            except LeaseLostError:
                if old is not None:
                    old.stop()
                raise  # the job that took the lease over settles this commit from its journal: no roll back here
            except BaseException as err:
                if old is not None:
                    old.stop()
                left = self.roll_back(pool, keys)
                message = f"job {self.job_id} commit to {self.dest} failed"
                if left:
                    # Keep the journal: it is how `s3commit recover --abort` finds what is still to undo.
                    message += (f"; {left} uploads or pendingsets could not be rolled back (see the log): run "
                                f"`s3commit recover {self.dest} --job {self.job_id} --abort`")
                elif self.options.journal:
                    revert_upload_quietly(self.store, bucket, self.layout.journal_key)
                failed = [(getattr(err, "key", None) or "?", err)]
                raise JobCommitError(message,
                                     failures=[(f"s3://{bucket}/{k}", e) for k, e in failed],
                                     reverted=self.stats.reverted, aborted=self.stats.aborted,
                                     not_rolled_back=left) from err
        t0 = time.monotonic()
        # OVERWRITTEN: on a snapshot destination only locations outside it (no snapshot lists them).
        if self.point is CommitPoint.SNAPSHOT:
            if old is not None:
                old.stop()
            self.apply_overwrite(self._outside(plan))
        else:
            self.apply_overwrite(plan, old)
        self.stats.timings_ms["overwrite"] = _ms(t0)
        self.stats.timings_ms["total"] = _ms(started)
        if besides is not None:
            try:
                besides.result()
            except Exception as err:  # past the commit point: what ran beside never fails the job
                log.warning("job %s: work beside its commit failed (the commit stands): %s", self.job_id, err)
        success = self.success_data()
        self.lease.check()
        swept = side.submit(self._sweep, records)
        with ThreadPoolExecutor(2, thread_name_prefix=f"s3commit-after-{self.job_id[:8]}") as after:
            if self.point is CommitPoint.SNAPSHOT:
                # Past its commit point (the entry) a snapshot commit writes _SUCCESS and its symlink manifests (under
                # the lease, which the clean-up releases once they are done) beside the job directory's deletion,
                # and its bounded vacuum (files of expired entries, none of this job's) beside both. A recovery
                # that finds the pendingsets gone writes the _SUCCESS the job's snapshot calls for (resume).
                marked: Future[None] | None = after.submit(self._mark_snapshot, success)
                after.submit(self._vacuum_quietly)
            elif self._success_beside_cleanup and self.lease.held:
                # Under the lease, as its journal says: every upload is complete and the overwrite done, so the
                # job directory goes beside the _SUCCESS PUT (COMMITTED), the journal once both are done. A
                # recovery that finds pendingsets deleted and _SUCCESS not naming the job writes it (resume). (A
                # commit resumed without holding the lease itself writes _SUCCESS first.)
                marked = after.submit(self.mark, success)
            else:
                self.mark(success)  # COMMITTED
                marked = None
            self.success = success
            try:
                self._finish_cleanup(records, swept, listing, side, marked)  # CLEANED
            except S3CommitError as err:
                wait([marked] if marked is not None else [])
                unmarked = marked.exception() if self.point is CommitPoint.SUCCESS and marked is not None else None
                if unmarked is not None:  # the journal stays: `s3commit recover` writes _SUCCESS from it
                    raise S3CommitError(
                        f"job {self.job_id}: its files are committed to {self.dest} (every upload complete, its job "
                        f"directory deleted), but its _SUCCESS could not be written: {unmarked}. Write it with "
                        f"`s3commit recover {self.dest} --job {self.job_id}`") from unmarked
                # The output is committed (and _SUCCESS written, or a snapshot published): the job succeeded. What is
                # left (the job directory, the journal, uploads of failed attempts; a snapshot commit's _SUCCESS) is
                # for `s3commit recover`, which finishes the clean-up.
                log.warning("job %s: committed, but the clean-up failed (finish it with `s3commit recover %s "
                            "--job %s`): %s", self.job_id, self.dest, self.job_id, err)
        log.info("job %s committed %d files (%d bytes) to %s in %d ms", self.job_id, self.stats.completed,
                 self.stats.bytes, self.dest, _ms(started))
        return success

    def _load_and_lease(self, pool: ThreadPoolExecutor, side: ThreadPoolExecutor, keys: Sequence[str],
                        accepted_attempts: dict[str, set[str]] | None,
                        known: Mapping[str, PendingSet] | None = None,
                        preloaded: Mapping[str, PendingSet] | None = None,
                        plan: OverwritePlan | None = None) -> bool:
        """LOADED, then JOURNALLED, beside LEASED: the pendingsets load and are validated on ``side`` while this
        thread takes the lease (its waits on the job's clock). The lease changes nothing of the destination, and
        nothing of this job does before both are done (the first Complete comes after). A load that failed is
        raised once the lease is settled (the caller releases a lease taken); it comes before the lease's own error.

        With ``plan`` (a job's commit that writes a journal and takes a lease), the journal is written on ``side``
        once the pendingsets have passed, beside the lease's taking rather than after it (one round trip less),
        where every upload it names is still pending (none was completed at its task commit, as a snapshot
        destination's are). A journal whose job then failed to take the lease is deleted here. One whose job died
        first names only pending uploads (they are completed only under the lease): the next sweep of dead jobs
        rolls it back (:func:`s3commit.commit.recovery.roll_back_unstarted`), unless ``s3commit recover`` finishes
        it first. The first wave's connections are opened on ``side`` too. Returns whether the journal was
        written."""
        started = time.monotonic()
        leasing = isinstance(self.lease, CommitLease) and not self.lease.held and self.point is CommitPoint.SUCCESS

        def load() -> bool:
            self.load_and_validate(pool, keys, accepted_attempts, known, preloaded)
            self.stats.timings_ms["load"] = _ms(started)
            self._warm_for_completes()
            if plan is None or not leasing or not self.stats.files or self._done_at_task_commit:
                return False
            self.write_journal(keys, plan, accepted_attempts, leased=True)  # JOURNALLED
            return True

        loaded = side.submit(load)
        try:
            self.lease.acquire()
        except BaseException:
            wait([loaded])
            failed = loaded.exception()
            if failed is None and loaded.result():  # written for a commit that does not take place
                revert_upload_quietly(self.store, self.dest.bucket, self.journal_key)
            elif failed is not None and not isinstance(failed, JournalExistsError):
                loaded.result()  # the load's error first, as when it ran before the lease
            raise  # (and the lease's before another commit's journal, met only because it was written beside)
        finally:
            self.stats.timings_ms["lease"] = _ms(started)
        return loaded.result()

    # --- from a journal: resume, roll back ----------------------------------------------------------------------

    @classmethod
    def open_journal(cls, store: S3Store, dest: S3Uri, job_id: str, layouts: Sequence[JobLayout],
                     options: CommitterOptions, *, finisher: str = "s3commit recover") -> CommitEngine | None:
        """The engine of the interrupted commit whose journal is at one of ``layouts`` (checked: its job, its
        destination, its pendingsets in its job directory), or ``None`` if there is none."""
        for layout in layouts:
            try:
                data = store.objects.get_object(dest.bucket, layout.journal_key)
            except NotFoundError:
                continue
            source = f"s3://{dest.bucket}/{layout.journal_key}"
            journal = CommitJournal.from_json(data, source=source)
            if journal.job_id != job_id:
                raise ManifestError(f"journal is for job {journal.job_id}, not {job_id}", source=source)
            if journal.bucket != dest.bucket or journal.dest_key != dest.key:
                raise ManifestError(f"journal is for s3://{journal.bucket}/{journal.dest_key}, not {dest}",
                                    source=source)
            for key in journal.pendingsets:
                if not key.startswith(f"{layout.job_attempt_dir}/"):
                    raise ManifestError(f"journal names a pendingset outside the job directory: {key!r}", source=source)
            return cls(store, dest=dest, layout=layout, job_id=job_id, committer=journal.committer,
                       options=replace(options, journal=False, success_marker=journal.success_marker),
                       job_id_source="s3commit-recover", absolute_dirs=journal.absolute_dirs, finisher=finisher,
                       journal=journal)
        return None

    @property
    def _journalled(self) -> CommitJournal:
        if self.journal is None:
            raise CommitStateError(f"job {self.job_id}: no journal was opened (CommitEngine.open_journal)")
        return self.journal

    def journal_plan(self) -> OverwritePlan:
        journal = self._journalled
        return OverwritePlan(delete_paths=journal.delete_paths, replace_partitions=journal.replace_partitions,
                             delete_outside=journal.delete_outside)

    def check_same_commit(self, pendingsets: set[str], plan: OverwritePlan, absolute_dirs: set[str], *,
                          listed: bool) -> None:
        """Refuse to resume with a commit other than the journal's: ``pendingsets``, ``plan`` and ``absolute_dirs``
        are what the caller commits now (``listed``: it listed the job directory, so a clean-up that had begun may
        have deleted some pendingsets already).

        Raises:
            JournalExistsError: the journal records another commit of this job.
        """
        journal, recorded = self._journalled, set(self._journalled.pendingsets)
        same_keys = pendingsets <= recorded if listed else pendingsets == recorded
        mine = self.journal_plan()
        same_plan = (set(plan.delete_paths), set(plan.delete_outside), plan.replace_partitions) == (
            set(mine.delete_paths), set(mine.delete_outside), mine.replace_partitions)
        if not (same_keys and same_plan and absolute_dirs <= set(journal.absolute_dirs)):
            raise JournalExistsError(
                f"job {self.job_id} already has the commit journal of another commit (other pendingsets or "
                f"overwrite plan) at s3://{self.dest.bucket}/{self.layout.journal_key}; run `s3commit recover "
                f"{self.dest} --job {self.job_id}` to finish that commit, or --abort to roll it back")

    def _report(self, action: RecoveryAction, message: str, **counts: Any) -> RecoveryReport:
        journal = self._journalled
        age = max(0.0, time.time() - journal.created / 1000) if journal.created else None
        values: dict[str, Any] = {
            "uploads": self.stats.files, "aborted": self.stats.aborted, "reverted": self.stats.reverted,
            "deleted_by_overwrite": self.stats.deleted_by_overwrite, "orphans_aborted": self.stats.orphans_aborted,
        }
        values.update(counts)
        return RecoveryReport(dest=str(self.dest), job_id=self.job_id, action=action, message=message,
                              committer=journal.committer, journal_age_seconds=age, **values)

    def _missing_pendingsets(self) -> list[str]:
        present = set(pendingset_keys_under(self.store, self.dest.bucket, self.layout.job_attempt_dir))
        return [k for k in self._journalled.pendingsets if k not in present]

    def committed_success(self) -> SuccessData | None:
        """``dest/_SUCCESS`` if it names this job (its commit point was passed), else ``None``."""
        try:
            data = SuccessData.from_json(self.store.objects.get_object(self.dest.bucket, self.layout.success_key))
        except (NotFoundError, ManifestError):
            return None
        return data if data.job_id == self.job_id else None

    def _cleaned_up(self, reason: str) -> RecoveryReport:
        """CLEANED for a commit whose commit point was passed (``reason`` says how we know)."""
        self.cleanup(read_pendingsets=True)
        self.success = self.committed_success() or self.success_data()
        return self._report(RecoveryAction.CLEANED_UP, f"job {self.job_id} {reason}; finished the clean-up",
                            orphans_aborted=self.stats.orphans_aborted)

    def _pending_upload_ids(self) -> set[str]:
        uploads = self.store.uploads
        return {u.upload_id for prefix in self.scopes()
                for u in uploads.list_multipart_uploads(self.dest.bucket, prefix)}

    def resume(self) -> RecoveryReport:
        """Finish the journalled commit from where it stopped: only the clean-up where the commit point was passed
        (``_SUCCESS`` names the job, or the clean-up, which starts after it, deleted pendingsets), else COMPLETED
        onwards (completion is idempotent: an upload already completed counts as done).

        Raises:
            JobCommitError: an upload could not be completed any more; the commit was rolled back (and cleaned up,
                unless S3 refused part of the roll-back: then the journal stays for ``recover --abort``).
        """
        keys = list(self._journalled.pendingsets)
        missing = self._missing_pendingsets()
        if missing:
            # Pendingsets are deleted only by clean-up, which starts once every upload is complete and the overwrite
            # done: the commit is done. A snapshot commit deletes them beside its _SUCCESS PUT, and so does a job's
            # commit under the lease (its journal says so): where _SUCCESS does not name the job, that PUT is done
            # here (under the lease, no other commit passed this journal: one taking the lease over settles it).
            # The lease records a job committed once its _SUCCESS (and a snapshot's manifests) were written: where
            # it does, a _SUCCESS naming another job is a later commit's, and stays (a later append's snapshot still
            # lists this job's files).
            if self.committed_success() is None and committed_here(self.store, self.dest, self.job_id) is None:
                if (published := self.published_snapshot()) is not None:
                    self._mark_published(published)
                elif self._journalled.success_beside_cleanup and self._journalled.success_marker:
                    self.mark(self._journalled_success())
            return self._cleaned_up(f"had committed and was cleaning up ({len(missing)} of {len(keys)} "
                                    "pendingsets already deleted)")
        if self.committed_success() is not None:
            # _SUCCESS is written after every completion and the overwrite: only the clean-up is left.
            return self._cleaned_up(f"has committed (s3://{self.dest.bucket}/{self.layout.success_key} names it)")
        published = self.published_snapshot()
        if published is not None:
            # The snapshot's entry is the commit point: _SUCCESS (after it) and the clean-up are left.
            self._mark_published(published)
            return self._cleaned_up(f"has committed (snapshot {published} of {self.dest} is its)")
        pending_before = self._pending_upload_ids()
        try:
            self.run(keys, self.journal_plan(), accepted_attempts={
                key: set(attempts) for key, attempts in self._journalled.accepted_attempts.items()} or None)
        except JobCommitError as err:
            self._clean_up_after_roll_back(err)
            raise
        stats = self.stats
        still_pending = sum(1 for c in self.validated_uploads(keys) if c.upload_id in pending_before)
        success_written = self._journalled.success_marker
        return self._report(
            RecoveryAction.FINISHED,
            f"finished the commit of job {self.job_id}: {stats.files} files; {still_pending} uploads completed "
            f"now, {stats.files - still_pending} were already complete" + (", _SUCCESS written" if success_written
                                                                           else ""),
            completed=still_pending, already_completed=stats.files - still_pending, success_written=success_written)

    def _journalled_success(self) -> SuccessData:
        """The ``_SUCCESS`` of a commit whose pendingsets are gone, from what its journal recorded of them."""
        journal = self._journalled
        self.stats.files, self.stats.bytes = journal.files, journal.total_bytes
        self.stats.pendingsets = len(journal.pendingsets)
        return replace(self.success_data(), filenames=tuple(f"/{key}" for key in journal.first_files))

    def _mark_published(self, published: int) -> None:
        """What follows the commit point of a job whose snapshot ``published`` was found: ``_SUCCESS``, the symlink
        manifests and the bounded vacuum."""
        self.stats.snapshot = published
        self.mark(self.success_data())
        self._write_manifests_quietly()
        self._vacuum_quietly()

    def _clean_up_after_roll_back(self, err: JobCommitError) -> None:
        """A resumed commit that failed was rolled back: clear the job if nothing is left behind."""
        if err.reverted + err.aborted < self.stats.files:
            log.warning("roll back of job %s is incomplete; keeping its journal for `s3commit recover --abort`",
                        self.job_id)
            return
        try:
            self.cleanup()
        except S3CommitError as cleanup_error:  # never hide the error that made us roll back
            log.warning("clean-up of job %s after a failed recovery failed: %s", self.job_id, cleanup_error)

    def roll_back_from_journal(self, *, force: bool = False, unstarted: bool = False) -> RecoveryReport:
        """ROLLED BACK then CLEANED: every upload of the journalled commit aborted, every completed one deleted.
        Every pendingset is validated first (a foreign or tampered manifest must not make us delete objects).
        ``unstarted``: only a commit that changed nothing (it names uploads, every one still pending).

        Raises:
            AlreadyCommittedError: the commit point was passed (nothing is rolled back).
            RecoveryError: every upload is complete under an overwrite plan that may have begun deleting the old
                data (unless ``force``), or (``unstarted``) some upload is no longer pending (nothing is rolled
                back), or S3 refused part of the roll-back (the journal is kept).
        """
        keys = list(self._journalled.pendingsets)
        missing = self._missing_pendingsets()
        if missing:
            raise AlreadyCommittedError(
                f"cannot roll back job {self.job_id}: its commit had finished and was cleaning up "
                f"({len(missing)} of {len(keys)} pendingsets already deleted); run "
                f"`s3commit recover {self.dest} --job {self.job_id}` (without --abort) to finish the clean-up")
        if self.committed_success() is not None:
            raise AlreadyCommittedError(
                f"cannot roll back job {self.job_id}: it has committed (s3://{self.dest.bucket}/"
                f"{self.layout.success_key} names it) and only its clean-up was interrupted; run "
                f"`s3commit recover {self.dest} --job {self.job_id}` (without --abort) to finish the clean-up")
        published = self.published_snapshot()
        if published is not None:
            raise AlreadyCommittedError(
                f"cannot roll back job {self.job_id}: it has committed (snapshot {published} of {self.dest} is its) "
                f"and only its clean-up was interrupted; run `s3commit recover {self.dest} --job {self.job_id}` "
                "(without --abort) to finish it")
        # On a snapshot destination nothing is deleted before the commit point: rolling back never loses data.
        snapshot_dest = SnapshotLog(self.store, self.dest).state().enabled
        with ThreadPoolExecutor(self.options.pool_size,
                                thread_name_prefix=f"s3commit-recover-{self.job_id[:8]}") as pool:
            self.load_and_validate(pool, keys)
            pending = self._pending_upload_ids()
            completed = gone = waiting = 0
            for commit in self.validated_uploads(keys):
                if commit.upload_id in pending:
                    waiting += 1
                elif self.store.uploads.completed_object(commit.bucket, commit.destination_key, commit.etags,
                                                         length=commit.length, created_ms=commit.created):
                    self.mark_completed(commit)
                    completed += 1
                else:
                    gone += 1
            total = completed + gone + waiting
            if unstarted and not 0 < waiting == total:
                raise RecoveryError(
                    f"job {self.job_id} has begun its commit: {total - waiting} of its {total} uploads are no longer "
                    f"pending; left to its lease's taker or `s3commit recover {self.dest} --job {self.job_id}`")
            if total and completed == total and self.journal_plan().deletes and not force and not snapshot_dest:
                raise RecoveryError(
                    f"cannot roll back job {self.job_id} safely: all {total} uploads are complete and its "
                    f"overwrite plan may already have deleted the old data under {self.dest}; rolling back "
                    "would lose both. Run recover without --abort to finish the commit, or add --force to "
                    "delete the new data anyway")
            self.roll_back(pool, keys)
        stats = self.stats
        failed = (completed - stats.reverted) + (waiting + gone - stats.aborted)
        if failed > 0:
            raise RecoveryError(
                f"roll back of job {self.job_id} is incomplete: {failed} uploads could not be aborted "
                f"or deleted (see the log); its journal is kept, run `s3commit recover {self.dest} --job "
                f"{self.job_id} --abort` again")
        self.cleanup()
        return self._report(
            RecoveryAction.ROLLED_BACK,
            f"rolled back the commit of job {self.job_id}: {stats.reverted} completed uploads deleted, "
            f"{waiting} aborted, {gone} were already gone",
            aborted=waiting, reverted=stats.reverted, already_completed=completed,
            orphans_aborted=stats.orphans_aborted)

    # --- a streaming batch: its commit point, the sink's log entry, between its two halves ----------------------

    def prepare(self, keys: Sequence[str], accepted_attempts: dict[str, set[str]]) -> list[PendingUpload]:
        """LOADED and JOURNALLED (a batch journal, where there is anything to commit); returns the uploads, the
        batch's files for its log entry. Nothing becomes visible."""
        with self._pool() as pool:
            self.load_and_validate(pool, keys, accepted_attempts)
        uploads = list(self.validated_uploads(keys))
        for upload in uploads:
            if not carries_job_id(upload.destination_key, self.job_id):
                # The clean-up and the sink's recovery find a batch's files by the job id in their names: a file without
                # it could be rolled back after the log committed it. Refused before anything is journalled.
                raise ManifestError(f"{upload.dest_uri}: a streaming batch's file names must carry its job id "
                                    f"{self.job_id} (part-<n>-<job id>..., as s3commit's sink names them)")
        if keys:
            self.write_journal(keys, OverwritePlan())
        return uploads

    def batch_journal(self) -> BatchJournal | None:
        """The batch's journal, or None if it has none (it never reached its log entry, or it was cleaned up)."""
        try:
            data = self.store.objects.get_object(self.dest.bucket, self.layout.batch_journal_key)
        except NotFoundError:
            return None
        return BatchJournal.from_json(data, source=f"s3://{self.dest.bucket}/{self.layout.batch_journal_key}")

    def finish(self, keys: Sequence[str] | None = None) -> int:
        """After the commit point (the sink's log has the batch): COMPLETED then CLEANED; only CLEANED where the
        clean-up had begun (no journal, or pendingsets already deleted). ``keys``: the batch's pendingsets (None:
        from its journal). Idempotent. Returns how many uploads were completed.

        Raises:
            SinkRecoveryError: an upload could not be completed; the journal is kept, so that the next settling of
                the sink finishes the batch.
        """
        if keys is None:
            journal = self.batch_journal()
            left = set(pendingset_keys_under(self.store, self.dest.bucket, self.layout.job_attempt_dir))
            if journal is None or not set(journal.pendingsets) <= left:
                # The clean-up had begun (it deletes the pendingsets, then the journal, and only once every upload is
                # complete): what is left is clean-up; the batch's files are complete objects, no longer uploads.
                self._clean_up_quietly()
                return 0
            keys = journal.pendingsets
        if keys:
            with self._pool() as pool:
                try:
                    self.complete_all(pool, keys)
                    self.end_limit_watch()
                except Exception as err:
                    self.end_limit_watch()
                    raise SinkRecoveryError(
                        f"batch {_batch_of(self.job_id)} of the sink {self.dest} is committed in its log, but "
                        f"completing its files failed ({err}); the journal of job {self.job_id} is kept and "
                        "the next run of the query (or a read of the sink through s3commit) completes them"
                    ) from err
            self._clean_up_quietly()
        return self.stats.completed

    def _clean_up_quietly(self) -> None:
        try:
            self.cleanup()
        except S3CommitError as err:
            log.warning("batch job %s committed; its clean-up failed (the next run finishes it): %s", self.job_id, err)

    def _pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(self.options.pool_size, thread_name_prefix=f"s3commit-{self.job_id[:12]}")


def _batch_of(job_id: str) -> int:
    """The batch id in a streaming batch job's id (``b<batch>-<uuid>``)."""
    return int(job_id[1:].split("-", 1)[0])


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)
