"""The jobs under a destination, alive or dead, and the sweep of the dead: nothing a dead job left costs money or
confuses the next job.

A job's directory (``__magic_job-<id>/`` or ``__staging_job-<id>/`` under the destination) holds its liveness
record (:mod:`s3commit.commit.liveness`). Judged by the store's clock only (the ``Date`` of the answer that read the
record against its ``Last-Modified``), a job is

- **alive**: its record was renewed within its window (the larger of the one it declared and the judge's
  ``s3commit.job.liveness``), whatever its age: a live job's work is never touched;
- **dead**: silent longer than that;
- **committing**: its commit journal is there: a commit began. Where the job holds the destination's commit lease,
  the lease settles it (the next commit that takes the lease over finishes or rolls it back), or ``s3commit
  recover``. Where it does not and none of its uploads is complete, it died waiting for the lease (a commit writes
  its journal beside the lease's taking, and completes uploads only under it): the sweep rolls it back
  (:func:`~s3commit.commit.recovery.roll_back_unstarted`). Otherwise it is left to ``s3commit recover``;
- **committed**: no record, its journal there, and the destination's commit lease records the job as committed: a
  commit whose clean-up deleted everything but the journal (the record with the rest) and whose journal's DELETE
  was lost. The lease records a job only once its clean-up has deleted the rest and its ``_SUCCESS`` is written, so
  nothing of the job is left to do: the sweep deletes the journal at once (no window to wait), while the lease's
  record of the job is recent (a journal left past it would send ``s3commit recover`` looking for a ``_SUCCESS``);
- **unknown**: no record, or a record that never renews (a job of an s3commit without liveness, an S3A job's
  ``__magic_job-`` directory): never swept unless the caller names an age (``--older-than``), judged then by the
  newest object in its directory.

:func:`sweep_dead_jobs` takes each dead job's record with ``If-Match`` on the exact version it read (a job that renewed
meanwhile keeps everything), then aborts the job's uploads (:class:`~s3commit.commit.job_uploads.JobUploads`:
inside the destination and the recorded ones outside it, never another job's) and deletes its directory. Every job
commit sweeps its destination this way (``s3commit.job.sweep``) where the store honours conditional writes; where it
does not, no record can be taken safely and nothing is swept automatically: ``s3commit uploads sweep DEST
--older-than AGE`` sweeps there at the operator's word.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from s3commit.commit.job_uploads import JobUploads
from s3commit.commit.lease import committed_here, read_state
from s3commit.commit.ownership import owner_key
from s3commit.commit.prefixes import delete_prefix
from s3commit.commit.recovery import roll_back_unstarted
from s3commit.errors import NotFoundError, PreconditionFailedError, S3CommitError
from s3commit.model.markers import OwnerRecord
from s3commit.model.paths import MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX, JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

JOB_DIR_PREFIXES = {MAGIC_PATH_PREFIX: "magic", STAGING_PATH_PREFIX: "staging"}
"""The scratch directories of jobs under a destination, by the kind of committer that writes them."""
SLACK = timedelta(seconds=1)
"""Added to a window: ``Last-Modified`` and ``Date`` have whole seconds."""

ALIVE, DEAD, COMMITTING, COMMITTED, UNKNOWN, EMPTY = "alive", "dead", "committing", "committed", "unknown", "empty"


@dataclass(frozen=True)
class JobStatus:
    """One job directory under a destination, and what its liveness record says of the job."""

    job_id: str
    kind: str
    layout: JobLayout
    state: str
    record: OwnerRecord | None = None
    etag: str = ""
    silent: float | None = None
    window: float = 0.0
    note: str = ""

    @property
    def directory(self) -> str:
        return f"{self.layout.job_dir}/"

    def describe(self) -> str:
        """One line for people: the job, its state, and since when / where it runs."""
        where = f" on {self.record.host}, process {self.record.pid}, since {self.record.claimed}" if self.record else ""
        silent = f", silent {self.silent:.0f} s (window {self.window:g} s)" if self.silent is not None else ""
        note = f": {self.note}" if self.note else ""
        return f"{self.kind} job {self.job_id}: {self.state}{where}{silent}{note}"

    def to_dict(self) -> dict[str, object]:
        return {"job_id": self.job_id, "committer": self.kind, "state": self.state, "directory": self.directory,
                "host": self.record.host if self.record else None, "pid": self.record.pid if self.record else None,
                "since": self.record.claimed if self.record else None, "silent_seconds": self.silent,
                "window_seconds": self.window, "renewals": self.record.renewed if self.record else None,
                "note": self.note}


def job_directories(store: S3Store, dest: S3Uri) -> list[tuple[str, str, JobLayout]]:
    """The job directories under ``dest`` (one delimited LIST): ``(job id, committer kind, layout)``."""
    found = []
    for info in store.objects.list_objects(dest.bucket, f"{dest.prefix}__", delimiter="/"):
        if info.size != -1:
            continue
        name = info.key[len(dest.prefix):].rstrip("/")
        for prefix, kind in JOB_DIR_PREFIXES.items():
            if name.startswith(prefix) and len(name) > len(prefix):
                found.append((name[len(prefix):], kind, JobLayout(dest.key, name[len(prefix):], dir_prefix=prefix)))
    return found


def job_status(store: S3Store, dest: S3Uri, job_id: str, kind: str, layout: JobLayout, *,
               liveness: float) -> JobStatus:
    """What the job's record says, judged with the window ``liveness`` (seconds) or the job's own if longer."""
    try:
        body, info, now = store.objects.read_object(dest.bucket, owner_key(layout))
    except NotFoundError:
        if _exists(store, dest.bucket, layout.journal_key) and committed_here(store, dest, job_id) is not None:
            return JobStatus(job_id, kind, layout, COMMITTED, note="committed (the commit lease records it); its "
                                                                   "journal was left after its clean-up")
        return JobStatus(job_id, kind, layout, UNKNOWN, note="no liveness record (an S3A job, or an s3commit job "
                                                             "from before liveness): never swept without an age")
    try:
        record = OwnerRecord.from_json(body)
    except ValueError:
        return JobStatus(job_id, kind, layout, UNKNOWN, etag=info.etag, note="its owner record cannot be read")
    window = max(liveness, record.liveness)
    if info.last_modified is None:
        return JobStatus(job_id, kind, layout, UNKNOWN, record, info.etag, None, window, "the store gave no date")
    silent = (now - info.last_modified).total_seconds()
    if record.liveness <= 0:
        return JobStatus(job_id, kind, layout, UNKNOWN, record, info.etag, silent,
                         note="its record is never renewed (an s3commit job from before liveness)")
    if not _past(info.last_modified, window, now):
        return JobStatus(job_id, kind, layout, ALIVE, record, info.etag, silent, window)
    if _exists(store, dest.bucket, layout.journal_key):
        return JobStatus(job_id, kind, layout, COMMITTING, record, info.etag, silent, window,
                         "its commit began (journal): the next commit's lease settles it, or s3commit recover")
    note = f"being swept by {record.swept_by}" if record.swept_by else ""
    return JobStatus(job_id, kind, layout, DEAD, record, info.etag, silent, window, note)


def _past(last_modified: datetime, window: float, now: datetime) -> bool:
    return now > last_modified + timedelta(seconds=window) + SLACK


def _exists(store: S3Store, bucket: str, key: str) -> bool:
    try:
        store.objects.head_object(bucket, key)
    except NotFoundError:
        return False
    return True


def job_statuses(store: S3Store, dest: S3Uri, *, liveness: float, exclude: Collection[str] = (),
                 empty: bool = False) -> list[JobStatus]:
    """Every job directory under ``dest`` (but ``exclude``'s jobs), with its state. A directory with no record and
    no object is no job's (a store backed by a file system, SeaweedFS's filer, lists emptied directories): left
    out, or (``empty``) given the state :data:`EMPTY`."""
    found = []
    for job_id, kind, layout in job_directories(store, dest):
        if job_id in exclude:
            continue
        status = job_status(store, dest, job_id, kind, layout, liveness=liveness)
        if status.record is None and not status.etag and _empty(store, dest.bucket, status.directory):
            if not empty:
                continue
            status = JobStatus(job_id, kind, layout, EMPTY, note="an emptied directory the store still lists")
        found.append(status)
    return found


def _empty(store: S3Store, bucket: str, prefix: str) -> bool:
    return next(iter(store.objects.list_objects(bucket, prefix)), None) is None


def remove_empty_directories(store: S3Store, bucket: str, directory: str) -> int:
    """Delete an emptied directory a file-system-backed store keeps listing (SeaweedFS), deepest first (it removes
    a directory only once it holds nothing, subdirectories included), so that no later sweep reads it again.
    Returns how many directory entries were deleted."""
    found = [directory]
    pending = [directory]
    while pending:
        children = [i.key for i in store.objects.list_objects(bucket, pending.pop(), delimiter="/") if i.size == -1]
        found += children
        pending += children
    for key in sorted(found, key=len, reverse=True):
        store.objects.delete_object(bucket, key)
    return len(found)


@dataclass(frozen=True)
class SweptJob:
    """A dead job swept: its uploads aborted (or, in a dry run, that would be) and its directory's objects deleted."""

    status: JobStatus
    uploads_aborted: int
    objects_deleted: int


@dataclass
class SweepResult:
    """What one sweep of a destination did: the jobs swept, and the jobs it left, each with why."""

    dest: S3Uri
    swept: list[SweptJob] = field(default_factory=list)
    left: list[tuple[JobStatus, str]] = field(default_factory=list)
    dry_run: bool = False

    @property
    def uploads_aborted(self) -> int:
        return sum(s.uploads_aborted for s in self.swept)


def _newest_activity(store: S3Store, dest: S3Uri, status: JobStatus) -> float | None:
    """Seconds since the newest object in a job's directory was written, on the store's clock (its newest
    ``Last-Modified`` against the ``Date`` of a HEAD of the bucket); None if it is empty."""
    newest = max((i.last_modified for i in store.objects.list_objects(dest.bucket, status.directory)
                          if i.last_modified is not None), default=None)
    if newest is None:
        return None
    return (store.head_bucket(dest.bucket) - newest).total_seconds()


def sweep_dead_jobs(store: S3Store, dest: S3Uri, *, liveness: float, sweeper: str, conditional: bool,
          lists_uploads: bool = True, exclude: Collection[str] = (), older_than: float | None = None,
          dry_run: bool = False) -> SweepResult:
    """Sweep the dead jobs under ``dest`` (see the module); never a job in ``exclude``, never a live one.

    ``conditional``: the store honours ``If-Match`` (else only ``older_than`` sweeps, unconditionally: the
    operator's word). ``older_than``: also sweep jobs of unknown liveness whose directory has been quiet that
    long, and sweep a dead job only once it has been silent that long. ``sweeper``: who sweeps, recorded in each
    record taken. Failures to sweep one job are logged and leave it; they never raise.
    """
    result = SweepResult(dest, dry_run=dry_run)
    if not conditional and older_than is None:
        return result
    @functools.cache
    def lease_holder() -> str | None:  # (read once, where a dead job's commit began)
        state = read_state(store, dest)
        return state.holder.job_id if state is not None and state.holder is not None else None

    for status in job_statuses(store, dest, liveness=liveness, exclude=exclude, empty=True):
        if status.state == EMPTY:
            if not dry_run:
                try:
                    remove_empty_directories(store, dest.bucket, status.directory)
                except S3CommitError as err:
                    log.info("could not remove the emptied directory %s: %s", status.directory, err)
            continue
        if status.state == COMMITTED:  # (nothing left to do but delete its journal)
            swept = _sweep_committed(store, dest, status, dry_run=dry_run)
            if swept is not None:
                result.swept.append(swept)
            continue
        # (a dead job holding the lease is settled by the lease's next taker)
        if status.state == COMMITTING and conditional and not dry_run and lease_holder() != status.job_id:
            try:
                unstarted = _sweep_unstarted(store, dest, status, sweeper=sweeper)
            except S3CommitError as err:
                log.warning("could not roll back the commit of dead job %s under %s: %s", status.job_id, dest, err)
                unstarted = None
            if unstarted is not None:
                result.swept.append(unstarted)
                continue
        why = _reason_to_leave(store, dest, status, conditional=conditional, older_than=older_than)
        if why:
            result.left.append((status, why))
            continue
        try:
            swept = _sweep_one(store, dest, status, sweeper=sweeper, conditional=conditional,
                               lists_uploads=lists_uploads, dry_run=dry_run)
        except S3CommitError as err:
            log.warning("could not sweep dead job %s under %s: %s", status.job_id, dest, err)
            result.left.append((status, f"its sweep failed: {err}"))
            continue
        if swept is None:
            result.left.append((status, "it renewed its record meanwhile (alive)"))
            continue
        result.swept.append(swept)
    return result


def _reason_to_leave(store: S3Store, dest: S3Uri, status: JobStatus, *, conditional: bool,
                     older_than: float | None) -> str:
    if status.state == ALIVE:
        return "alive"
    if status.state == COMMITTING:
        return status.note
    if status.state == UNKNOWN:
        if older_than is None:
            return status.note
        quiet = _newest_activity(store, dest, status)
        if quiet is not None and quiet < older_than:
            return f"unknown liveness, active {quiet:.0f} s ago (younger than --older-than)"
        return ""
    if not conditional and older_than is None:
        return "the store does not honour conditional writes: never swept without --older-than"
    if older_than is not None and status.silent is not None and status.silent < older_than:
        return f"dead, but silent only {status.silent:.0f} s (younger than --older-than)"
    return ""


def _sweep_unstarted(store: S3Store, dest: S3Uri, status: JobStatus, *, sweeper: str) -> SweptJob | None:
    """A dead job whose commit began but changed nothing, and which holds no lease: its record taken (None: it
    renewed first), its commit rolled back from its journal (None: it had begun changing the destination)."""
    if status.record is not None and status.etag:
        try:
            store.conditional.put_if_match(dest.bucket, owner_key(status.layout),
                                           status.record.taken_by(sweeper).to_json(), status.etag,
                                           content_type="application/json")
        except (PreconditionFailedError, NotFoundError):
            return None
    objects = sum(1 for _ in store.objects.list_objects(dest.bucket, status.directory))
    report = roll_back_unstarted(store, dest, status.job_id)
    if report is None:
        return None
    log.warning("swept dead %s: it died before its commit changed anything; %s", status.describe(), report.message)
    return SweptJob(status, report.aborted, objects)


def _sweep_committed(store: S3Store, dest: S3Uri, status: JobStatus, *, dry_run: bool) -> SweptJob | None:
    """A committed job's directory, which holds only its journal: deleted (None: the deletion failed, logged)."""
    if dry_run:
        return SweptJob(status, 0, sum(1 for _ in store.objects.list_objects(dest.bucket, status.directory)))
    try:
        deleted = delete_prefix(store, dest.bucket, status.directory)
    except S3CommitError as err:
        log.warning("could not delete the journal left by committed job %s under %s: %s", status.job_id, dest, err)
        return None
    log.info("deleted the journal committed %s left (its clean-up had deleted the rest)", status.describe())
    return SweptJob(status, 0, deleted)


def _sweep_one(store: S3Store, dest: S3Uri, status: JobStatus, *, sweeper: str, conditional: bool,
               lists_uploads: bool, dry_run: bool) -> SweptJob | None:
    """Take the job's record (None: it renewed first), abort its uploads, delete its directory."""
    uploads = JobUploads(store, dest, status.job_id, layouts=(status.layout,))
    if dry_run:
        records = uploads.read_records()
        pending = sum(1 for _ in uploads.pending(records)) if lists_uploads else len(uploads.recorded_targets(records))
        objects = sum(1 for _ in store.objects.list_objects(dest.bucket, status.directory))
        return SweptJob(status, pending, objects)
    if status.record is not None and status.etag:
        taken = status.record.taken_by(sweeper).to_json()
        try:
            if conditional:
                store.conditional.put_if_match(dest.bucket, owner_key(status.layout), taken, status.etag,
                                               content_type="application/json")
            else:
                store.objects.put_object(dest.bucket, owner_key(status.layout), taken, content_type="application/json")
        except (PreconditionFailedError, NotFoundError):
            return None
    records = uploads.read_records()
    aborted = uploads.abort(records, list_uploads=lists_uploads)
    aborted += uploads.delete_completed(records)  # the files its task commits completed: in no snapshot
    deleted = delete_prefix(store, dest.bucket, status.directory)
    log.warning("swept dead %s: aborted %d pending uploads, deleted %d objects of its directory %s",
                status.describe(), aborted, deleted, f"s3://{dest.bucket}/{status.directory}")
    return SweptJob(status, aborted, deleted)
