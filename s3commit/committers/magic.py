"""The magic committer: files stream to S3 as uploads that only the job commit completes.

Writing to a *magic path* (``dest/__magic_job-U/job-U/00/tasks/<attempt>/__base/<relative>``) starts an
upload for the *final* key (``dest/<relative>``), created in the background as the file opens; closing the
file defers its completion to the job commit. Task commit gathers the attempt's pending uploads into
``<taskId>.pendingset`` (last attempt wins); task abort aborts every upload the attempt started: both are
operations of the commit layer (:mod:`s3commit.commit.task_commit`), called here once the attempt's files are
closed (commit) or aborted (abort). Job commit is :mod:`s3commit.commit.engine`.

By default (``track_commits_in_memory``, S3A's ``fs.s3a.committer.magic.track.commits.in.memory.enabled``)
the pending uploads live only in the memory of the process that wrote them (:mod:`s3commit.commit.task_registry`):
a file's close returns while its last part uploads, and the task commit waits for them, then writes the
``.pendingset``, one PUT, with nothing to list, read or delete. Off, each close saves ``<magic path>.pending``
(Hadoop's per-file manifests) and the task commit lists the attempt directory and deletes it.
:func:`open_magic_file` serves any magic path without a committer object; the JVM filesystem uses it through the
sidecar.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import IO

from s3commit.commit.manifest_store import save_pending_upload
from s3commit.commit.process_state import THIS_PROCESS
from s3commit.commit.task_commit import TaskAttemptRef, abort_magic_task, commit_magic_task
from s3commit.commit.task_registry import MagicTaskRegistry
from s3commit.commit.upload_actions import abort_upload_quietly
from s3commit.committers.attempt import TaskAttempt
from s3commit.committers.base import Committer
from s3commit.config.options import CommitterOptions, TrackUploads
from s3commit.errors import CommitStateError, ConfigError
from s3commit.model.manifests import PendingUpload
from s3commit.model.markers import UploadMarker
from s3commit.model.object_info import CreateWindow, UploadRef
from s3commit.model.paths import (
    ABSOLUTE,
    PENDING_SUFFIX,
    UPLOAD_MARKER_SUFFIX,
    absolute_relative,
    carries_job_id,
    is_magic_file_key,
    job_id_of_magic_key,
    magic_element_index,
    magic_key_to_final,
    relative_key,
    split_elements,
    task_attempt_id_of_magic_key,
)
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import window_for
from s3commit.transfer.writer import CompletionPolicy, MultipartWriter


class MagicCompletion(CompletionPolicy):
    """Defer completion: on close save ``<magic path>.pending``; optionally record the upload at start, and
    always when its Create lost an answer (the record then keeps the Create's window)."""

    may_defer = True
    orphans_to_job = True

    def __init__(self, store: S3Store, *, bucket: str, magic_key: str, job_id: str, task_attempt_id: str,
                 track: bool, registry: MagicTaskRegistry, in_memory: bool = False, budget: int = 0) -> None:
        # A file recorded durably (an upload marker: its key lacks the job id, or lies outside the destination)
        # is created synchronously, so that its record exists once the first part is queued, as before.
        self.finish_later, self.create_early = in_memory, in_memory and not track
        self.in_memory = in_memory
        self.budget = budget
        self.store = store
        self.bucket = bucket
        self.magic_key = magic_key
        self.job_id = job_id
        self.task_attempt_id = task_attempt_id
        self.track = track
        self.registry = registry

    def upload_started(self, *, bucket: str, key: str, upload_id: str) -> None:
        if not self.registry.started(self.job_id, self.task_attempt_id, bucket=bucket, key=key,
                                     upload_id=upload_id):
            abort_upload_quietly(self.store, bucket, key, upload_id)
            raise self._closed_error(f"s3://{bucket}/{key} was being opened")
        if self.track:
            # Durable record so an abort from another process (or after a crash) can find this upload.
            self._record(UploadRef(bucket, key, upload_id))

    def create_was_ambiguous(self, *, bucket: str, key: str, upload_id: str, window: CreateWindow) -> None:
        # The Create may have left an orphan of this key that only the window identifies: record it durably,
        # whatever `track` says (a job id in the key finds the orphan too, but not once the task is gone).
        self._record(UploadRef(bucket, key, upload_id, window))

    def _record(self, ref: UploadRef) -> None:
        self.registry.recorded_durably(self.job_id, self.task_attempt_id)
        self.store.objects.put_object(self.bucket, self.magic_key + UPLOAD_MARKER_SUFFIX, UploadMarker.encode(ref),
                                      content_type="application/json")

    def closing(self, held: int) -> None:
        if not self.registry.closing(self.job_id, self.task_attempt_id, self.magic_key + PENDING_SUFFIX, held,
                                     budget=self.budget):
            raise self._closed_error(f"s3a://{self.bucket}/{self.magic_key} was being closed")

    def close_failed(self, error: BaseException) -> None:
        self.registry.close_failed(self.job_id, self.task_attempt_id, self.magic_key + PENDING_SUFFIX, error)

    def upload_ready(self, pending: PendingUpload) -> bool:
        key = self.magic_key + PENDING_SUFFIX
        if self.in_memory and self.registry.finished(self.job_id, self.task_attempt_id, key, pending):
            return False
        if not self.in_memory and not self.registry.is_closed(self.job_id, self.task_attempt_id):
            self.registry.recorded_durably(self.job_id, self.task_attempt_id)
            save_pending_upload(self.store, self.bucket, key, pending)
            if self.registry.finished(self.job_id, self.task_attempt_id, key, pending):
                return False
            self.store.objects.delete_objects(self.bucket, [key])
        abort_upload_quietly(self.store, pending.bucket, pending.destination_key, pending.upload_id)
        raise self._closed_error(f"s3://{pending.bucket}/{pending.destination_key} was being closed")

    def _closed_error(self, what: str) -> CommitStateError:
        return CommitStateError(f"task attempt {self.task_attempt_id} of job {self.job_id} was aborted or committed "
                                f"while {what}: its upload was aborted")

    def upload_aborted(self, *, bucket: str, key: str, upload_id: str) -> None:
        self.registry.aborted(self.job_id, self.task_attempt_id, upload_id)


def open_magic_file(store: S3Store, uri: str | S3Uri, *, options: CommitterOptions | None = None,
                    executor: Executor | None = None, registry: MagicTaskRegistry | None = None,
                    content_type: str | None = None) -> MultipartWriter:
    """Open a writer for a magic path: the upload targets the final key and is completed at job commit. ``registry``:
    the task attempts of the process that writes it (default: this process's own, :data:`THIS_PROCESS`).

    Raises:
        ConfigError: the path is not a magic file path.
    """
    registry = registry if registry is not None else THIS_PROCESS.tasks
    target = uri if isinstance(uri, S3Uri) else S3Uri.parse(uri)
    if not is_magic_file_key(target.key):
        raise ConfigError(f"{target} is not a magic path (no __magic_job- element, or a manifest name)")
    options = options or CommitterOptions()
    final_key = magic_key_to_final(target.key)
    job_id = job_id_of_magic_key(target.key)
    attempt = task_attempt_id_of_magic_key(target.key)
    if registry.is_closed(job_id, attempt):
        raise CommitStateError(f"task attempt {attempt} of job {job_id} was aborted or committed: it cannot open "
                               f"{target}")
    # Recorded by default when no sweep can tell the upload is this job's: a key without the job id, or a
    # key outside the destination (an absolute location), where the destination's sweep does not look.
    elements = split_elements(target.key)
    outside = ABSOLUTE in elements[magic_element_index(elements) + 1:]
    track = {TrackUploads.ALWAYS: True, TrackUploads.NEVER: False}.get(
        options.track_uploads, not carries_job_id(final_key, job_id) or outside)
    policy = MagicCompletion(store, bucket=target.bucket, magic_key=target.key, job_id=job_id,
                             task_attempt_id=attempt, track=track, registry=registry,
                             in_memory=options.track_commits_in_memory,
                             budget=options.max_in_flight * options.part_size)
    return MultipartWriter(store, target.bucket, final_key, part_size=options.part_size,
                           max_in_flight=options.max_in_flight, executor=executor, policy=policy,
                           uri=f"s3a://{target.bucket}/{target.key}", content_type=content_type,
                           checksum_algorithm=store.uploads.checksum_algorithm(
                               target.bucket, object_checked=options.validate_output))


class MagicTaskAttempt(TaskAttempt):
    """A magic task attempt: files stream to S3 under the attempt's ``__base``."""

    committer: MagicCommitter

    def __init__(self, committer: MagicCommitter, task_attempt_id: str) -> None:
        super().__init__(committer, task_attempt_id)
        self.base_key = committer.layout.task_attempt_base(self.task_attempt_id)
        self.dir_key = committer.layout.task_attempt_dir(self.task_attempt_id)
        self._writers: list[MultipartWriter] = []

    @property
    def work_path(self) -> str:
        return f"s3://{self.committer.dest.bucket}/{self.base_key}"

    def open(self, relative_path: str) -> IO[bytes]:
        self.check_open()
        rel = relative_key(relative_path)
        writer = open_magic_file(self.committer.store, S3Uri(self.committer.dest.bucket, f"{self.base_key}/{rel}"),
                                 options=self.committer.options, executor=self.committer.part_pool,
                                 registry=self.committer.process.tasks)
        self._writers.append(writer)
        return writer  # type: ignore[return-value]

    def absolute_work_path(self, location: str, name: str) -> str:
        """Where an engine writes a file bound for ``<location>/<name>`` (outside the destination, same
        bucket): a magic path whose upload targets that key."""
        target = S3Uri.from_location(location)
        if target.bucket != self.committer.dest.bucket:
            raise ConfigError(f"cannot write {name!r} to {location}: the magic committer writes outside its "
                              f"destination {self.committer.dest} only within the same bucket")
        return f"s3://{target.bucket}/{self.dir_key}/{absolute_relative(target.key, name)}"

    def open_absolute(self, location: str, name: str) -> IO[bytes]:
        self.check_open()
        writer = open_magic_file(self.committer.store, self.absolute_work_path(location, name),
                                 options=self.committer.options, executor=self.committer.part_pool,
                                 registry=self.committer.process.tasks)
        self._writers.append(writer)
        return writer  # type: ignore[return-value]

    def unclosed_writers(self) -> list[MultipartWriter]:
        return [w for w in self._writers if not w.closed]


class MagicCommitter(Committer):
    """Streams task output to S3; nothing is visible before the job commits."""

    name = "magic"

    def _setup_task(self, task_attempt_id: str) -> MagicTaskAttempt:
        self._check_job_open()
        self.know_store()  # the attempt's parts are checked as the store requires
        attempt = MagicTaskAttempt(self, task_attempt_id)
        self.process.tasks.opened(self.job_id, attempt.task_attempt_id)
        return attempt

    def attach_task(self, task_attempt_id: str) -> MagicTaskAttempt:
        """The attempt, rebuilt for its commit or abort: unlike :meth:`setup_task` it does not make this
        process the attempt's (a commit in a process that did not set it up must not pass for an empty one)."""
        self._check_job_open()
        return MagicTaskAttempt(self, task_attempt_id)

    def _end_task_attempts(self) -> None:
        self.process.tasks.end_job(self.job_id)

    def commit_task(self, attempt: TaskAttempt) -> TaskCommitMessage:
        assert isinstance(attempt, MagicTaskAttempt)
        attempt.check_open()
        for writer in attempt.unclosed_writers():
            raise CommitStateError(f"task attempt {attempt.task_attempt_id} still has an open file "
                                   f"s3://{writer.bucket}/{writer.key}: close it before committing")
        ref = self._attempt_ref(attempt, complete=self.completes_at_task_commit())
        message = commit_magic_task(self.store, ref, executor=self.pool,
                                    window=window_for(self.options.pool_size),
                                    in_memory=self.options.track_commits_in_memory, registry=self.process.tasks)
        attempt.committed = True
        return message

    def abort_task(self, attempt: TaskAttempt) -> None:
        assert isinstance(attempt, MagicTaskAttempt)
        for writer in attempt.unclosed_writers():
            writer.abort()
        abort_magic_task(self.store, self._attempt_ref(attempt), registry=self.process.tasks)
        attempt.aborted = True

    def _attempt_ref(self, attempt: MagicTaskAttempt, *, complete: bool = False) -> TaskAttemptRef:
        """The attempt as the commit layer's task commit and abort take it."""
        return TaskAttemptRef(bucket=self.dest.bucket, job_id=self.job_id, task_id=attempt.task_id,
                              task_attempt_id=attempt.task_attempt_id,
                              pendingset_key=self.layout.pendingset_key(attempt.task_id),
                              attempt_dir=attempt.dir_key, dest_prefix=self.dest.prefix,
                              complete=complete)
