"""Recovery of an interrupted job commit: finish it, or roll it back (``s3commit recover``).

Before its first Complete, the job commit engine (:mod:`s3commit.commit.job_commit`) writes a *commit journal*
(``CommitJournal``) into the job directory with ``If-None-Match: *``; it deletes the journal last, after
``_SUCCESS`` and the rest of the clean-up. So a journal found later means a commit started and did not
finish: its process died, lost its network, or was killed. :func:`recover` reads it and either

- **finishes** the commit (the default): completes every upload that is left (completion is idempotent:
  an upload already completed with the same content counts as done), applies the overwrite plan after
  completion, writes ``_SUCCESS``, aborts this job's orphan uploads and deletes the job directory; if
  ``_SUCCESS`` already names the job, or clean-up had begun, only the clean-up is finished; if an upload
  cannot be completed any more (aborted meanwhile, expired), everything is rolled back, exactly as a failed
  job commit is; or
- **rolls it back** (``abort=True``): aborts every upload not completed, deletes every completed one,
  deletes the job directory and this job's orphans. It refuses when rolling back would lose data: once
  ``_SUCCESS`` names the job, once clean-up has begun, or when every upload is complete and an overwrite
  plan may already have deleted the old data.

Without a journal the commit never started: forward recovery has nothing to do (and says why); roll-back
aborts the job (every upload :mod:`s3commit.commit.job_uploads` finds for it, custom partition locations outside
the destination included) and deletes its directory. Every outcome is idempotent: a second run changes
nothing and says so.

Only run this once the job's driver is gone: a commit still running and a recovery would race. The steps
are the engine's own (:class:`~s3commit.commit.job_commit.JobCommit`); this module only decides which to run. A
committer whose own commit was interrupted (its process died, and the job is committed again, or aborted)
runs the same recovery through :func:`resume_commit` and :func:`roll_back_commit`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from s3commit.commit.job_commit import JobCommit
from s3commit.commit.job_uploads import JobUploads
from s3commit.commit.lease import lease_for
from s3commit.commit.manifest_store import pendingset_keys_under
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.ownership import one_operation
from s3commit.commit.prefixes import delete_prefix
from s3commit.commit.recovery_result import AlreadyCommittedError, RecoveryAction, RecoveryError, RecoveryReport
from s3commit.config.options import CommitterOptions
from s3commit.errors import (
    JobCommitError,
    JournalExistsError,
    ManifestError,
    NotFoundError,
    S3CommitError,
)
from s3commit.model.manifests import CommitJournal, SuccessData
from s3commit.model.paths import MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX, JobLayout, check_job_id
from s3commit.model.uri import S3Uri
from s3commit.store.capability_cache import known
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

RECOVERED_DIAGNOSTIC = "s3commit.recovered"
"""``_SUCCESS`` diagnostics key set to ``"true"`` when the commit was finished by :func:`recover`."""


class _RecoveryCommit(JobCommit):
    """The engine, marking ``_SUCCESS`` as written by a recovery."""

    finisher = "s3commit recover"

    def success_data(self) -> SuccessData:
        data = super().success_data()
        return replace(data, description=f"{data.description} (finished by {self.finisher})",
                       diagnostics={**data.diagnostics, RECOVERED_DIAGNOSTIC: "true"})


def recover(
    store: S3Store,
    dest: str | S3Uri,
    job_id: str,
    *,
    abort: bool = False,
    force: bool = False,
    options: CommitterOptions | None = None,
) -> RecoveryReport:
    """Finish (default) or roll back (``abort=True``) the interrupted commit of job ``job_id`` to ``dest``.

    Args:
        store: the S3 store.
        dest: the job's destination, ``s3://bucket/path``.
        job_id: the job's id (the UUID in ``__magic_job-<id>`` / ``__staging_job-<id>``).
        abort: roll back instead of finishing.
        force: roll back even when every upload is complete and an overwrite plan may have begun deleting
            the old data (the old data may then be partly gone as well as the new).
        options: threads and rate limit for the completions (default :class:`CommitterOptions`).

    Returns:
        What was done; ``report.changed`` is False when there was nothing to do.

    Raises:
        ManifestError: the journal or a pendingset is corrupt, foreign, or points outside ``dest``
            (nothing was completed or deleted).
        RecoveryError: roll-back refused because it would lose data, or a roll-back left uploads behind.
        JobCommitError: forward recovery could not complete an upload; the commit was rolled back.
        StoreError: S3 failed (after retries); run recovery again.
    """
    target = dest if isinstance(dest, S3Uri) else S3Uri.parse(dest)
    check_job_id(job_id)
    options = options or CommitterOptions()
    store.head_bucket(target.bucket)
    known(store, target.bucket, prefix=target.prefix)
    _refuse_stream_batch(store, target, job_id)
    with one_operation(target, job_id, "recover"):  # a commit or abort of the job in this process ends first
        return _recover(store, target, job_id, abort=abort, force=force, options=options)


def _recover(store: S3Store, target: S3Uri, job_id: str, *, abort: bool, force: bool,
             options: CommitterOptions) -> RecoveryReport:
    # Under the destination's commit lease: a live commit (of this job or another) in another process ends first.
    lease = lease_for(store, target, job_id, options, operation="recover-abort" if abort else "recover",
                      settle=lambda holder: settle_interrupted(store, target, holder.job_id, options)).acquire()
    report = None
    try:
        recovery = _open(store, target, job_id, _layouts(target, job_id), options)
        if recovery is None:
            report = _abort_uncommitted(store, target, job_id) if abort else _explain_no_journal(store, target, job_id)
        else:
            report = recovery.roll_back(force=force) if abort else recovery.finish()
        return report
    finally:
        lease.release(committed=report is not None and report.action in (RecoveryAction.FINISHED,
                                                                          RecoveryAction.CLEANED_UP))


def settle_interrupted(store: S3Store, dest: S3Uri, job_id: str, options: CommitterOptions) -> bool:
    """Settle the interrupted commit of job ``job_id``, whose holder of ``dest``'s commit lease died, as ``s3commit
    recover`` decides (finished; rolled back where it can no longer be), under the lease the caller now holds.
    True if the job ends committed (its lease then records it so); False when it was rolled back, or left no
    journal (it died before its first Complete, or after its clean-up), or is a streaming batch (its sink's log
    decides it).

    Raises:
        RecoveryError: it could not be settled (a roll-back S3 refused in part); run ``s3commit recover``.
    """
    check_job_id(job_id)
    if _batch_journal(store, dest, job_id):
        return False
    recovery = _open(store, dest, job_id, _layouts(dest, job_id), options)
    if recovery is None:
        return False
    try:
        report = recovery.finish()
    except JobCommitError as err:
        if err.not_rolled_back:
            raise RecoveryError(f"the interrupted commit of job {job_id} to {dest} could not be settled: {err}; run "
                                f"`s3commit recover {dest} --job {job_id} --abort`") from err
        log.warning("settled the interrupted commit of job %s to %s: rolled back (%s)", job_id, dest, err)
        return False
    log.warning("settled the interrupted commit of job %s to %s: %s", job_id, dest, report.message)
    return True

def _refuse_stream_batch(store: S3Store, dest: S3Uri, job_id: str) -> None:
    """A streaming sink batch (its own journal) is settled by the sink's log, never by ``recover``: finishing it
    regardless of the log would publish files the log does not name; rolling it back might undo a batch the log
    has committed."""
    for key in _batch_journal(store, dest, job_id):
        raise RecoveryError(
        f"job {job_id} is a streaming sink batch (s3://{dest.bucket}/{key}): its fate is decided by the sink's log "
        "(_spark_metadata), not by `s3commit recover`. Restart the query: it settles every batch job under the sink "
        "before its first batch")


def _batch_journal(store: S3Store, dest: S3Uri, job_id: str) -> list[str]:
    """The key of job ``job_id``'s streaming batch journal, if it has one."""
    key = JobLayout(dest.key, job_id).batch_journal_key
    try:
        store.head_object(dest.bucket, key)
    except NotFoundError:
        return []
    return [key]


def resume_commit(store: S3Store, dest: S3Uri, job_id: str, *, layout: JobLayout, options: CommitterOptions,
                  pendingsets: Collection[str], plan: OverwritePlan, absolute_dirs: Collection[str],
                  listed: bool = False, check: bool = True) -> SuccessData | None:
    """Finish the interrupted commit of a job that is committed again (its first commit's process died):
    :func:`recover` forward, for the committer. Returns the job's ``_SUCCESS`` data, or ``None`` when the job
    has no journal at ``layout`` (no commit was interrupted there).

    ``pendingsets``, ``plan`` and ``absolute_dirs`` are what the caller commits now: they must be what the
    journal recorded (``listed``: the caller listed the job directory, so a clean-up that had begun may have
    deleted some pendingsets already); ``check=False`` skips that comparison (the caller only wants the
    commit finished, whatever it was).

    Raises:
        JournalExistsError: the journal records another commit of this job (other pendingsets or plan).
        JobCommitError: an upload could not be completed any more; the commit was rolled back.
    """
    recovery = _open(store, dest, job_id, [layout], options, finisher="a resumed job commit")
    if recovery is None:
        return None
    if check:
        recovery.check_same_commit(set(pendingsets), plan, set(absolute_dirs), listed=listed)
    recovery.finish()
    return recovery.success


def roll_back_commit(store: S3Store, dest: S3Uri, job_id: str, *, layout: JobLayout,
                     options: CommitterOptions) -> RecoveryReport | None:
    """Roll back the interrupted commit of a job that is aborted: :func:`recover` ``abort=True``, for the
    committer. ``None`` when the job has no journal at ``layout``.

    Raises:
        AlreadyCommittedError: the job has committed; nothing was rolled back.
        RecoveryError: roll-back refused (it would lose data) or incomplete; the journal is kept.
    """
    recovery = _open(store, dest, job_id, [layout], options)
    return None if recovery is None else recovery.roll_back(force=False)


# --- with a journal ---------------------------------------------------------------------------------


def _open(store: S3Store, dest: S3Uri, job_id: str, layouts: list[JobLayout], options: CommitterOptions, *,
          finisher: str = "s3commit recover") -> _Recovery | None:
    """The recovery of the journal found at one of ``layouts``, or ``None`` if there is none."""
    for layout in layouts:
        try:
            data = store.get_object(dest.bucket, layout.journal_key)
        except NotFoundError:
            continue
        journal = CommitJournal.from_json(data, source=f"s3://{dest.bucket}/{layout.journal_key}")
        _check_journal(journal, dest, job_id, layout)
        engine = _RecoveryCommit(store, dest=dest, layout=layout, job_id=job_id, committer=journal.committer,
                                 options=replace(options, journal=False, success_marker=journal.success_marker),
                                 job_id_source="s3commit-recover", absolute_dirs=journal.absolute_dirs)
        engine.finisher = finisher
        return _Recovery(store, dest, job_id, layout, journal, engine)
    return None


def _check_journal(journal: CommitJournal, dest: S3Uri, job_id: str, layout: JobLayout) -> None:
    source = f"s3://{dest.bucket}/{layout.journal_key}"
    if journal.job_id != job_id:
        raise ManifestError(f"journal is for job {journal.job_id}, not {job_id}", source=source)
    if journal.bucket != dest.bucket or journal.dest_key != dest.key:
        raise ManifestError(f"journal is for s3://{journal.bucket}/{journal.dest_key}, not {dest}", source=source)
    for key in journal.pendingsets:
        if not key.startswith(f"{layout.job_attempt_dir}/"):
            raise ManifestError(f"journal names a pendingset outside the job directory: {key!r}", source=source)


class _Recovery:
    """One recovery of a journalled commit."""

    def __init__(self, store: S3Store, dest: S3Uri, job_id: str, layout: JobLayout, journal: CommitJournal,
                 engine: _RecoveryCommit) -> None:
        self.store = store
        self.dest = dest
        self.job_id = job_id
        self.layout = layout
        self.journal = journal
        self.engine = engine
        self.keys = list(journal.pendingsets)
        self.plan = OverwritePlan(delete_paths=journal.delete_paths, replace_partitions=journal.replace_partitions,
                                  delete_outside=journal.delete_outside)
        self.age = max(0.0, time.time() - journal.created / 1000) if journal.created else None
        self.success: SuccessData | None = None
        """The job's ``_SUCCESS`` data once :meth:`finish` ran."""

    def check_same_commit(self, pendingsets: set[str], plan: OverwritePlan, absolute_dirs: set[str], *,
                          listed: bool) -> None:
        """Refuse to resume with a commit other than the journal's (see :func:`resume_commit`)."""
        recorded = set(self.keys)
        same_keys = pendingsets <= recorded if listed else pendingsets == recorded
        same_plan = (set(plan.delete_paths), set(plan.delete_outside), plan.replace_partitions) == (
            set(self.plan.delete_paths), set(self.plan.delete_outside), self.plan.replace_partitions)
        if not (same_keys and same_plan and absolute_dirs <= set(self.journal.absolute_dirs)):
            raise JournalExistsError(
                f"job {self.job_id} already has the commit journal of another commit (other pendingsets or "
                f"overwrite plan) at s3://{self.dest.bucket}/{self.layout.journal_key}; run `s3commit recover "
                f"{self.dest} --job {self.job_id}` to finish that commit, or --abort to roll it back")

    def report(self, action: RecoveryAction, message: str, **counts: Any) -> RecoveryReport:
        stats = self.engine.stats
        values: dict[str, Any] = {
            "uploads": stats.files, "aborted": stats.aborted, "reverted": stats.reverted,
            "deleted_by_overwrite": stats.deleted_by_overwrite, "orphans_aborted": stats.orphans_aborted,
        }
        values.update(counts)
        return RecoveryReport(dest=str(self.dest), job_id=self.job_id, action=action, message=message,
                              committer=self.journal.committer, journal_age_seconds=self.age, **values)

    def missing_pendingsets(self) -> list[str]:
        present = set(pendingset_keys_under(self.store, self.dest.bucket, self.layout.job_attempt_dir))
        return [k for k in self.keys if k not in present]

    def job_success(self) -> SuccessData | None:
        """``dest/_SUCCESS`` if it names this job (it committed), else ``None``."""
        try:
            data = SuccessData.from_json(self.store.get_object(self.dest.bucket, self.layout.success_key))
        except (NotFoundError, ManifestError):
            return None
        return data if data.job_id == self.job_id else None

    def cleaned_up(self, reason: str) -> RecoveryReport:
        """Finish the clean-up of a commit that is done (``reason`` says how we know)."""
        self.engine.cleanup(read_pendingsets=True)
        self.success = self.job_success() or self.engine.success_data()
        return self.report(RecoveryAction.CLEANED_UP,
                           f"job {self.job_id} {reason}; finished the clean-up",
                           orphans_aborted=self.engine.stats.orphans_aborted)

    def pending_upload_ids(self) -> set[str]:
        return {u.upload_id for prefix in self.engine.scopes()
                for u in self.store.list_multipart_uploads(self.dest.bucket, prefix)}

    # --- forward --------------------------------------------------------------------------------

    def finish(self) -> RecoveryReport:
        missing = self.missing_pendingsets()
        if missing:
            # Pendingsets are deleted only by clean-up, which starts after _SUCCESS: the commit itself is done.
            return self.cleaned_up(f"had committed and was cleaning up ({len(missing)} of {len(self.keys)} "
                                   "pendingsets already deleted)")
        if self.job_success() is not None:
            # _SUCCESS is written after every completion and the overwrite: only the clean-up is left.
            return self.cleaned_up(f"has committed (s3://{self.dest.bucket}/{self.layout.success_key} names it)")
        pending_before = self.pending_upload_ids()
        try:
            self.success = self.engine.run(self.keys, self.plan)
        except JobCommitError as err:
            self._clean_up_after_roll_back(err)
            raise
        stats = self.engine.stats
        still_pending = sum(1 for _key, upload_id in self._journal_uploads() if upload_id in pending_before)
        return self.report(
            RecoveryAction.FINISHED,
            f"finished the commit of job {self.job_id}: {stats.files} files; {still_pending} uploads completed "
            f"now, {stats.files - still_pending} were already complete"
            + (", _SUCCESS written" if self.journal.success_marker else ""),
            completed=still_pending, already_completed=stats.files - still_pending,
            success_written=self.journal.success_marker)

    def _journal_uploads(self) -> list[tuple[str, str]]:
        return [(c.destination_key, c.upload_id) for c in self.engine.validated_uploads(self.keys)]

    def _clean_up_after_roll_back(self, err: JobCommitError) -> None:
        """The engine rolled back a forward recovery that failed: clear the job if nothing is left behind."""
        if err.reverted + err.aborted < self.engine.stats.files:
            log.warning("roll back of job %s is incomplete; keeping its journal for `s3commit recover --abort`",
                        self.job_id)
            return
        try:
            self.engine.cleanup()
        except S3CommitError as cleanup_error:  # never hide the error that made us roll back
            log.warning("clean-up of job %s after a failed recovery failed: %s", self.job_id, cleanup_error)

    # --- backward -------------------------------------------------------------------------------

    def roll_back(self, *, force: bool) -> RecoveryReport:
        missing = self.missing_pendingsets()
        if missing:
            raise AlreadyCommittedError(
                f"cannot roll back job {self.job_id}: its commit had finished and was cleaning up "
                f"({len(missing)} of {len(self.keys)} pendingsets already deleted); run "
                f"`s3commit recover {self.dest} --job {self.job_id}` (without --abort) to finish the clean-up")
        if self.job_success() is not None:
            raise AlreadyCommittedError(
                f"cannot roll back job {self.job_id}: it has committed (s3://{self.dest.bucket}/"
                f"{self.layout.success_key} names it) and only its clean-up was interrupted; run "
                f"`s3commit recover {self.dest} --job {self.job_id}` (without --abort) to finish the clean-up")
        # Validate every pendingset before anything is aborted or deleted: a foreign or tampered manifest
        # must not make us delete objects (ManifestError, nothing changed).
        with ThreadPoolExecutor(self.engine.options.pool_size,
                                thread_name_prefix=f"s3commit-recover-{self.job_id[:8]}") as pool:
            self.engine.load_and_validate(pool, self.keys)
            pending = self.pending_upload_ids()
            completed = gone = waiting = 0
            for commit in self.engine.validated_uploads(self.keys):
                if commit.upload_id in pending:
                    waiting += 1
                elif self.store.completed_object(commit.bucket, commit.destination_key, commit.etags,
                                                 length=commit.length, created_ms=commit.created):
                    self.engine.mark_completed(commit)
                    completed += 1
                else:
                    gone += 1
            total = completed + gone + waiting
            if total and completed == total and self.plan.deletes and not force:
                raise RecoveryError(
                    f"cannot roll back job {self.job_id} safely: all {total} uploads are complete and its "
                    f"overwrite plan may already have deleted the old data under {self.dest}; rolling back "
                    "would lose both. Run recover without --abort to finish the commit, or add --force to "
                    "delete the new data anyway")
            self.engine.roll_back(pool, self.keys)
        stats = self.engine.stats
        failed = (completed - stats.reverted) + (waiting + gone - stats.aborted)
        if failed > 0:
            raise RecoveryError(
                f"roll back of job {self.job_id} is incomplete: {failed} uploads could not be aborted "
                f"or deleted (see the log); its journal is kept, run `s3commit recover {self.dest} --job "
                f"{self.job_id} --abort` again")
        self.engine.cleanup()
        return self.report(
            RecoveryAction.ROLLED_BACK,
            f"rolled back the commit of job {self.job_id}: {stats.reverted} completed uploads deleted, "
            f"{waiting} aborted, {gone} were already gone",
            aborted=waiting, reverted=stats.reverted, already_completed=completed,
            orphans_aborted=stats.orphans_aborted)


# --- without a journal ------------------------------------------------------------------------------


def _layouts(dest: S3Uri, job_id: str) -> list[JobLayout]:
    return [JobLayout(dest.key, job_id, dir_prefix=p) for p in (MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX)]


def _scratch_keys(store: S3Store, dest: S3Uri, job_id: str) -> int:
    return sum(1 for layout in _layouts(dest, job_id) for _ in store.list_objects(dest.bucket, f"{layout.job_dir}/"))


def _committed_report(store: S3Store, dest: S3Uri, job_id: str, *, what: str) -> RecoveryReport | None:
    """A NOTHING report if ``dest/_SUCCESS`` names the job (it committed), else None."""
    success_key = JobLayout(dest.key, job_id).success_key
    try:
        success = SuccessData.from_json(store.get_object(dest.bucket, success_key))
    except (NotFoundError, ManifestError):
        return None
    if success.job_id != job_id:
        return None
    return RecoveryReport(dest=str(dest), job_id=job_id, action=RecoveryAction.NOTHING,
                          message=f"job {job_id} has committed (s3://{dest.bucket}/{success_key} names it); {what}",
                          committer=success.committer or None)


def _explain_no_journal(store: S3Store, dest: S3Uri, job_id: str) -> RecoveryReport:
    committed = _committed_report(store, dest, job_id, what="nothing to recover")
    if committed is not None:
        return committed
    scratch = _scratch_keys(store, dest, job_id)
    job = JobUploads(store, dest, job_id)
    uploads = sum(1 for _ in job.pending(job.read_records()))
    if not scratch and not uploads:
        message = f"no trace of job {job_id} under {dest}: no commit journal, job directory or pending upload"
    else:
        message = (f"job {job_id} has no commit journal under {dest}: its commit never started, so there is "
                   f"nothing to finish ({scratch} scratch objects, {uploads} pending uploads of the job found). "
                   f"Rerun the job, or discard its uploads with `s3commit recover {dest} --job {job_id} --abort`")
    return RecoveryReport(dest=str(dest), job_id=job_id, action=RecoveryAction.NOTHING, message=message,
                          uploads=uploads)


def _abort_uncommitted(store: S3Store, dest: S3Uri, job_id: str) -> RecoveryReport:
    """Abort a job whose commit never started: what its ``abort_job`` would have done."""
    committed = _committed_report(store, dest, job_id,
                                  what="nothing to roll back (its output is published; delete it to remove it)")
    if committed is not None:
        return committed
    job = JobUploads(store, dest, job_id)
    aborted = job.abort(job.read_records())
    deleted = sum(delete_prefix(store, dest.bucket, f"{layout.job_dir}/") for layout in _layouts(dest, job_id))
    if not aborted and not deleted:
        return RecoveryReport(dest=str(dest), job_id=job_id, action=RecoveryAction.NOTHING,
                              message=f"no trace of job {job_id} under {dest}: nothing to abort")
    return RecoveryReport(
        dest=str(dest), job_id=job_id, action=RecoveryAction.ABORTED,
        message=(f"job {job_id} had not started committing: aborted {aborted} uploads, deleted {deleted} "
                 "scratch objects"),
        aborted=aborted, scratch_objects_deleted=deleted)
