"""Recovery of an interrupted job commit: finish it, or roll it back (``s3commit recover``).

Before its first Complete, the job commit engine (:mod:`s3commit.commit.engine`) writes a *commit journal*
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
are the engine's own (:class:`~s3commit.commit.engine.CommitEngine`); this module only decides which to run. A
committer whose own commit was interrupted (its process died, and the job is committed again, or aborted)
runs the same recovery through :func:`resume_commit` and :func:`roll_back_commit`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from s3commit.commit.engine import CommitEngine
from s3commit.commit.job_uploads import JobUploads
from s3commit.commit.lease import lease_for
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.ownership import one_operation
from s3commit.commit.prefixes import delete_prefix
from s3commit.commit.recovery_result import AlreadyCommittedError, RecoveryAction, RecoveryError, RecoveryReport
from s3commit.config.options import CommitterOptions
from s3commit.errors import (
    JobCommitError,
    ManifestError,
    NotFoundError,
)
from s3commit.model.manifests import SuccessData
from s3commit.model.paths import MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX, JobLayout, check_job_id
from s3commit.model.uri import S3Uri
from s3commit.store.capability_cache import known
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

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
            report = recovery.roll_back_from_journal(force=force) if abort else recovery.resume()
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
        report = recovery.resume()
    except JobCommitError as err:
        if err.not_rolled_back:
            raise RecoveryError(f"the interrupted commit of job {job_id} to {dest} could not be settled: {err}; run "
                                f"`s3commit recover {dest} --job {job_id} --abort`") from err
        log.warning("settled the interrupted commit of job %s to %s: rolled back (%s)", job_id, dest, err)
        return False
    log.warning("settled the interrupted commit of job %s to %s: %s", job_id, dest, report.message)
    return True


def roll_back_unstarted(store: S3Store, dest: S3Uri, job_id: str,
                        options: CommitterOptions | None = None) -> RecoveryReport | None:
    """Roll back the commit of dead job ``job_id`` where it began and changed nothing: its journal there, every
    pendingset it names there, every upload they name still pending, no ``_SUCCESS`` or snapshot naming it. That is
    a job that died while it waited for the destination's commit lease (a commit writes its journal beside the
    lease's taking, and completes uploads only under it), and no lease's taker settles it: the sweep of dead jobs
    (:mod:`s3commit.commit.sweep`) calls this. None where the job has no journal, is a streaming batch, or began
    changing the destination (left to its lease's taker or ``s3commit recover``).

    A commit of that job, or its recovery, running at once meets uploads aborted: it fails and rolls back, so the
    job is committed whole or not at all either way.
    """
    check_job_id(job_id)
    if _batch_journal(store, dest, job_id):
        return None
    recovery = _open(store, dest, job_id, _layouts(dest, job_id), options or CommitterOptions())
    if recovery is None:
        return None
    try:
        return recovery.roll_back_from_journal(unstarted=True)
    except (AlreadyCommittedError, RecoveryError) as err:
        log.info("left the journalled commit of dead job %s under %s: %s", job_id, dest, err)
        return None


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
        store.objects.head_object(dest.bucket, key)
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
    recovery.resume()
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
    return None if recovery is None else recovery.roll_back_from_journal(force=False)


# --- with a journal: the engine's own variants ------------------------------------------------------


def _open(store: S3Store, dest: S3Uri, job_id: str, layouts: list[JobLayout], options: CommitterOptions, *,
          finisher: str = "s3commit recover") -> CommitEngine | None:
    """The engine of the journal found at one of ``layouts``, or ``None`` if there is none."""
    return CommitEngine.open_journal(store, dest, job_id, layouts, options, finisher=finisher)


# --- without a journal ------------------------------------------------------------------------------


def _layouts(dest: S3Uri, job_id: str) -> list[JobLayout]:
    return [JobLayout(dest.key, job_id, dir_prefix=p) for p in (MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX)]


def _scratch_keys(store: S3Store, dest: S3Uri, job_id: str) -> int:
    return sum(1 for layout in _layouts(dest, job_id)
               for _ in store.objects.list_objects(dest.bucket, f"{layout.job_dir}/"))


def _committed_report(store: S3Store, dest: S3Uri, job_id: str, *, what: str) -> RecoveryReport | None:
    """A NOTHING report if ``dest/_SUCCESS`` names the job (it committed), else None."""
    success_key = JobLayout(dest.key, job_id).success_key
    try:
        success = SuccessData.from_json(store.objects.get_object(dest.bucket, success_key))
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
    records = job.read_records()
    aborted = job.abort(records)
    aborted += job.delete_completed(records)  # files its task commits completed (a snapshot destination)
    deleted = sum(delete_prefix(store, dest.bucket, f"{layout.job_dir}/") for layout in _layouts(dest, job_id))
    if not aborted and not deleted:
        return RecoveryReport(dest=str(dest), job_id=job_id, action=RecoveryAction.NOTHING,
                              message=f"no trace of job {job_id} under {dest}: nothing to abort")
    return RecoveryReport(
        dest=str(dest), job_id=job_id, action=RecoveryAction.ABORTED,
        message=(f"job {job_id} had not started committing: aborted {aborted} uploads, deleted {deleted} "
                 "scratch objects"),
        aborted=aborted, scratch_objects_deleted=deleted)
