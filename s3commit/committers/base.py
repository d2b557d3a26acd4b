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
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from s3commit.capabilities import Capabilities, Outcome
from s3commit.committers.attempt import TaskAttempt, TaskCommitMessage
from s3commit.config import CommitterOptions, LeaseMode
from s3commit.errors import (
    CommitStateError,
    ConfigError,
    JobCommitError,
    JournalExistsError,
    LeaseLostError,
    ManifestError,
    NotFoundError,
    PendingsetMissingError,
    S3CommitError,
)
from s3commit.job_uploads import JobUploads
from s3commit.jobcommit import JobCommit
from s3commit.known_stores import known
from s3commit.lease import CommitLease, NoLease, committed_here, lease_for
from s3commit.manifest import SuccessData
from s3commit.manifest_io import pendingset_keys_under
from s3commit.overwrite import OverwritePlan
from s3commit.ownership import claim, claim_output, one_operation, release_output
from s3commit.paths import MAGIC_PATH_PREFIX, JobLayout, TaskAttemptId, check_job_id
from s3commit.prefixes import delete_prefix
from s3commit.reports import failed, write_report
from s3commit.store import S3Store
from s3commit.uri import S3Uri

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
                 options: CommitterOptions | None = None, job_id_source: str | None = None) -> None:
        self.dest = dest if isinstance(dest, S3Uri) else S3Uri.parse(dest)
        self.job_id = check_job_id(job_id or str(uuid.uuid4()))
        self.job_id_source = job_id_source or ("caller" if job_id else "generated")
        self.store = store or S3Store()
        self.options = options or CommitterOptions()
        self.layout = JobLayout(self.dest.key, self.job_id, dir_prefix=self.scratch_prefix)
        #: This run of the job (pickled with it): its owner record says so (:func:`s3commit.ownership.claim`).
        self.run_token = uuid.uuid4().hex
        #: The job claimed its destination as new (an RDD write): the claim goes with the job's end.
        self.exclusive = False
        self._state = "new"
        self._lock = threading.Lock()
        self._pools: dict[str, ThreadPoolExecutor] = {}

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
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

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
        claim(self.store, self.dest, self.layout, self.job_id, self.run_token, conditional=conditional)
        self._state = "setup"

    def know_store(self) -> Capabilities | None:
        """What the destination's store honours: probed once per endpoint and bucket, then cached
        (:mod:`s3commit.known_stores`); the store's decisions (the ETag check) follow it from then on."""
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
        # The lease is named at commit time (lease_for), where it is taken or not.
        lost = [f for f in found.lost_features(self.store.options.checksum_algorithm) if "commit lease" not in f]
        if lost:
            log.warning("job %s: the store at %s (bucket %s) does not honour what s3commit needs for: %s. Run "
                        "`s3commit doctor %s` for details", self.job_id, found.endpoint, found.bucket,
                        "; ".join(lost), self.dest)

    def commit_lease(self, operation: str) -> CommitLease | NoLease:
        """The destination's commit lease for one of this job's operations (not taken yet: see :mod:`s3commit.lease`);
        a dead holder of another job that it takes over is settled first (:func:`s3commit.recover.settle_interrupted`).
        """
        from s3commit.recover import settle_interrupted

        self.know_store()  # whether the store can hold one (cached)
        return lease_for(self.store, self.dest, self.job_id, self.options, operation=operation,
                         journal=f"s3://{self.dest.bucket}/{self.layout.journal_key}",
                         settle=lambda holder: settle_interrupted(self.store, self.dest, holder.job_id, self.options))

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
        (:meth:`_commit_job`), one operation of the job at a time (:func:`s3commit.ownership.one_operation`)."""
        with one_operation(self.dest, self.job_id, "its commit"):
            success = self._commit_job(messages, delete_paths=delete_paths, replace_partitions=replace_partitions,
                                       create_only=create_only)
            if self.exclusive:
                release_output(self.store, self.dest, self.job_id)
            return success

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

        The commit holds the destination's commit lease (:mod:`s3commit.lease`) from its journal to its clean-up:
        commits of concurrent jobs to the destination wait for each other, so none deletes another's files.

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
        absolute_dirs = sorted({d for m in messages or () if m is not None for d in m.absolute_dirs})
        committer_plan = self.job_overwrite_plan()
        plan = OverwritePlan.of(self.dest, [*delete_paths, *committer_plan.delete_paths],
                                replace_partitions=replace_partitions or committer_plan.replace_partitions)
        lease = self.commit_lease("commit")
        committed = False
        engine = JobCommit(self.store, dest=self.dest, layout=self.layout, job_id=self.job_id,
                           committer=self.name, options=self.options, job_id_source=self.job_id_source,
                           absolute_dirs=absolute_dirs, lease=lease, create_only=create_only or self.creates_only())
        try:
            done = self._committed_already(engine, None) if messages is None and not keys else None
            success = done or engine.run(list(keys), plan, accepted_attempts=keys)
            committed = True
        except (JournalExistsError, PendingsetMissingError) as err:
            # Nothing was changed yet (both are raised before the first Complete): an earlier commit of this
            # job was interrupted, or finished. Finish it from its journal, or confirm it from _SUCCESS.
            resumed = False
            try:
                lease.acquire()
                success = self._resume(engine, err, messages, keys, plan, absolute_dirs)
                resumed = True
            finally:
                lease.release(committed=resumed, files=engine.stats.files if resumed else -1)
                self.close()
            self._state = "committed"
            self._report(engine, None, success)
            return success
        except LeaseLostError as err:
            # Another job took the lease over and settles this commit from its journal: nothing is undone here.
            self._state = "aborted"
            self._report(engine, err)
            raise
        except JobCommitError as err:
            if err.not_rolled_back:
                # The roll-back was refused in part: keep the job directory (journal and pendingsets), the
                # record `s3commit recover --abort` needs to finish it.
                self._state = "aborted"
            else:
                self._abort_job_quietly(lease)
            self._report(engine, err)
            raise
        except Exception as err:
            self._abort_job_quietly(lease)
            self._report(engine, err)
            raise
        finally:
            lease.release(committed=committed, files=engine.stats.files)
            self.close()
        self._state = "committed"
        self.last_commit_stats = engine.stats
        self._report(engine, None, success)
        return success

    def _report(self, engine: JobCommit, error: BaseException | None, success: SuccessData | None = None) -> None:
        """The job's summary report (``summary_report_dir``), after a success or a failure."""
        if self.options.summary_report_dir:
            summary = success if success is not None else failed(engine.success_data(), error)  # type: ignore[arg-type]
            write_report(self.store, self.options.summary_report_dir, summary)

    def _resume(self, engine: JobCommit, err: CommitStateError, messages: Sequence[TaskCommitMessage] | None,
                keys: dict[str, set[str]], plan: OverwritePlan, absolute_dirs: Sequence[str]) -> SuccessData:
        from s3commit.recover import resume_commit

        success = resume_commit(self.store, self.dest, self.job_id, layout=self.layout, options=self.options,
                                pendingsets=set(keys), plan=plan, absolute_dirs=absolute_dirs,
                                listed=messages is None)
        if success is not None:
            log.info("job %s: finished the commit an earlier attempt had begun (its journal)", self.job_id)
            return success
        done = self._committed_already(engine, messages)
        if done is None:
            raise err
        return done

    def _committed_already(self, engine: JobCommit, messages: Sequence[TaskCommitMessage] | None
                           ) -> SuccessData | None:
        """The job's ``_SUCCESS`` data if it has committed while no journal is left (the commit and its clean-up
        finished, or it ran without a journal): ``_SUCCESS`` names it (and counts the files of ``messages``), or,
        whatever ``_SUCCESS`` says now, the destination's commit lease records it (then a ``_SUCCESS`` rebuilt from
        what is known). The clean-up is finished again, best effort."""
        try:
            success: SuccessData | None = SuccessData.from_json(
                self.store.get_object(self.dest.bucket, self.layout.success_key))
        except (NotFoundError, ManifestError):
            success = None
        files = sum(m.files for m in messages or () if m is not None)
        if success is None or success.job_id != self.job_id or (
                messages is not None and success.metrics.get("committer_files", files) != files):
            record = committed_here(self.store, self.dest, self.job_id)
            if record is None or (messages is not None and record.files not in (-1, files)):
                return None
            success = SuccessData(committer=self.name, job_id=self.job_id, job_id_source=self.job_id_source,
                                  description=f"s3commit job committer for {self.dest} (committed earlier: the "
                                              "destination's commit lease records it)",
                                  metrics={"committer_files": files})
        log.info("job %s has committed already", self.job_id)
        try:
            engine.cleanup(read_pendingsets=True)
        except S3CommitError as err:
            log.warning("job %s: committed, but its clean-up failed: %s", self.job_id, err)
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
                self._abort_job(quiet=False)
                if self.exclusive:
                    release_output(self.store, self.dest, self.job_id)
        finally:
            self._state = "aborted"
            if self.options.summary_report_dir and not reported:
                write_report(self.store, self.options.summary_report_dir, failed(
                    SuccessData(committer=self.name, job_id=self.job_id, job_id_source=self.job_id_source,
                                description=f"s3commit job committer for {self.dest}"),
                    RuntimeError("the job was aborted before its commit (a task or the job failed)")))

    def _abort_job_quietly(self, lease: CommitLease | NoLease | None = None) -> None:
        try:
            self._abort_job(quiet=True, lease=lease)
        except Exception as err:  # never hide the error that made us abort
            log.warning("abort of job %s after a failed commit was incomplete: %s", self.job_id, err)
        self._state = "aborted"

    def _abort_job(self, *, quiet: bool, lease: CommitLease | NoLease | None = None) -> None:
        from s3commit.recover import AlreadyCommittedError, roll_back_commit

        own: CommitLease | NoLease = NoLease()
        try:
            self.know_store()  # whether the store keeps the job's records of a commit (its lease): cached
            self._end_task_attempts()
            if (lease is None or not lease.held) and self._journal_exists():
                # A commit of this job began: roll it back under the destination's lease, so that a commit still
                # running (this job's or another's) ends first, and a dead one of this job is taken over.
                own = self.commit_lease("abort").acquire()
            try:
                # An interrupted commit (its journal is there) is undone as `s3commit recover --abort` does.
                rolled_back = roll_back_commit(self.store, self.dest, self.job_id, layout=self.layout,
                                               options=self.options) is not None
            except AlreadyCommittedError as err:
                self._finish_committed(err)
                self._abort_local_state()
                raise AlreadyCommittedError(
                    f"job {self.job_id} cannot be aborted: it has committed ({err}). Its output is left in "
                    "place and its clean-up was finished; nothing was rolled back") from err
            if not rolled_back and lease is None and committed_here(self.store, self.dest, self.job_id):
                # Its own record, whatever _SUCCESS says now (a commit this abort waited for, a re-sent abort).
                self._abort_local_state()
                raise AlreadyCommittedError(f"job {self.job_id} cannot be aborted: it has committed to {self.dest} "
                                            "(the destination's commit lease records it); its output is left in place")
            if not rolled_back:
                # The job's uploads, inside and outside the destination (records are read before pendingsets:
                # a task commit racing this abort writes its pendingset before it deletes its records).
                uploads = JobUploads(self.store, self.dest, self.job_id, layouts=(self.layout,))
                known = self.store.capabilities.get(self.dest.bucket)
                uploads.abort(uploads.read_records(), list_uploads=known is None or known.lists_uploads)
                delete_prefix(self.store, self.dest.bucket, f"{self.layout.job_dir}/")
            self._abort_local_state()
        finally:
            own.release()
            self.close()

    def _journal_exists(self) -> bool:
        try:
            self.store.head_object(self.dest.bucket, self.layout.journal_key)
        except NotFoundError:
            return False
        return True

    def _finish_committed(self, err: S3CommitError) -> None:
        """The job asked to abort has committed: leave its output, finish its clean-up, say so."""
        from s3commit.recover import resume_commit

        log.error("job %s cannot be aborted: %s. Its output is left in place; finishing its clean-up instead",
                  self.job_id, err)
        try:
            resume_commit(self.store, self.dest, self.job_id, layout=self.layout, options=self.options,
                          pendingsets=(), plan=OverwritePlan(), absolute_dirs=(), listed=True, check=False)
        except S3CommitError as cleanup_error:
            log.warning("job %s: the clean-up after its commit failed: %s", self.job_id, cleanup_error)

    def _abort_local_state(self) -> None:
        """Drop local state (staging directories)."""

    def _end_task_attempts(self) -> None:
        """Before the job commits or aborts: settle and close its task attempts still running in this process,
        so that nothing of theirs lands after the job's sweep of orphan uploads."""

    # --- task side ------------------------------------------------------------------------------

    @abstractmethod
    def setup_task(self, task_attempt_id: str) -> TaskAttempt:
        """Prepare a task attempt (``attempt_<jt>_<job>_m_<task>_<n>``)."""

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
