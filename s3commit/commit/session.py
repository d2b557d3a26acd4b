"""The commit session: one job's commit or abort, from the lease to the report (Hadoop's ``CommitContext``).

A committer decides *when* a job commits or aborts; the session owns everything *around* the engine
(:class:`~s3commit.commit.engine.CommitEngine`) that makes one commit or abort whole:

- the destination's commit lease (:mod:`s3commit.commit.lease`), taken by the engine while it validates, and a dead
  holder of another job settled before this one goes on (:func:`s3commit.commit.recovery.settle_interrupted`);
- the journal: a commit of this job that was interrupted is finished from it instead
  (:func:`~s3commit.commit.recovery.resume_commit`), and a job that committed already returns its ``_SUCCESS``;
- the roll-back: a failed commit aborts every upload of the job (or, where S3 refused part of the roll-back, keeps
  the journal for ``s3commit recover``); an abort rolls back an interrupted commit as ``recover --abort`` does;
- the summary report (``summary_report_dir``), after a success or a failure;
- the sweep of dead jobs under the destination (:mod:`s3commit.commit.sweep`) before the commit, counted in its
  ``_SUCCESS``.

The session makes no decision about task attempts or local files: the committer settles its attempts before it
opens a session and drops its local state after it (the ``on_abort`` it passes).

Structured Streaming's file-sink batches (:mod:`s3commit.committers.sink_batches`) run the same engine's steps
but not this session: their commit point is the batch's entry in the sink's log, which the JVM writes *between*
the engine's validation and its Completes, so no one call can hold the commit; the log (written with
``If-None-Match``) is what serializes batches instead of the lease, and the log, not a journal, decides whether an
interrupted batch is finished or rolled back (``recover_sink``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from s3commit.commit.engine import CommitEngine, CommitStats
from s3commit.commit.job_uploads import JobUploads
from s3commit.commit.lease import CommitLease, NoLease, committed_here, lease_for
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.prefixes import delete_prefix
from s3commit.commit.process_state import THIS_PROCESS, ProcessState
from s3commit.commit.recovery import resume_commit, roll_back_commit, settle_interrupted
from s3commit.commit.recovery_result import AlreadyCommittedError
from s3commit.commit.snapshots import LogState
from s3commit.commit.summary_reports import failed, write_report
from s3commit.commit.sweep import sweep_dead_jobs
from s3commit.config.options import CommitterOptions
from s3commit.errors import (
    CommitStateError,
    JobCommitError,
    JournalExistsError,
    LeaseLostError,
    ManifestError,
    NotFoundError,
    PendingsetMissingError,
    S3CommitError,
)
from s3commit.model.manifests import PendingSet, SuccessData
from s3commit.model.paths import JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class JobIdentity:
    """Who commits: the job, its destination and layout, the committer's name, and its options."""

    store: S3Store
    dest: S3Uri
    layout: JobLayout
    job_id: str
    committer: str
    job_id_source: str
    options: CommitterOptions = field(default_factory=CommitterOptions)
    process: ProcessState = THIS_PROCESS
    """What the job's process keeps across jobs (the warnings it said once, the clock its waits run on)."""

    def lease(self, operation: str, *, warn: bool = True) -> CommitLease | NoLease:
        """The destination's commit lease for one of this job's operations (not taken yet); a dead holder of
        another job that it takes over is settled first. ``warn``: say where the store cannot hold one."""
        return lease_for(self.store, self.dest, self.job_id, self.options, operation=operation, warn=warn,
                         journal=f"s3://{self.dest.bucket}/{self.layout.journal_key}",
                         settle=lambda holder: settle_interrupted(self.store, self.dest, holder.job_id, self.options),
                         clock=self.process.clock, seen=self.process.seen)

    def report(self, summary: SuccessData) -> None:
        if self.options.summary_report_dir:
            write_report(self.store, self.options.summary_report_dir, summary)

    def unfinished(self) -> SuccessData:
        return SuccessData(committer=self.committer, job_id=self.job_id, job_id_source=self.job_id_source,
                           description=f"s3commit job committer for {self.dest}")


@dataclass(frozen=True)
class CommitRequest:
    """What one job commit commits: the pendingsets (each with the task attempts accepted for it; empty: any),
    the messages they came from (``None``: the job directory was listed), the overwrite plan, the directories
    outside the destination the tasks wrote to, and whether no file may replace an object."""

    pendingsets: dict[str, set[str]]
    listed: bool
    files: int
    plan: OverwritePlan
    absolute_dirs: Sequence[str] = ()
    create_only: bool = False
    known: Mapping[str, PendingSet] = field(default_factory=dict)
    """Pendingsets the messages carried whole (:meth:`TaskCommitMessage.completed_pendingset`): not read."""
    preloaded: Mapping[str, PendingSet] = field(default_factory=dict)
    """Pendingsets read as their tasks committed (:mod:`s3commit.commit.preload`): not read again."""
    log_ahead: Future[tuple[LogState, Future[bytes | None]]] | None = None
    """The snapshot log's early read, begun with the lease's taking (:meth:`SnapshotLog.state_ahead`), if it was."""


class CommitSession:
    """One commit (:meth:`commit`) or abort (:meth:`abort`) of one job. Not reusable."""

    def __init__(self, job: JobIdentity) -> None:
        self.job = job
        self.stats = CommitStats()

    # --- commit --------------------------------------------------------------------------------------------

    def commit(self, request: CommitRequest, *, on_abort: Callable[[CommitLease | NoLease], None],
               lease: CommitLease | NoLease | None = None) -> SuccessData:
        """Commit the job under the destination's lease; finish an interrupted commit of it instead, or return the
        ``_SUCCESS`` of a commit that finished. On a failure ``on_abort(lease)`` aborts the job (unless S3 refused
        part of the roll-back: then the journal stays for ``s3commit recover``), the report is written, and the
        error is raised. ``lease``: the job's commit lease, its taking begun already (released here, as one made
        here is)."""
        job = self.job
        lease = lease if lease is not None else job.lease("commit")
        engine = CommitEngine(job.store, dest=job.dest, layout=job.layout, job_id=job.job_id, committer=job.committer,
                           options=job.options, job_id_source=job.job_id_source, absolute_dirs=request.absolute_dirs,
                           lease=lease, create_only=request.create_only, seen=job.process.seen)
        self.stats = engine.stats
        committed = False
        try:
            done = self._committed_already(engine, request) if request.listed and not request.pendingsets else None
            # The sweep of dead jobs runs beside the commit (it changes nothing of this job), done before _SUCCESS.
            success = done or engine.run(list(request.pendingsets), request.plan, accepted_attempts=request.pendingsets,
                                         beside=lambda: self._sweep_dead_jobs(engine), known=request.known,
                                         preloaded=request.preloaded,
                                         log_ahead=request.log_ahead)
            committed = True
        except (JournalExistsError, PendingsetMissingError) as err:
            # Nothing was changed yet (both are raised before the first Complete): an earlier commit of this
            # job was interrupted, or finished. Finish it from its journal, or confirm it from _SUCCESS.
            success = self._resume_under(lease, engine, err, request)
        except LeaseLostError as err:
            # Another job took the lease over and settles this commit from its journal: nothing is undone here.
            self._report_failure(engine, err)
            raise
        except JobCommitError as err:
            if not err.not_rolled_back:
                # Where the roll-back was refused in part, the job directory (journal and pendingsets) is kept: the
                # record `s3commit recover --abort` needs to finish it.
                self._abort_quietly(on_abort, lease)
            self._report_failure(engine, err)
            raise
        except Exception as err:
            self._abort_quietly(on_abort, lease)
            self._report_failure(engine, err)
            raise
        finally:
            lease.release(committed=committed, files=engine.stats.files)
        self.job.report(success)
        return success

    def _sweep_dead_jobs(self, engine: CommitEngine) -> None:
        """Sweep the dead jobs under the destination (:mod:`s3commit.commit.sweep`), counted in ``_SUCCESS``. Best
        effort: never fails the commit. Not on a store that ignores conditional writes (said once)."""
        job = self.job
        if not job.options.sweep_dead_jobs:
            return
        known = job.store.capabilities.get(job.dest.bucket)
        if known is None:
            return
        if not known.conditional_writes:
            job.process.say_once(log, ("no-sweep", known.endpoint, job.dest.bucket), logging.WARNING,
                      "the store at %s does not honour conditional writes: dead jobs under s3://%s are never swept "
                      "automatically (no record can be taken safely). Sweep them at your word: s3commit uploads "
                      "sweep s3://%s/<destination> --older-than AGE", known.endpoint, job.dest.bucket,
                      job.dest.bucket)
            return
        try:
            result = sweep_dead_jobs(job.store, job.dest, liveness=job.options.job_liveness, conditional=True,
                           lists_uploads=known.lists_uploads, exclude=(job.job_id,),
                           sweeper=f"job {job.job_id} (its commit)")
        except S3CommitError as err:
            log.warning("job %s: the sweep of dead jobs under %s failed (the commit goes on): %s", job.job_id,
                        job.dest, err)
            return
        engine.stats.dead_jobs_swept = len(result.swept)
        engine.stats.dead_job_uploads_aborted = result.uploads_aborted

    def _resume_under(self, lease: CommitLease | NoLease, engine: CommitEngine, err: CommitStateError,
                      request: CommitRequest) -> SuccessData:
        resumed = False
        try:
            lease.acquire()
            success = self._resume(engine, err, request)
            resumed = True
        finally:
            lease.release(committed=resumed, files=engine.stats.files if resumed else -1)
        return success

    def _resume(self, engine: CommitEngine, err: CommitStateError, request: CommitRequest) -> SuccessData:
        job = self.job
        success = resume_commit(job.store, job.dest, job.job_id, layout=job.layout, options=job.options,
                                pendingsets=set(request.pendingsets), plan=request.plan,
                                absolute_dirs=request.absolute_dirs, listed=request.listed)
        if success is not None:
            log.info("job %s: finished the commit an earlier attempt had begun (its journal)", job.job_id)
            return success
        done = self._committed_already(engine, request)
        if done is None:
            raise err
        return done

    def _committed_already(self, engine: CommitEngine, request: CommitRequest) -> SuccessData | None:
        """The job's ``_SUCCESS`` data if it has committed while no journal is left (the commit and its clean-up
        finished, or it ran without a journal): ``_SUCCESS`` names it (and counts the request's files), or,
        whatever ``_SUCCESS`` says now, the destination's commit lease records it (then a ``_SUCCESS`` rebuilt from
        what is known). The clean-up is finished again, best effort."""
        job = self.job
        try:
            success: SuccessData | None = SuccessData.from_json(
                job.store.objects.get_object(job.dest.bucket, job.layout.success_key))
        except (NotFoundError, ManifestError):
            success = None
        files, counted = request.files, not request.listed
        if success is None or success.job_id != job.job_id or (
                counted and success.metrics.get("committer_files", files) != files):
            record = committed_here(job.store, job.dest, job.job_id)
            if record is None or (counted and record.files not in (-1, files)):
                return None
            success = SuccessData(committer=job.committer, job_id=job.job_id, job_id_source=job.job_id_source,
                                  description=f"s3commit job committer for {job.dest} (committed earlier: the "
                                              "destination's commit lease records it)",
                                  metrics={"committer_files": files})
        log.info("job %s has committed already", job.job_id)
        try:
            engine.cleanup(read_pendingsets=True)
        except S3CommitError as err:
            log.warning("job %s: committed, but its clean-up failed: %s", job.job_id, err)
        return success

    def _abort_quietly(self, on_abort: Callable[[CommitLease | NoLease], None], lease: CommitLease | NoLease) -> None:
        try:
            on_abort(lease)
        except Exception as err:  # never hide the error that made us abort
            log.warning("abort of job %s after a failed commit was incomplete: %s", self.job.job_id, err)

    def _report_failure(self, engine: CommitEngine, error: BaseException) -> None:
        if self.job.options.summary_report_dir:
            self.job.report(failed(engine.success_data(), error))

    # --- abort ---------------------------------------------------------------------------------------------

    def abort(self, *, lease: CommitLease | NoLease | None = None) -> None:
        """Abort every upload of the job and delete its scratch data; an interrupted commit of it (its journal is
        there) is rolled back as ``s3commit recover --abort`` does, under the destination's lease (unless the
        failed commit that aborts holds it: ``lease``).

        Raises:
            AlreadyCommittedError: the job has committed; its output is left in place, its clean-up finished.
            RecoveryError: the interrupted commit cannot be rolled back (see :func:`roll_back_commit`).
        """
        job = self.job
        own: CommitLease | NoLease = NoLease()
        try:
            if (lease is None or not lease.held) and self._journal_exists():
                # A commit of this job began: roll it back under the destination's lease, so that a commit still
                # running (this job's or another's) ends first, and a dead one of this job is taken over.
                own = job.lease("abort").acquire()
            try:
                rolled_back = roll_back_commit(job.store, job.dest, job.job_id, layout=job.layout,
                                               options=job.options) is not None
            except AlreadyCommittedError as err:
                self._finish_committed(err)
                raise AlreadyCommittedError(
                    f"job {job.job_id} cannot be aborted: it has committed ({err}). Its output is left in "
                    "place and its clean-up was finished; nothing was rolled back") from err
            if not rolled_back and lease is None and committed_here(job.store, job.dest, job.job_id):
                # Its own record, whatever _SUCCESS says now (a commit this abort waited for, a re-sent abort).
                raise AlreadyCommittedError(f"job {job.job_id} cannot be aborted: it has committed to {job.dest} "
                                            "(the destination's commit lease records it); its output is left in place")
            if not rolled_back:
                # The job's uploads, inside and outside the destination (records are read before pendingsets:
                # a task commit racing this abort writes its pendingset before it deletes its records).
                uploads = JobUploads(job.store, job.dest, job.job_id, layouts=(job.layout,))
                known = job.store.capabilities.get(job.dest.bucket)
                records = uploads.read_records()
                uploads.abort(records, list_uploads=known is None or known.lists_uploads)
                uploads.delete_completed(records, threads=job.options.pool_size)  # completed at task commit
                delete_prefix(job.store, job.dest.bucket, f"{job.layout.job_dir}/")
        finally:
            own.release()

    def _journal_exists(self) -> bool:
        try:
            self.job.store.objects.head_object(self.job.dest.bucket, self.job.layout.journal_key)
        except NotFoundError:
            return False
        return True

    def _finish_committed(self, err: S3CommitError) -> None:
        """The job asked to abort has committed: leave its output, finish its clean-up, say so."""
        job = self.job
        log.error("job %s cannot be aborted: %s. Its output is left in place; finishing its clean-up instead",
                  job.job_id, err)
        try:
            resume_commit(job.store, job.dest, job.job_id, layout=job.layout, options=job.options,
                          pendingsets=(), plan=OverwritePlan(), absolute_dirs=(), listed=True, check=False)
        except S3CommitError as cleanup_error:
            log.warning("job %s: the clean-up after its commit failed: %s", job.job_id, cleanup_error)

