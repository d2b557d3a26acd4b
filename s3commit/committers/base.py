"""The committer lifecycle shared by every committer: job and task setup, commit and abort.

A committer decides *when* things happen (Hadoop's ``OutputCommitter`` contract); the operations module and
the job commit engine decide *how*. Subclasses supply the task side (where task output goes and how a task
commit turns it into a pendingset) and may adjust the job side (conflict checks, overwrite plans).
"""

from __future__ import annotations

import logging
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from s3commit.commit.lease import CommitLease, NoLease
from s3commit.commit.liveness import JobLiveness, confirm_alive
from s3commit.commit.manifest_store import pendingset_keys_under
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.ownership import claim, claim_output, one_operation, release_output
from s3commit.commit.process_state import THIS_PROCESS, ProcessState
from s3commit.commit.recovery_result import AlreadyCommittedError
from s3commit.commit.session import CommitRequest, CommitSession, JobIdentity
from s3commit.commit.snapshots import LogState, SnapshotLog
from s3commit.commit.summary_reports import failed
from s3commit.committers.attempt import TaskAttempt
from s3commit.config.options import CommitterOptions, LeaseMode
from s3commit.errors import CommitStateError, ConfigError, JobSweptError
from s3commit.model.manifests import SuccessData
from s3commit.model.paths import MAGIC_PATH_PREFIX, JobLayout, TaskAttemptId, check_job_id
from s3commit.model.task_message import TaskCommitMessage, carried_pendingsets
from s3commit.model.uri import S3Uri
from s3commit.store.capabilities import Capabilities, Outcome
from s3commit.store.capability_cache import known
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import quiet_collector

log = logging.getLogger(__name__)


class Committer(ABC):
    """Base of every committer.

    Args:
        dest: ``s3://bucket/path`` (or ``s3a://``).
        job_id: the job's unique id (a UUID by default); every scratch path and orphan sweep uses it.
        store: the S3 store (default: boto3's standard resolution).
        options: committer options.
    """

    name = "base"
    scratch_prefix = MAGIC_PATH_PREFIX

    def __init__(self, dest: str | S3Uri, *, job_id: str | None = None, store: S3Store | None = None,
                 options: CommitterOptions | None = None, job_id_source: str | None = None,
                 process: ProcessState | None = None) -> None:
        self.dest = dest if isinstance(dest, S3Uri) else S3Uri.parse(dest)
        #: What this process keeps across jobs (its task attempts, the liveness records it keeps fresh): the process's
        #: own unless the caller (the sidecar, a test of several processes) hands another. Not pickled: a committer
        #: sent to another process takes that process's own there.
        self.process = process if process is not None else THIS_PROCESS
        self.job_id = check_job_id(job_id or str(uuid.uuid4()))
        self.job_id_source = job_id_source or ("caller" if job_id else "generated")
        self.store = store or S3Store()
        self.options = options or CommitterOptions()
        self.layout = JobLayout(self.dest.key, self.job_id, dir_prefix=self.scratch_prefix)
        #: This run of the job (pickled with it): its owner record says so (:func:`s3commit.commit.ownership.claim`).
        self.run_token = uuid.uuid4().hex
        #: The job claimed its destination as new (an RDD write): the claim goes with the job's end.
        self.exclusive = False
        #: Whether the destination kept a snapshot log at the job's setup (pickled with the committer to its tasks);
        #: None: not known here (a sidecar's committer of one task call), read at task commit.
        self.snapshot_dest: bool | None = None
        #: The job's liveness record is renewed while this object lives (the Python API); False: until the job's
        #: commit or abort in this process, whatever object runs it (a sidecar builds one committer per call).
        self.liveness_with_object = True
        self._state = "new"
        self._lock = threading.Lock()
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._lease_ahead: CommitLease | NoLease | None = None
        """The commit lease :meth:`take_lease_ahead` began to take, until the commit's session takes it over."""
        self._log_ahead: Future[tuple[LogState, Future[bytes | None]]] | None = None
        """The snapshot log's early read :meth:`take_lease_ahead` began beside the lease's taking."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dest={str(self.dest)!r}, job_id={self.job_id!r})"

    # --- shared resources -----------------------------------------------------------------------

    def _lazy_pool(self, kind: str) -> ThreadPoolExecutor:
        with self._lock:
            pool = self._pools.get(kind)
            if pool is None:
                pool = self._pools[kind] = ThreadPoolExecutor(
                    self.options.pool_size, thread_name_prefix=f"s3commit-{kind}-{self.job_id[:8]}")
            return pool

    @property
    def pool(self) -> ThreadPoolExecutor:
        """Threads for whole files and manifest loads in this process (created on first use)."""
        return self._lazy_pool("files")

    @property
    def part_pool(self) -> ThreadPoolExecutor:
        """Threads for the parts of one file, separate from :attr:`pool` (whose tasks wait on parts)."""
        return self._lazy_pool("parts")

    def close(self) -> None:
        """Release this committer's threads (no S3 calls)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=True)

    def _check_job_open(self) -> None:
        if self._state in ("committed", "aborted"):
            raise CommitStateError(f"job {self.job_id} is already {self._state}")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pools"] = {}
        del state["_lock"]
        del state["process"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self.process = THIS_PROCESS

    # --- job side -------------------------------------------------------------------------------

    def setup_job(self, *, exclusive: bool = False) -> None:
        """Check the destination can be written (bucket exists, what the store honours, conflict mode) and claim
        the job id there (its owner record, in the job's own scratch directory: a second live job with this id on
        this destination is refused). Nothing the destination's readers see changes: a job that fails or never
        commits leaves it as it was, ``_SUCCESS`` included.

        ``exclusive``: the output must not exist, and no other job may start writing it until this one ends (an
        RDD write's promise, ``FileOutputFormat``'s): claimed with ``If-None-Match`` where the store honours it.

        Raises:
            ConfigError: the job id is taken on this destination; the store cannot do what was asked of it.
            CommitConflictError: ``exclusive`` and another job is writing the destination.
        """
        self.store.head_bucket(self.dest.bucket)
        found = self.know_store()
        self._check_store(found)
        self._check_job_conflicts()
        conditional = found is not None and found.conditional_writes
        if exclusive:
            claim_output(self.store, self.dest, self.job_id, conditional=conditional)
            self.exclusive = True
        with ThreadPoolExecutor(2, thread_name_prefix=f"s3commit-setup-{self.job_id[:8]}") as beside:
            # Read beside the job's claim, for its commit (this process's SeenObjects keeps them): a snapshot
            # destination's settings and latest entry (the commit's listing of the log then finds them known, by
            # ETag, and reads neither: it builds the next snapshot without a GET), and the commit lease where it is
            # free (the commit then takes it with one conditional PUT).
            settings = beside.submit(SnapshotLog(self.store, self.dest, seen=self.process.seen).read_ahead) \
                if self.options.complete_at_task_commit else None
            lease = self.commit_lease("commit", warn=False)  # (named at the commit, where it is taken or not)
            if isinstance(lease, CommitLease):
                beside.submit(lease.remember)
            record, etag = claim(self.store, self.dest, self.layout, self.job_id, self.run_token,
                                 conditional=conditional, liveness=self.options.job_liveness)
            if settings is not None:
                self.snapshot_dest = settings.result() is not None
        # From here until the job commits or aborts, this process says the job is alive (s3commit.commit.liveness).
        keeper = JobLiveness(self.store, self.dest, self.layout, record, etag, conditional=conditional,
                             clock=self.process.clock)
        self.process.keepers.keep(keeper, owner=self if self.liveness_with_object else None)
        self._state = "setup"

    def know_store(self) -> Capabilities | None:
        """What the destination's store honours: probed once per endpoint and bucket, then cached
        (:mod:`s3commit.store.capability_cache`); the store's decisions (the ETag check) follow it from then on."""
        return known(self.store, self.dest.bucket, prefix=self.dest.prefix)

    def _check_store(self, found: Capabilities | None) -> None:
        """Once per job: refuse what the user asked for explicitly and the store cannot do; name what is lost."""
        if found is None:
            return
        if self.store.options.verify_etag and found.outcome("part-etag-md5") is Outcome.NO:
            raise ConfigError(
                f"s3commit.checksum.verify-etag is true, but the store at {found.endpoint} gives parts ETags that are "
                f"not the MD5 of their bytes ({found.findings['part-etag-md5'].detail}): every part would fail the "
                "check. Set it to auto (the store's checksum validation decides) or false")
        if self.options.lease is LeaseMode.ON:
            self.commit_lease("commit")  # refused now, before any task runs, where the store cannot hold one
        # The lease is named at commit time (lease_for), where it is taken or not; so is the sweep (once).
        sent = self.store.uploads.checksum_algorithm(self.dest.bucket, object_checked=self.options.validate_output)
        # (fail-if-exists is named by the commit that asks for it: CommitEngine.complete_all)
        lost = [f for f in found.lost_features(sent)
                if "commit lease" not in f and "dead jobs" not in f and "fail-if-exists" not in f]
        if lost:
            log.warning("job %s: the store at %s (bucket %s) does not honour what s3commit needs for: %s. Run "
                        "`s3commit doctor %s` for details", self.job_id, found.endpoint, found.bucket,
                        "; ".join(lost), self.dest)

    def completes_at_task_commit(self) -> bool:
        """Whether task commits complete their uploads (``s3commit.snapshot.complete-at-task-commit``): only on a
        snapshot destination (as the job's setup found it, else as read now) whose store honours If-None-Match on
        Complete, so that no file a reader of the log may read is replaced under it. A destination enabled after
        the job's setup gets pending uploads, disabled after it completed ones: the job commit takes both
        (:meth:`~s3commit.commit.engine.CommitEngine.check_completed_at_task_commit`)."""
        if not self.options.complete_at_task_commit:
            return False
        if self.snapshot_dest is None:
            self.snapshot_dest = self.process.snapshot_destination(
                str(self.dest), self.job_id, SnapshotLog(self.store, self.dest).enabled)
        if not self.snapshot_dest:
            return False
        found = self.know_store()
        return found is not None and found.conditional_complete

    def session(self) -> CommitSession:
        """A commit session for one commit or abort of this job (:mod:`s3commit.commit.session`)."""
        return CommitSession(JobIdentity(self.store, self.dest, self.layout, self.job_id, self.name,
                                         self.job_id_source, self.options, self.process))

    def commit_lease(self, operation: str, *, warn: bool = True) -> CommitLease | NoLease:
        """The destination's commit lease for one of this job's operations (not taken yet: see
        :mod:`s3commit.commit.lease`); a dead holder of another job that it takes over is settled first. ``warn``:
        say where the store cannot hold one."""
        self.know_store()  # whether the store can hold one (cached)
        return self.session().job.lease(operation, warn=warn)

    def creates_only(self) -> bool:
        """Whether the job's files must not replace existing objects (staging ``fail``)."""
        return False

    def _check_job_conflicts(self) -> None:
        """Job-level conflict checks (staging ``directory`` + ``fail``)."""

    def job_overwrite_plan(self) -> OverwritePlan:
        """Deletions the committer itself adds (staging ``replace``)."""
        return OverwritePlan()

    def commit_job(self, messages: Sequence[TaskCommitMessage] | None = None, *,
                   delete_paths: Sequence[str] = (), replace_partitions: bool = False,
                   create_only: bool = False) -> SuccessData:
        """Complete every committed task's uploads, apply the overwrite plan, write ``_SUCCESS``
        (:meth:`_commit_job`), one operation of the job at a time (:func:`s3commit.commit.ownership.one_operation`)."""
        # The commit makes many objects at once (a pendingset entry a file, from the messages or read): the
        # collector's full passes, each a scan of the whole heap, are held off meanwhile (quiet_collector).
        with one_operation(self.dest, self.job_id, "its commit"), quiet_collector():
            try:
                self._confirm_alive()
                success = self._commit_job(messages, delete_paths=delete_paths,
                                           replace_partitions=replace_partitions, create_only=create_only)
            finally:
                self.drop_lease_ahead()
                self.process.keepers.release(self.dest, self.job_id)
                self.process.preloads.forget(self.dest, self.job_id)  # (taken already where the commit began)
            if self.exclusive:
                release_output(self.store, self.dest, self.job_id)
            return success

    def task_committed(self, message: TaskCommitMessage) -> bool:
        """Tell the job, on its driver, that a task committed, as each does (Spark's ``onTaskCommit``; a Python
        driver as each task's message arrives): its pendingset is read from now on, off the job commit's path, and
        the commit validates it as it validates what it reads (:mod:`s3commit.commit.preload`; up to
        :data:`~s3commit.commit.preload.PRELOAD_FILES` files a job). Optional: a job commit reads what it was not
        told of. Returns whether the read was begun.

        Raises:
            ConfigError: ``message`` is not of this job.
        """
        if not isinstance(message, TaskCommitMessage) or message.job_id != self.job_id:
            raise ConfigError(f"task_committed expects a TaskCommitMessage of job {self.job_id}, got "
                              f"{getattr(message, 'job_id', type(message).__name__)}")
        return self.process.preloads.add(self.store, self.dest, message)

    def take_lease_ahead(self) -> None:
        """Begin taking the destination's commit lease for this job's commit now, on a thread of its own
        (:meth:`~s3commit.commit.lease.CommitLease.acquire_ahead`): what comes before the commit needs it (reading
        the tasks' messages, checking the job is alive) runs beside its requests. :meth:`commit_job` takes it over
        (its session releases it); :meth:`drop_lease_ahead` releases it where no commit follows. The destination's
        snapshot log, which the commit reads early (before the lease is taken: see the engine), is read from here
        too, once the lease has noted what it remembers. Idempotent."""
        if self._lease_ahead is None and self._state not in ("committed", "aborted"):
            self._lease_ahead = self.commit_lease("commit")
            if isinstance(self._lease_ahead, CommitLease):
                self._lease_ahead.acquire_ahead()
                self._log_ahead = SnapshotLog(self.store, self.dest, seen=self.process.seen).state_ahead()

    def drop_lease_ahead(self) -> None:
        """Release the lease :meth:`take_lease_ahead` began to take, unless a commit's session took it over (it
        releases it). Never raises."""
        lease, self._lease_ahead, self._log_ahead = self._lease_ahead, None, None
        if lease is not None:
            lease.release()

    def _confirm_alive(self) -> None:
        """Before the commit: the job's liveness record is still its own (it was not judged dead and swept). A swept
        job aborts what is left of it (uploads its tasks started after the sweep) and fails, naming why."""
        try:
            confirm_alive(self.store, self.dest, self.layout, self.job_id, self.process.keepers)
        except JobSweptError:
            self.drop_lease_ahead()  # its abort may take the lease itself
            self._state = "aborted"
            try:
                self._abort_job(quiet=True)
            except Exception as err:  # never hide why the job cannot commit
                log.warning("job %s: cleaning up after its sweep failed: %s", self.job_id, err)
            raise

    def _commit_job(self, messages: Sequence[TaskCommitMessage] | None = None, *,
                    delete_paths: Sequence[str] = (), replace_partitions: bool = False,
                    create_only: bool = False) -> SuccessData:
        """Complete every committed task's uploads, apply the overwrite plan, write ``_SUCCESS``.

        Args:
            messages: the committed tasks' messages; ``None`` reads every pendingset in the job directory.
            delete_paths: prefixes (relative to the destination; ``""`` for all of it), or ``s3://`` locations
                in the destination's bucket (a custom partition location outside it), whose old objects are
                deleted after the new ones are complete; the keys just committed are kept.
            replace_partitions: replace each partition directory the job wrote (dynamic overwrite).
            create_only: no file may replace an object (``mode="error"``): each is completed with
                ``If-None-Match: *`` where the store honours it, and one that appeared meanwhile fails the job.

        The commit holds the destination's commit lease (:mod:`s3commit.commit.lease`) from its journal to its clean-up
        (released beside the journal's DELETE, its last request): commits of concurrent jobs to the destination wait
        for each other, so none deletes another's files.

        A commit of this job that was interrupted (its process died after it wrote its journal: some uploads
        may be complete, the overwrite applied, ``_SUCCESS`` written, the clean-up begun) is finished instead,
        from its journal, as ``s3commit recover`` would: the same messages commit exactly once. A job that
        committed already (``_SUCCESS`` names it) returns that ``_SUCCESS``.

        Raises:
            JobCommitError: a completion failed; every upload was aborted or reverted.
            ManifestError: a pendingset is corrupt, foreign, or points outside the destination.
            ConfigError: a ``delete_paths`` location is in another bucket (raised before anything changes).
            CommitStateError: the job was already committed or aborted (in this object), or its journal
                records another commit of it (``JournalExistsError``).
        """
        if self._state in ("committed", "aborted"):
            raise CommitStateError(f"job {self.job_id} is already {self._state}; a job commits once")
        self.know_store()
        self._end_task_attempts()
        keys = self._pendingset_keys(messages)
        preloaded = self.process.preloads.take(self.dest, self.job_id, keys) if messages is not None else {}
        committer_plan = self.job_overwrite_plan()
        request = CommitRequest(
            pendingsets=keys, listed=messages is None, files=sum(m.files for m in messages or () if m is not None),
            plan=OverwritePlan.of(self.dest, [*delete_paths, *committer_plan.delete_paths],
                                  replace_partitions=replace_partitions or committer_plan.replace_partitions),
            absolute_dirs=sorted({d for m in messages or () if m is not None for d in m.absolute_dirs}),
            create_only=create_only or self.creates_only(), known=carried_pendingsets(messages or (), self.dest.bucket),
            preloaded=preloaded, log_ahead=self._log_ahead)
        session = self.session()
        lease, self._lease_ahead, self._log_ahead = self._lease_ahead, None, None  # the session's: it releases it
        try:
            success = session.commit(request, on_abort=lambda lease: self._abort_job(quiet=True, lease=lease),
                                     lease=lease)
        except Exception:
            self._state = "aborted"
            raise
        finally:
            self.close()
        self._state = "committed"
        self.last_commit_stats = session.stats
        return success

    def _pendingset_keys(self, messages: Sequence[TaskCommitMessage] | None) -> dict[str, set[str]]:
        """The pendingsets to commit, each with the task attempts the caller accepted for it (empty: any)."""
        if messages is None:
            return {k: set() for k in pendingset_keys_under(self.store, self.dest.bucket, self.layout.job_attempt_dir)}
        keys: dict[str, set[str]] = {}
        for message in messages:
            if message is None:
                continue
            if not isinstance(message, TaskCommitMessage):
                raise ConfigError(f"commit_job expects TaskCommitMessage objects, got {type(message).__name__}")
            if message.job_id != self.job_id:
                raise ConfigError(f"task commit message of job {message.job_id} given to job {self.job_id}")
            if message.pendingset_key is not None:
                # Attempts of one task share one pendingset (the last to commit wins): read it once.
                keys.setdefault(message.pendingset_key, set()).add(message.task_attempt_id)
        return keys

    def abort_job(self) -> None:
        """Abort every upload of this job and delete its scratch data. Idempotent, best effort per step.

        If a commit of the job was interrupted (its journal is there), it is rolled back as ``s3commit recover
        --abort`` does: completed uploads deleted, the others aborted, so nothing of the job stays visible.

        Raises:
            AlreadyCommittedError: the job has in fact committed (``_SUCCESS`` names it, or its clean-up had
                begun): its output is left in place and its clean-up finished; nothing was rolled back.
            RecoveryError: the interrupted commit cannot be rolled back without losing data (every upload is
                complete and its overwrite may have begun), or S3 refused part of the roll-back; the journal
                is kept for ``s3commit recover``.
        """
        reported = self._state == "aborted"  # a failed commit reported already
        try:
            with one_operation(self.dest, self.job_id, "its abort"):  # a commit running here ends first
                self.process.keepers.release(self.dest, self.job_id)
                self.process.preloads.forget(self.dest, self.job_id)
                self._abort_job(quiet=False)
                if self.exclusive:
                    release_output(self.store, self.dest, self.job_id)
        finally:
            self._state = "aborted"
            if not reported:
                job = self.session().job
                job.report(failed(job.unfinished(),
                                  RuntimeError("the job was aborted before its commit (a task or the job failed)")))

    def _abort_job(self, *, quiet: bool, lease: CommitLease | NoLease | None = None) -> None:
        try:
            self.know_store()  # whether the store keeps the job's records of a commit (its lease): cached
            self._end_task_attempts()
            try:
                self.session().abort(lease=lease)
            except AlreadyCommittedError:
                self._abort_local_state()
                raise
            self._abort_local_state()
        finally:
            self.close()

    def _abort_local_state(self) -> None:
        """Drop local state (staging directories)."""

    def _end_task_attempts(self) -> None:
        """Before the job commits or aborts: settle and close its task attempts still running in this process,
        so that nothing of theirs lands after the job's sweep of orphan uploads."""

    # --- task side ------------------------------------------------------------------------------

    def setup_task(self, task_attempt_id: str) -> TaskAttempt:
        """Prepare a task attempt (``attempt_<jt>_<job>_m_<task>_<n>``).

        Raises:
            CommitStateError: this committer generated its job id and :meth:`setup_job` never ran on it (or on the
                object it was copied from): its tasks would write for a job no driver will commit (Hadoop's
                ``E_SELF_GENERATED_JOB_UUID``). Nothing was written.
        """
        if self.job_id_source == "generated" and self._state == "new":
            raise CommitStateError(
                f"task attempt {task_attempt_id}: this committer generated its own job id ({self.job_id}) and its job "
                "was never set up, so no driver would commit what the task writes. Call setup_job() first (and give "
                "the tasks that committer, or a copy of it), or pass the job's id as job_id=")
        return self._setup_task(task_attempt_id)

    @abstractmethod
    def _setup_task(self, task_attempt_id: str) -> TaskAttempt:
        """The committer's own task setup (:meth:`setup_task` checked the job first)."""

    def attach_task(self, task_attempt_id: str) -> TaskAttempt:
        """The attempt :meth:`setup_task` prepared, possibly in another process on this host, rebuilt
        without side effects (its output is kept). A committer with no local task state just sets it up."""
        return self.setup_task(task_attempt_id)

    @abstractmethod
    def commit_task(self, attempt: TaskAttempt) -> TaskCommitMessage:
        """Make the attempt's output part of the job (not yet visible); returns the message for the driver."""

    @abstractmethod
    def abort_task(self, attempt: TaskAttempt) -> None:
        """Discard the attempt's output. Idempotent."""

    def needs_task_commit(self, attempt: TaskAttempt) -> bool:
        return True

    def new_task_attempt_id(self, task: int, attempt: int = 0) -> str:
        """A Hadoop-style attempt id for plain Python callers: ``attempt_s3commit_0000_m_<task>_<n>``."""
        return str(TaskAttemptId.of(task, attempt))
