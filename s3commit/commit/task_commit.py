"""Task commit: what a task attempt's commit and abort do to S3.

A committed task attempt leaves one ``<taskId>.pendingset`` in its job's directory (last attempt wins), naming
uploads that only the job commit completes; an aborted attempt leaves no upload behind. On a snapshot destination
(:attr:`TaskAttemptRef.complete`) the task commit completes its uploads under the destination itself, with
``If-None-Match`` (:func:`complete_at_task_commit`): the log, not a listing, says what is committed, so the job commit
is left with its log entry; the pendingset records which are complete (:data:`.manifests.COMPLETED_KEY`). The
magic task commit gathers what the attempt's files left: their pending uploads in this process's memory
(:mod:`.task_registry`), and ``.pending`` files and upload markers in the attempt directory
(:func:`commit_magic_task`, :func:`abort_magic_task`). The staging task commit uploads local files as uncompleted
multipart uploads (:func:`commit_staging_task`). Each aborts (or deletes) every upload of the attempt if it fails.
*When* they run, and what is checked of the attempt first, is the committers' (:mod:`s3commit.committers`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass

from s3commit.commit.job_uploads import abort_create_orphans, upload_ref
from s3commit.commit.manifest_store import (
    AttemptListing,
    load_pending_upload,
    read_upload_marker,
    save_task_pendingset,
    scan_attempt_dir,
)
from s3commit.commit.task_registry import MagicTaskRegistry, TakenAttempt
from s3commit.commit.upload_actions import abort_upload_quietly, commit_upload, revert_upload_quietly
from s3commit.config.options import MAX_PARTS
from s3commit.errors import CommitStateError, ConfigError, PreconditionFailedError
from s3commit.model import checksums
from s3commit.model.checksums import SentPart
from s3commit.model.manifests import PendingSet, PendingUpload, now_millis
from s3commit.model.object_info import CREATE_WINDOW_KEY, CreateWindow, UploadRef
from s3commit.model.paths import PENDING_SUFFIX, UPLOAD_MARKER_SUFFIX, TaskAttemptId, carries_job_id, partition_of
from s3commit.model.task_message import TaskCommitMessage, completed_files
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import gather, run_each, window_for
from s3commit.transfer.parts import file_parts, staged_part_size
from s3commit.transfer.writer import TooManyPartsError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskAttemptRef:
    """One task attempt of a job, and where its commit reads and writes in the destination's bucket."""

    bucket: str
    job_id: str
    task_id: str
    task_attempt_id: str
    pendingset_key: str
    """Where the task's ``.pendingset`` is saved."""
    attempt_dir: str = ""
    """Magic: the attempt directory (no trailing ``/``), where its ``.pending`` files and upload markers are."""
    dest_prefix: str = ""
    """The destination's prefix (:attr:`S3Uri.prefix`): magic files outside it are in the task's absolute
    directories; a staged file's partition is its key's directory below it."""
    complete: bool = False
    """Complete the attempt's uploads under the destination at task commit (a snapshot destination whose store
    honours If-None-Match on Complete, ``s3commit.snapshot.complete-at-task-commit``):
    :func:`complete_at_task_commit`."""


def complete_at_task_commit(store: S3Store, attempt: TaskAttemptRef, uploads: list[PendingUpload], *,
                            executor: Executor, window: int, completed: list[PendingUpload]) -> list[PendingUpload]:
    """Complete the uploads under the destination in parallel, each with ``If-None-Match: *``, and return the
    pendingset's entries, those completed recorded so (:meth:`PendingUpload.as_completed`).

    A key that exists (a file of the current snapshot, a replaced file the retention keeps, another attempt's) is
    never replaced under a reader here: its upload stays pending for the job commit, as without this step. Uploads
    outside the destination (absolute directories: no snapshot lists them) stay pending too. Each upload completed
    is appended to ``completed`` as it is (the caller deletes them again if the task commit fails). The first other
    failure is raised once every Complete sent has ended.
    """
    if not attempt.complete:
        return uploads

    def complete(pending: PendingUpload) -> PendingUpload:
        if not pending.destination_key.startswith(attempt.dest_prefix):
            return pending
        try:
            commit_upload(store, pending, if_none_match=True)
        except PreconditionFailedError:
            return pending.as_key_there()  # the job commit completes it, unless a live file has its name
        completed.append(pending)
        return pending.as_completed()

    results, failures = gather(executor, uploads, complete, window=window)
    if failures:
        raise failures[0].error
    return results


def _undo_task_commit(store: S3Store, uploads: Iterable[UploadRef], completed: list[PendingUpload]) -> None:
    """A task commit failed: delete what it completed, abort the rest of ``uploads`` (quietly: the failure is what
    is raised)."""
    done = {p.upload_id for p in completed}
    for pending in completed:
        revert_upload_quietly(store, pending.bucket, pending.destination_key)
    for ref in uploads:
        if ref.upload_id not in done:
            abort_upload_quietly(store, ref.bucket, ref.key, ref.upload_id)


# --- magic ------------------------------------------------------------------------------------------------------


def commit_magic_task(store: S3Store, attempt: TaskAttemptRef, *, executor: Executor, window: int,
                      in_memory: bool = True, registry: MagicTaskRegistry) -> TaskCommitMessage:
    """Gather a task attempt's pending uploads into its pendingset; delete the attempt directory.

    Pending uploads written by this process come from memory (after every file closing in the background has
    ended; a file whose upload failed fails the task commit, naming it). With ``in_memory`` and nothing of the
    attempt written to S3 that is all; otherwise the attempt directory is listed once to pick up ``.pending``
    files, and deleted afterwards. An upload that was started but never closed is aborted (its file is
    incomplete), with any orphan its Create left. If anything fails, every upload of the attempt is aborted and
    the error re-raised. The Create window of a file that made it into the pendingset travels on with it.
    ``.pending`` files are loaded on ``executor``, at most ``window`` at a time.
    """
    taken = registry.take(attempt.job_id, attempt.task_attempt_id)
    loaded: list[PendingUpload] = list(taken.pending.values())
    listing: AttemptListing | None = None
    windowed: set[str] = set()
    completed: list[PendingUpload] = []
    try:
        for bucket, key, upload_id in taken.still_open:  # files never closed: their uploads are incomplete
            abort_upload_quietly(store, bucket, key, upload_id)
        _raise_failed_closes(attempt, taken)
        listing = _list_attempt_dir(store, attempt, taken, in_memory=in_memory)
        # What the attempt recorded in S3 and not in this process's memory: .pending files, upload markers.
        pending_keys = listing.pending if listing is not None else []
        others = [k for k in pending_keys if k not in taken.pending]
        more, failures = gather(executor, others, lambda k: load_pending_upload(store, attempt.bucket, k),
                                window=window)
        loaded += more
        if listing is not None:
            _abort_never_closed(store, attempt.bucket, listing.markers, pending_keys, loaded, windowed=windowed)
        if failures:
            raise failures[0].error
        entries = complete_at_task_commit(store, attempt, sorted(loaded, key=lambda p: p.destination_key),
                                          executor=executor, window=window, completed=completed)
        # The task's pendingset (last attempt wins): the attempt's files are committed once it is saved.
        pendingset = PendingSet(commits=tuple(entries)).with_job(attempt.job_id, attempt.task_attempt_id)
        saved_key = save_task_pendingset(store, attempt.bucket, attempt.pendingset_key, pendingset,
                                         first_attempt=_no_earlier_pendingset(attempt, loaded, in_memory=in_memory))
    except BaseException:
        _undo_task_commit(store, [upload_ref(p) for p in loaded], completed)
        raise
    finally:
        if listing is not None:
            _delete_attempt_dir(store, attempt, listing, keep=windowed)
    absolute_dirs = sorted({c.destination_key.rpartition("/")[0] for c in pendingset.commits
                            if not c.destination_key.startswith(attempt.dest_prefix)})
    return TaskCommitMessage(job_id=attempt.job_id, task_id=attempt.task_id, task_attempt_id=attempt.task_attempt_id,
                             pendingset_key=saved_key, files=len(pendingset.commits),
                             bytes=pendingset.total_length, absolute_dirs=tuple(absolute_dirs),
                             completed=completed_files(pendingset))


def abort_magic_task(store: S3Store, attempt: TaskAttemptRef, *, registry: MagicTaskRegistry) -> int:
    """Abort every upload a task attempt started (from memory, .pending files and markers); delete its
    directory. Returns how many uploads were aborted. Idempotent."""
    taken = registry.take(attempt.job_id, attempt.task_attempt_id)
    refs = {p.upload_id: upload_ref(p) for p in taken.pending.values()}
    refs.update({u: UploadRef(b, k, u) for b, k, u in taken.still_open})
    listing = scan_attempt_dir(store, attempt.bucket, f"{attempt.attempt_dir}/")
    for key in listing.pending:
        if key in taken.pending:
            continue
        try:
            p = load_pending_upload(store, attempt.bucket, key)
            refs[p.upload_id] = upload_ref(p)
        except Exception as err:
            log.warning("abort task: cannot read %s: %s", key, err)
    windowed: set[str] = set()
    for key in listing.markers:
        ref = read_upload_marker(store, attempt.bucket, key)
        if ref is not None and (ref.upload_id not in refs or ref.window is not None):
            refs[ref.upload_id] = ref
        if ref is not None and ref.window is not None:
            windowed.add(key)
    aborted = sum(abort_upload_quietly(store, r.bucket, r.key, r.upload_id) for r in refs.values())
    # What a Create that lost its answer may have left is the job's to abort, never this attempt's: another attempt
    # of the task (speculation) may have an upload of the same key in that window. The records stay for the job.
    _delete_attempt_dir(store, attempt, listing, keep=windowed)
    return aborted


def _raise_failed_closes(attempt: TaskAttemptRef, taken: TakenAttempt) -> None:
    """A file whose background close failed (its upload aborted) fails the task commit, naming the first."""
    if taken.failures:
        name, error = taken.failures[0]
        raise CommitStateError(f"task attempt {attempt.task_attempt_id} of job {attempt.job_id}: "
                               f"{len(taken.failures)} file(s) could not be uploaded, the first "
                               f"s3://{attempt.bucket}/{name[:-len(PENDING_SUFFIX)]}: {error}") from error


def _list_attempt_dir(store: S3Store, attempt: TaskAttemptRef, taken: TakenAttempt, *,
                      in_memory: bool) -> AttemptListing | None:
    """The attempt directory, listed once; None when its files were tracked in memory only (nothing of the attempt
    written to S3: nothing to list, read or delete).

    Raises:
        CommitStateError: files are tracked in memory, this process did not set the attempt up, and the directory
            has no ``.pending`` file: the process that wrote them is gone (its upload markers stay, for the job's
            clean-up to find the uploads).
    """
    if in_memory and taken.known and not taken.durable:
        return None
    listing = scan_attempt_dir(store, attempt.bucket, f"{attempt.attempt_dir}/")
    if in_memory and not taken.known and not listing.pending:
        raise CommitStateError(
            f"task attempt {attempt.task_attempt_id} of job {attempt.job_id} was not set up in this process, which "
            "tracks its files in memory: the process that wrote them is gone (a restarted sidecar or worker), "
            "so the task must run again (its uploads are aborted by the job)")
    return listing


def _abort_never_closed(store: S3Store, bucket: str, markers: list[str], pending_keys: list[str],
                        loaded: list[PendingUpload], *, windowed: set[str]) -> None:
    """Abort each upload an upload marker records whose file never closed (no ``.pending``, not loaded).

    The marker of one whose Create lost its answer is added to ``windowed`` as it is found (the attempt
    directory's deletion keeps it, even if a later marker cannot be read): what that Create may have left is the
    job's to abort (its clean-up keeps the uploads it committed), as another attempt of this task may have an
    upload of this key in the window."""
    closed_ids = {p.upload_id for p in loaded}
    for marker in markers:
        if marker[: -len(UPLOAD_MARKER_SUFFIX)] + PENDING_SUFFIX not in pending_keys:
            ref = read_upload_marker(store, bucket, marker)
            if ref is not None and ref.upload_id not in closed_ids:
                abort_upload_quietly(store, ref.bucket, ref.key, ref.upload_id)
                if ref.window is not None:
                    windowed.add(marker)


def _no_earlier_pendingset(attempt: TaskAttemptRef, loaded: list[PendingUpload], *, in_memory: bool) -> bool:
    """Whether saving the pendingset may skip reading an earlier attempt's (one GET, to abort its uploads): none
    can exist (a first attempt), or its uploads carry the job id (its files have the names of this attempt's, which
    carry it), so the job's sweep finds those by the id."""
    return in_memory and (_is_first_attempt(attempt.task_attempt_id) or (bool(loaded) and all(
        carries_job_id(p.destination_key, attempt.job_id) for p in loaded)))


def _is_first_attempt(task_attempt_id: str) -> bool:
    try:
        return TaskAttemptId.parse(task_attempt_id).attempt == 0
    except ConfigError:
        return False  # not Hadoop's form: it may follow another attempt


def _delete_attempt_dir(store: S3Store, attempt: TaskAttemptRef, listing: AttemptListing,
                        keep: Collection[str] = ()) -> None:
    """Delete the keys of an attempt directory's listing without listing again, but ``keep`` (the records of
    Creates that lost their answer, left for the job's clean-up); a failure is a warning."""
    try:
        store.objects.delete_objects(attempt.bucket, [k for k in listing.keys if k not in keep])
    except Exception as err:
        log.warning("could not delete s3://%s/%s/: %s", attempt.bucket, attempt.attempt_dir, err)


# --- staging ----------------------------------------------------------------------------------------------------


def commit_staging_task(store: S3Store, attempt: TaskAttemptRef, files: Mapping[str, str], *, part_size: int,
                        threads: int, executor: Executor, part_executor: Executor,
                        object_checked: bool = False) -> TaskCommitMessage:
    """Upload each local file (``files``: local path -> final key, in the pendingset's order) as an uncompleted
    multipart upload, and save the task's pendingset.

    Files go up on ``executor`` and the parts of each on ``part_executor`` (waiting on parts from the files' pool
    cannot deadlock it), at most :func:`window_for` ``threads`` at a time on each; a file with fewer parts than its
    share of the threads goes up in more, smaller ones. Each ``.pending`` names its partition, the key's directory
    below :attr:`TaskAttemptRef.dest_prefix`. On any failure every upload made so far is aborted (with any orphan
    a Create left under a name without the job id) and the error re-raised. The local files are the caller's.
    ``object_checked``: the job commit will compare each object's checksum (:meth:`RequestGroup.checksum_algorithm`).
    """
    algorithm = store.uploads.checksum_algorithm(attempt.bucket, object_checked=object_checked)
    started: list[UploadRef] = []  # each upload registered at its creation: a failure aborts it
    completed: list[PendingUpload] = []  # completed at task commit: a failure deletes them
    try:
        uploads, failures = gather(
            executor, list(files.items()),
            lambda item: _upload_file(store, attempt, item[0], item[1], started, part_size=part_size,
                                      threads=threads, files=len(files), part_executor=part_executor,
                                      algorithm=algorithm),
            window=window_for(threads))
        if failures:
            raise failures[0].error
        entries = complete_at_task_commit(store, attempt, uploads, executor=executor, window=window_for(threads),
                                          completed=completed)
        pendingset = PendingSet(commits=tuple(entries)).with_job(attempt.job_id, attempt.task_attempt_id)
        saved = save_task_pendingset(store, attempt.bucket, attempt.pendingset_key, pendingset)
    except BaseException:
        _undo_task_commit(store, started, completed)
        # What a Create that lost its answer left under a name carrying the job id is the job's to abort (its
        # sweep finds it, keeping what it committed): another attempt of this task may have an upload of that
        # key in the window. Only a name without the id, which nothing else would find, is handled here.
        abort_create_orphans(store, [r for r in started if not carries_job_id(r.key, attempt.job_id)])
        raise
    return TaskCommitMessage(job_id=attempt.job_id, task_id=attempt.task_id, task_attempt_id=attempt.task_attempt_id,
                             pendingset_key=saved, files=len(uploads), bytes=pendingset.total_length,
                             completed=completed_files(pendingset))


def _upload_file(store: S3Store, attempt: TaskAttemptRef, path: str, key: str, started: list[UploadRef], *,
                 part_size: int, threads: int, files: int, part_executor: Executor,
                 algorithm: str | None) -> PendingUpload:
    """One local file as an uncompleted upload of ``key`` (registered in ``started`` once created), every part with
    ``algorithm``'s checksum (as its Create names)."""
    length = os.path.getsize(path)
    # A file with fewer parts than its share of the threads goes up in more, smaller ones (staged_part_size).
    part_size = staged_part_size(length, part_size, max(1, threads // files))
    parts = max(1, -(-length // part_size))
    if parts > MAX_PARTS:
        raise TooManyPartsError(f"{path} ({length} bytes) needs {parts} parts at part size {part_size}; "
                                f"S3 allows {MAX_PARTS}: raise fs.s3a.multipart.size")
    bucket = attempt.bucket
    windows: list[CreateWindow] = []
    created = now_millis()
    upload_id = store.uploads.create_multipart_upload(bucket, key, on_possible_orphan=windows.append,
                                                      checksum_algorithm=algorithm)
    window = windows[0] if windows else None
    started.append(UploadRef(bucket, key, upload_id, window))
    sent: list[SentPart | None] = [None] * parts
    pieces = file_parts(path, part_size)

    def send(number: int) -> None:
        # Each part is read when its upload starts (one part in memory per upload at a time).
        piece = pieces[number - 1]
        try:
            sent[number - 1] = store.uploads.upload_part(bucket, key, upload_id, number, piece.load(),
                                                         checksum_algorithm=algorithm)
        finally:
            piece.release()

    if parts == 1:
        send(1)
    else:
        failures = run_each(part_executor, range(1, parts + 1), send, window=window_for(threads),
                            stop_on_failure=True)
        if failures:
            raise failures[0].error
    partition = partition_of(key.removeprefix(attempt.dest_prefix))
    parts_sent = [part for part in sent if part is not None]
    extra = checksums.record(algorithm, [part.checksum for part in parts_sent if part.checksum])
    if window is not None:
        extra[CREATE_WINDOW_KEY] = window.encode()
    return PendingUpload(bucket=bucket, destination_key=key, upload_id=upload_id,
                         etags=tuple(part.etag for part in parts_sent), length=length,
                         uri=f"s3a://{bucket}/{key}", created=created, saved=now_millis(),
                         text=f"partition: {partition}" if partition else "", extra_data=extra)
