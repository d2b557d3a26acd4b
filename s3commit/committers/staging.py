"""The staging committers (``directory`` and ``partitioned``): task output on local disk, uploaded at task
commit as uncompleted multipart uploads (parallel parts), completed at job commit.

The task's pendingset is saved in S3 under ``dest/__staging_job-U/...`` (S3 is strongly consistent, so no
cluster filesystem is needed as in Hadoop). The upload and the pendingset are an operation of the commit layer
(:func:`s3commit.commit.task_commit.commit_staging_task`); this module owns the local directories, which files
are output and their final names, and the conflict checks.

Conflict modes, Hadoop's semantics except that ``replace`` deletes the old data only *after* the new data is
complete (a failed job leaves the old data intact):

============  ===================================  =======================================
mode          directory                             partitioned
============  ===================================  =======================================
fail          job setup fails if dest has data      task commit fails if a partition has data
append        add files (unique names avoid         add files to partitions
              overwrites)
replace       replace all of dest                   replace each partition written
============  ===================================  =======================================
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Sequence
from typing import IO

from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.task_commit import TaskAttemptRef, commit_staging_task
from s3commit.committers.attempt import TaskAttempt, local_staging_root
from s3commit.committers.base import Committer
from s3commit.config.options import ConflictMode
from s3commit.errors import CommitConflictError
from s3commit.model.manifests import SuccessData
from s3commit.model.paths import (
    STAGING_PATH_PREFIX,
    add_uuid,
    is_scratch_key,
    partition_of,
    relative_key,
)
from s3commit.model.task_message import TaskCommitMessage

log = logging.getLogger(__name__)


def _hidden(name: str) -> bool:
    """Hadoop's HIDDEN_FILE_FILTER: names starting with ``_`` or ``.`` are not task output."""
    return name.startswith(("_", "."))


class StagingTaskAttempt(TaskAttempt):
    """A staging task attempt: files are written to a private local directory."""

    committer: StagingCommitter

    def __init__(self, committer: StagingCommitter, task_attempt_id: str, *, fresh: bool = True) -> None:
        super().__init__(committer, task_attempt_id)
        self.local_dir = os.path.join(committer.local_job_dir, self.task_attempt_id)
        if fresh:
            shutil.rmtree(self.local_dir, ignore_errors=True)
        os.makedirs(self.local_dir, mode=0o700, exist_ok=True)

    @property
    def work_path(self) -> str:
        return self.local_dir

    def open(self, relative_path: str) -> IO[bytes]:
        self.check_open()
        path = os.path.join(self.local_dir, *relative_key(relative_path).split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")

    def output_files(self) -> list[str]:
        """Relative paths of the task's output, hidden files and directories excluded."""
        found = []
        for root, dirs, files in os.walk(self.local_dir):
            dirs[:] = sorted(d for d in dirs if not _hidden(d))
            for name in sorted(files):
                if not _hidden(name):
                    rel = os.path.relpath(os.path.join(root, name), self.local_dir)
                    found.append(rel.replace(os.sep, "/"))
        return found


class StagingCommitter(Committer):
    """Base of ``directory`` and ``partitioned``."""

    name = "staging"
    scratch_prefix = STAGING_PATH_PREFIX

    @property
    def local_job_dir(self) -> str:
        # The job *and* its destination: two jobs on this host that share an id (a session-wide
        # fs.s3a.committer.uuid) never share, nor delete, each other's task files.
        where = hashlib.sha256(str(self.dest).encode()).hexdigest()[:12]
        return os.path.join(local_staging_root(self.options), f"s3commit-{self.job_id}-{where}")

    def final_key(self, relative: str) -> str:
        rel = add_uuid(relative, self.job_id) if self.options.unique_filenames else relative
        return self.dest.child(rel).key

    def _setup_task(self, task_attempt_id: str) -> StagingTaskAttempt:
        self._check_job_open()
        return StagingTaskAttempt(self, task_attempt_id)

    def attach_task(self, task_attempt_id: str) -> StagingTaskAttempt:
        """The attempt set up earlier on this host (its local directory and files are kept)."""
        return StagingTaskAttempt(self, task_attempt_id, fresh=False)

    def needs_task_commit(self, attempt: TaskAttempt) -> bool:
        assert isinstance(attempt, StagingTaskAttempt)
        return bool(attempt.output_files())

    def _check_task_conflicts(self, relatives: list[str]) -> None:
        """Task-level conflict checks (partitioned + fail)."""

    def commit_task(self, attempt: TaskAttempt) -> TaskCommitMessage:
        """Upload every output file as an uncompleted upload and save the task's pendingset
        (:func:`~s3commit.commit.task_commit.commit_staging_task`).

        On any failure every upload made so far is aborted (with any orphan a Create left), the local
        directory deleted, and the error re-raised.
        """
        assert isinstance(attempt, StagingTaskAttempt)
        attempt.check_open()
        self.know_store()  # the parts are checked as the store requires
        try:
            relatives = attempt.output_files()
            if not relatives:
                log.warning("task attempt %s: no files to commit", attempt.task_attempt_id)
            self._check_task_conflicts(relatives)
            files = {os.path.join(attempt.local_dir, *rel.split("/")): self.final_key(rel) for rel in relatives}
            message = commit_staging_task(self.store, self._attempt_ref(attempt), files,
                                          part_size=self.options.part_size, threads=self.options.pool_size,
                                          executor=self.pool, part_executor=self.part_pool,
                                          object_checked=self.options.validate_output)
        finally:
            shutil.rmtree(attempt.local_dir, ignore_errors=True)
        attempt.committed = True
        return message

    def _attempt_ref(self, attempt: StagingTaskAttempt) -> TaskAttemptRef:
        """The attempt as the commit layer's task commit takes it (no attempt directory in S3)."""
        return TaskAttemptRef(bucket=self.dest.bucket, job_id=self.job_id, task_id=attempt.task_id,
                              task_attempt_id=attempt.task_attempt_id,
                              pendingset_key=self.layout.pendingset_key(attempt.task_id), dest_prefix=self.dest.prefix,
                              complete=self.completes_at_task_commit())

    def abort_task(self, attempt: TaskAttempt) -> None:
        """Delete the local output (nothing was uploaded before task commit)."""
        assert isinstance(attempt, StagingTaskAttempt)
        shutil.rmtree(attempt.local_dir, ignore_errors=True)
        attempt.aborted = True

    def _abort_local_state(self) -> None:
        shutil.rmtree(self.local_job_dir, ignore_errors=True)

    def commit_job(self, messages: Sequence[TaskCommitMessage] | None = None, *,
                   delete_paths: Sequence[str] = (), replace_partitions: bool = False,
                   create_only: bool = False) -> SuccessData:
        try:
            return super().commit_job(messages, delete_paths=delete_paths, replace_partitions=replace_partitions,
                                      create_only=create_only)
        finally:
            shutil.rmtree(self.local_job_dir, ignore_errors=True)

    def _has_data(self, prefix: str) -> bool:
        return any(not is_scratch_key(info.key) for info in self.store.objects.list_objects(self.dest.bucket, prefix))


class DirectoryCommitter(StagingCommitter):
    """Conflicts are resolved for the destination as a whole, at job setup (fail) or commit (replace)."""

    name = "directory"

    def _check_job_conflicts(self) -> None:
        if self.dest.key:
            try:
                self.store.objects.head_object(self.dest.bucket, self.dest.key)
            except FileNotFoundError:
                pass
            else:
                raise CommitConflictError(f"output path {self.dest} is a file, not a directory")
        if self.options.conflict_mode is ConflictMode.FAIL and self._has_data(self.dest.prefix):
            raise CommitConflictError(
                f"destination {self.dest} has data and the conflict mode is 'fail' "
                "(fs.s3a.committer.staging.conflict-mode)")

    def job_overwrite_plan(self) -> OverwritePlan:
        if self.options.conflict_mode is ConflictMode.REPLACE:
            return OverwritePlan(delete_paths=("",))
        return OverwritePlan()

    def creates_only(self) -> bool:
        """``fail``: what appears after the conflict check is never replaced (If-None-Match at Complete)."""
        return self.options.conflict_mode is ConflictMode.FAIL


class PartitionedCommitter(StagingCommitter):
    """Conflicts are resolved per partition (the parent directory of each file)."""

    name = "partitioned"

    def _check_task_conflicts(self, relatives: list[str]) -> None:
        if self.options.conflict_mode is not ConflictMode.FAIL:
            return
        partitions = {p for r in relatives if (p := partition_of(r)) is not None}
        for partition in sorted(partitions):
            if self._has_data(self.dest.child(partition).prefix):
                raise CommitConflictError(
                    f"partition {self.dest.child(partition)} has data and the conflict mode is 'fail'")

    def job_overwrite_plan(self) -> OverwritePlan:
        return OverwritePlan(replace_partitions=self.options.conflict_mode is ConflictMode.REPLACE)

