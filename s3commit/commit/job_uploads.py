"""The uploads of one job: every multipart upload that provably belongs to job X, and no other.

The one home of this question, asked by a job abort (:meth:`Committer.abort_job`), the clean-up after a job
commit (:meth:`CommitEngine.cleanup`), ``s3commit recover`` (with or without a journal) and ``s3commit uploads
--job``. An upload in the destination's bucket belongs to job X when

1. the job recorded it, naming exactly its bucket, key and upload id: a task attempt's ``.pending`` file or
   upload marker (``.upload``) under the job's tasks directory, or an entry of one of the job's pendingsets
   (read in that order: a task commit writes its pendingset before it deletes its attempt's records, so one
   landing meanwhile cannot hide an upload from both readings);
2. its key carries the job id (Spark's file names and the staging committers' unique names do); or
3. one of the job's CreateMultipartUploads failed ambiguously (its answer lost) and was retried, the record
   of that upload keeps the Create's window (:class:`~s3commit.model.object_info.CreateWindow`), and this upload has
   the same key and was initiated, on S3's clock, inside that window: the Create's orphan.

*Where* decides how much proof is needed. Under the destination, or in a directory outside it that the job
declared (``absolute_dirs``: a committed task's custom partition locations, from its commit message or the
journal), any one rule suffices. Elsewhere (an absolute location the caller does not know was declared) an
upload is the job's only if it is recorded (rule 1 or 3) *and* its key carries the job id: a tampered
manifest alone can never get another writer's upload aborted. Uploads of other jobs writing to the same
destination are never touched (unlike S3A's ``fs.s3a.committer.abort.pending.uploads``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from s3commit.commit.manifest_store import (
    load_pending_upload,
    load_pendingset,
    pendingset_keys_under,
    read_upload_marker,
    scan_attempt_dir,
)
from s3commit.commit.snapshots import SnapshotLog
from s3commit.commit.upload_actions import abort_upload_quietly, delete_completed_quietly
from s3commit.errors import S3CommitError
from s3commit.model.manifests import PendingUpload
from s3commit.model.object_info import CREATE_WINDOW_KEY, CreateWindow, UploadInfo, UploadRef
from s3commit.model.paths import MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX, JobLayout, carries_job_id
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)


def upload_ref(pending: PendingUpload) -> UploadRef:
    """The record of a pending upload, with its Create's window if one was kept."""
    return UploadRef(pending.bucket, pending.destination_key, pending.upload_id,
                     CreateWindow.decode(pending.extra_data.get(CREATE_WINDOW_KEY)))


@dataclass
class JobRecords:
    """What a job recorded about its uploads: each by upload id, and the windows of its ambiguous Creates by
    bucket and key."""

    uploads: dict[str, UploadRef] = field(default_factory=dict)
    windows: dict[tuple[str, str], list[CreateWindow]] = field(default_factory=dict)
    completed: dict[str, PendingUpload] = field(default_factory=dict)
    """Pendingsets' entries their task commits completed (a snapshot destination), by upload id: no upload is
    left to abort, the object is deleted instead (:meth:`JobUploads.delete_completed`)."""

    def add(self, ref: UploadRef) -> None:
        self.uploads[ref.upload_id] = ref
        if ref.window is not None:
            self.windows.setdefault((ref.bucket, ref.key), []).append(ref.window)

    def add_pending(self, pending: PendingUpload) -> None:
        self.add(upload_ref(pending))

    def update(self, other: JobRecords) -> None:
        for ref in other.uploads.values():
            self.add(ref)
        self.completed.update(other.completed)

    def names(self, bucket: str, upload: UploadInfo) -> bool:
        """True if a record names exactly this upload (bucket, key and id), or a recorded Create's window
        covers it (same bucket and key, initiated inside the window)."""
        ref = self.uploads.get(upload.upload_id)
        if ref is not None and ref.bucket == bucket and ref.key == upload.key:
            return True
        return any(w.contains(upload.initiated) for w in self.windows.get((bucket, upload.key), ()))

    def windowed(self) -> JobRecords:
        """Only the records that keep a Create's window."""
        kept = JobRecords()
        for ref in self.uploads.values():
            if ref.window is not None:
                kept.add(ref)
        return kept

    def __len__(self) -> int:
        return len(self.uploads)


def read_attempt_records(store: S3Store, bucket: str, prefix: str) -> JobRecords:
    """The uploads recorded under ``prefix`` by task attempts (``.pending`` files and upload markers): those
    of attempts that never committed or aborted (a committed or aborted attempt's directory is deleted)."""
    listing = scan_attempt_dir(store, bucket, prefix)
    records = JobRecords()
    for key in listing.pending:
        try:
            records.add_pending(load_pending_upload(store, bucket, key))
        except S3CommitError as err:
            log.warning("cannot read %s: %s", key, err)
    for key in listing.markers:
        ref = read_upload_marker(store, bucket, key)
        if ref is not None:
            records.add(ref)
    return records


class JobUploads:
    """The uploads of job ``job_id`` writing to ``dest``.

    Args:
        store: the S3 store.
        dest: the job's destination.
        job_id: the job's id.
        layouts: the job's scratch layouts (default: both the magic and the staging one, for callers that do
            not know which committer ran the job).
        absolute_dirs: directories outside the destination (keys in its bucket) the job declared writing to.
    """

    def __init__(self, store: S3Store, dest: S3Uri, job_id: str, *, layouts: Sequence[JobLayout] | None = None,
                 absolute_dirs: Iterable[str] = ()) -> None:
        self.store = store
        self.dest = dest
        self.job_id = job_id
        self.layouts = tuple(layouts) if layouts is not None else tuple(
            JobLayout(dest.key, job_id, dir_prefix=p) for p in (MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX))
        self.absolute_dirs = tuple(sorted({d.strip("/") for d in absolute_dirs if d.strip("/")}))

    # --- where --------------------------------------------------------------------------------------

    def in_scope(self, key: str) -> bool:
        """Under the destination, or a file directly in one of the declared absolute directories."""
        return self.dest.contains_key(key) or key.rpartition("/")[0] in self.absolute_dirs

    def scopes(self) -> list[str]:
        """The prefixes to list: the destination's, then each declared directory not already under it."""
        prefixes = [self.dest.prefix, *(f"{d}/" for d in self.absolute_dirs)]
        return [p for i, p in enumerate(prefixes) if not any(p.startswith(q) for q in prefixes[:i])]

    # --- rules --------------------------------------------------------------------------------------

    def read_records(self, *, pendingsets: bool = True) -> JobRecords:
        """The job's records: its task attempts' ``.pending`` files and upload markers, then (optionally)
        every entry of its pendingsets. An unreadable file is logged and skipped (its uploads are found by
        the job id in their keys, if at all)."""
        records = JobRecords()
        for layout in self.layouts:
            records.update(read_attempt_records(self.store, self.dest.bucket, f"{layout.tasks_dir}/"))
        if pendingsets:
            records.update(self.read_pendingset_records())
        return records

    def read_pendingset_records(self) -> JobRecords:
        """Every entry of the job's pendingsets (those of its committed tasks)."""
        bucket = self.dest.bucket
        records = JobRecords()
        for layout in self.layouts:
            for key in pendingset_keys_under(self.store, bucket, layout.job_attempt_dir):
                try:
                    pendingset = load_pendingset(self.store, bucket, key)
                except S3CommitError as err:
                    log.warning("cannot read %s: %s", key, err)
                    continue
                for commit in pendingset.commits:
                    if commit.completed_at_task_commit:
                        records.completed[commit.upload_id] = commit
                    else:
                        records.add_pending(commit)
        return records

    def delete_completed(self, records: JobRecords, *, threads: int = 16) -> int:
        """Delete the objects the job's task commits completed (:attr:`JobRecords.completed`) for a job that will
        never publish them (aborted, dead): each only if it is still the object its upload made and the
        destination's current snapshot does not list it. Returns how many were deleted; failures are logged."""
        targets = [c for c in records.completed.values() if c.bucket == self.dest.bucket]
        if not targets:
            return 0
        try:
            current = SnapshotLog(self.store, self.dest).current()
        except S3CommitError as err:
            log.warning("job %s: cannot read the snapshot log of %s, so its %d files completed at task commit are "
                        "left to `s3commit snapshot vacuum`: %s", self.job_id, self.dest, len(targets), err)
            return 0
        live = {self.dest.child(r).key for r in current.relatives} if current else set()
        targets = [c for c in targets if c.destination_key not in live]
        with ThreadPoolExecutor(max(1, min(threads, len(targets))),
                                thread_name_prefix=f"s3commit-delete-{self.job_id[:8]}") as pool:
            deleted = sum(pool.map(lambda c: delete_completed_quietly(self.store, c), targets))
        if deleted:
            log.info("deleted %d files job %s completed at task commit under %s", deleted, self.job_id, self.dest)
        return deleted

    def belongs(self, upload: UploadInfo, records: JobRecords) -> bool:
        """Whether ``upload`` (in the destination's bucket) is this job's, by the rules of the module."""
        recorded = records.names(self.dest.bucket, upload)
        carries_id = carries_job_id(upload.key, self.job_id)
        if self.in_scope(upload.key):
            return recorded or carries_id
        return recorded and carries_id

    def recorded_targets(self, records: JobRecords) -> list[UploadRef]:
        """The recorded uploads an abort may name without listing (the rules applied to records alone)."""
        return [ref for ref in records.uploads.values()
                if ref.bucket == self.dest.bucket and (self.in_scope(ref.key) or carries_job_id(ref.key, self.job_id))]

    # --- finding and aborting -------------------------------------------------------------------------

    def _prefixes(self, records: JobRecords) -> list[str]:
        """Where to list: the scopes, then the directories of recorded uploads outside them (only those
        whose key carries the job id can be the job's there), none nested in another."""
        prefixes = self.scopes()
        for ref in self.recorded_targets(records):
            if not self.in_scope(ref.key):
                directory = ref.key.rpartition("/")[0]
                prefixes.append(f"{directory}/" if directory else ref.key)
        kept: list[str] = []
        for prefix in sorted(set(prefixes), key=lambda p: (len(p), p)):
            if not any(prefix.startswith(k) for k in kept):
                kept.append(prefix)
        return kept

    def pending(self, records: JobRecords) -> Iterator[UploadInfo]:
        """The job's uploads still pending, inside and outside the destination (ListMultipartUploads)."""
        seen: set[str] = set()
        for prefix in self._prefixes(records):
            for upload in self.store.uploads.list_multipart_uploads(self.dest.bucket, prefix):
                if upload.upload_id not in seen and self.belongs(upload, records):
                    seen.add(upload.upload_id)
                    yield upload

    def abort(self, records: JobRecords, *, keep: Collection[str] = (), list_uploads: bool = True) -> int:
        """Abort the job's pending uploads except the upload ids in ``keep`` (those just committed).

        With ``list_uploads`` the uploads are found by listing (every rule); without (a role that may not
        list uploads), only recorded uploads are aborted, by their records. Returns how many were aborted;
        a failure to abort one is logged, never raised (clean-up must not hide the error that caused it).
        """
        targets: Iterable[UploadInfo | UploadRef] = (
            self.pending(records) if list_uploads else self.recorded_targets(records))
        aborted = sum(abort_upload_quietly(self.store, self.dest.bucket, t.key, t.upload_id)
                      for t in targets if t.upload_id not in keep)
        if aborted:
            log.info("aborted %d uploads of job %s (under %s and the directories it declared)", aborted,
                     self.job_id, self.dest)
        return aborted


def abort_create_orphans(store: S3Store, refs: Iterable[UploadRef], *, keep: Collection[str] = ()) -> int:
    """Abort the orphans of the windowed Creates among ``refs``
    (:meth:`~s3commit.store.uploads.UploadRequests.abort_create_orphans`), for
    records a task commit or abort consumes before the job's clean-up could see them. Best effort: a failure
    (e.g. a role that may not list uploads) is logged. Returns how many were aborted."""
    aborted = 0
    for ref in refs:
        if ref.window is None or ref.upload_id in keep:
            continue
        try:
            aborted += store.uploads.abort_create_orphans(ref.bucket, ref.key, ref.window, keep=ref.upload_id)
        except S3CommitError as err:
            log.warning("could not abort the orphan uploads of s3://%s/%s: %s", ref.bucket, ref.key, err)
    return aborted
