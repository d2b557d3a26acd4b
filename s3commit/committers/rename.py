"""The rename baseline: Hadoop FileOutputCommitter's algorithms v1 and v2 over S3 (copy + delete).

This is what Spark does by default, and why it is slow and unsafe on S3: a "rename" is a server-side COPY
of every byte and a DELETE, file by file. v1 renames twice (task commit into ``_temporary/0/<task>``, job
commit into the destination); v2 renames once, at task commit, straight into the destination (so output
is visible before the job commits). Kept only so benchmarks and tests can compare against it on the same
store; it writes Hadoop's 0-byte ``_SUCCESS``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO

from s3commit.commit.prefixes import delete_prefix
from s3commit.committers.attempt import TaskAttempt
from s3commit.committers.base import Committer
from s3commit.model.manifests import SuccessData
from s3commit.model.object_info import ObjectInfo
from s3commit.model.paths import relative_key
from s3commit.model.task_message import TaskCommitMessage
from s3commit.transfer.parallel import run_each, window_for
from s3commit.transfer.writer import MultipartWriter

log = logging.getLogger(__name__)

TEMPORARY = "_temporary"
RENAME_PARALLELISM = 10
"""Parallel COPYs in one directory rename: S3A's rename runs a bounded number of copies at once (10)."""


class RenameTaskAttempt(TaskAttempt):
    """Files are written (and completed: visible) under ``dest/_temporary/0/_temporary/<attempt>``."""

    committer: RenameCommitter

    @property
    def dir_key(self) -> str:
        return self.committer.dest.child(f"{TEMPORARY}/0/{TEMPORARY}/{self.task_attempt_id}").key

    @property
    def work_path(self) -> str:
        return f"s3://{self.committer.dest.bucket}/{self.dir_key}"

    def open(self, relative_path: str) -> IO[bytes]:
        self.check_open()
        key = f"{self.dir_key}/{relative_key(relative_path)}"
        options = self.committer.options
        return MultipartWriter(self.committer.store, self.committer.dest.bucket, key,  # type: ignore[return-value]
                               part_size=options.part_size, max_in_flight=options.max_in_flight,
                               executor=self.committer.part_pool)


class RenameCommitter(Committer):
    """FileOutputCommitter over S3; ``algorithm`` 1 or 2."""

    algorithm = 1

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"rename-v{self.algorithm}"

    @property
    def committed_tasks_key(self) -> str:
        return self.dest.child(f"{TEMPORARY}/0").key

    def _setup_task(self, task_attempt_id: str) -> RenameTaskAttempt:
        self._check_job_open()
        return RenameTaskAttempt(self, task_attempt_id)

    def rename_dir(self, src_prefix: str, dst_prefix: str) -> tuple[int, int]:
        """S3A's directory rename: copy every object under ``src_prefix`` (at most
        :data:`RENAME_PARALLELISM` at once), then delete the sources in bulk. Returns (files, bytes)."""
        bucket = self.dest.bucket
        sources: list[ObjectInfo] = list(self.store.objects.list_objects(bucket, src_prefix))
        with ThreadPoolExecutor(RENAME_PARALLELISM, thread_name_prefix="s3commit-rename") as pool:
            failures = run_each(pool, sources, lambda o: self.store.objects.copy_object(
                bucket, o.key, dst_prefix + o.key[len(src_prefix):], size=o.size),
                window=window_for(RENAME_PARALLELISM), stop_on_failure=True)
        if failures:
            raise failures[0].error
        self.store.objects.delete_objects(bucket, (o.key for o in sources))
        return len(sources), sum(o.size for o in sources)

    def merge_paths(self, src_prefix: str, dst_prefix: str) -> tuple[int, int]:
        """FileOutputCommitter's ``mergePaths``, one level at a time: a file is renamed on its own (COPY +
        DELETE, in sequence); a directory missing at the destination is renamed whole; one that exists is
        merged recursively. This is what makes a v1 job commit slow: files merge one after another."""
        bucket = self.dest.bucket
        files = size = 0
        for child in self.store.objects.list_objects(bucket, src_prefix, delimiter="/"):
            target = dst_prefix + child.key[len(src_prefix):]
            if not child.is_prefix:
                self.store.objects.copy_object(bucket, child.key, target, size=child.size)
                self.store.objects.delete_object(bucket, child.key)
                files, size = files + 1, size + child.size
                continue
            exists = any(True for _ in self.store.objects.list_objects(bucket, target))
            n, b = self.merge_paths(child.key, target) if exists else self.rename_dir(child.key, target)
            files, size = files + n, size + b
        return files, size

    def commit_task(self, attempt: TaskAttempt) -> TaskCommitMessage:
        assert isinstance(attempt, RenameTaskAttempt)
        attempt.check_open()
        if self.algorithm == 1:
            # v1: rename the attempt directory to the committed task directory (one directory rename).
            target = f"{self.committed_tasks_key}/{attempt.task_id}/"
            delete_prefix(self.store, self.dest.bucket, target)  # an earlier attempt's commit
            files, size = self.rename_dir(f"{attempt.dir_key}/", target)
        else:
            # v2: merge the attempt's files straight into the destination (visible before job commit).
            files, size = self.merge_paths(f"{attempt.dir_key}/", self.dest.prefix)
        attempt.committed = True
        return TaskCommitMessage(job_id=self.job_id, task_id=attempt.task_id,
                                 task_attempt_id=attempt.task_attempt_id, pendingset_key=None,
                                 files=files, bytes=size)

    def abort_task(self, attempt: TaskAttempt) -> None:
        assert isinstance(attempt, RenameTaskAttempt)
        delete_prefix(self.store, self.dest.bucket, f"{attempt.dir_key}/")
        attempt.aborted = True

    def take_lease_ahead(self) -> None:
        """The baseline takes no lease (see :meth:`commit_job`)."""

    def commit_job(self, messages: Sequence[TaskCommitMessage] | None = None, *,
                   delete_paths: Sequence[str] = (), replace_partitions: bool = False,
                   create_only: bool = False) -> SuccessData:
        """v1: merge every committed task directory into the destination; both: delete ``_temporary``,
        write the 0-byte ``_SUCCESS``. Overwrite deletions happen here too (Spark deletes before the job). The
        baseline takes no lease and checks no ``create_only``: it is FileOutputCommitter's behaviour."""
        self._check_job_open()
        bucket = self.dest.bucket
        files = size = 0
        try:
            if self.algorithm == 1:
                tasks = sorted({m.task_id for m in (messages or []) if m is not None})
                if messages is None:
                    tasks = [o.key.rstrip("/").rsplit("/", 1)[-1] for o in self.store.objects.list_objects(
                        bucket, f"{self.committed_tasks_key}/", delimiter="/") if o.is_prefix
                        and not o.key.endswith(f"{TEMPORARY}/")]
                for task_id in tasks:
                    n, b = self.merge_paths(f"{self.committed_tasks_key}/{task_id}/", self.dest.prefix)
                    files, size = files + n, size + b
            else:
                files = sum(m.files for m in messages or [] if m is not None)
                size = sum(m.bytes for m in messages or [] if m is not None)
            delete_prefix(self.store, bucket, f"{self.committed_tasks_key.rsplit('/', 1)[0]}/")
            if self.options.success_marker:
                self.store.objects.put_object(bucket, self.layout.success_key, b"")
        finally:
            self.process.keepers.release(self.dest, self.job_id)
            self.close()
        self._state = "committed"
        requests = self.store.counters.snapshot()["requests"]
        return SuccessData(committer=self.name, job_id=self.job_id,
                           metrics={"committer_files": files, "committer_bytes_committed": size,
                                    **{f"op_{k}": v for k, v in sorted(requests.items())}})

    def _abort_job(self, *, quiet: bool, lease: object = None) -> None:
        delete_prefix(self.store, self.dest.bucket, f"{self.committed_tasks_key.rsplit('/', 1)[0]}/")
        self.close()


class RenameV1Committer(RenameCommitter):
    algorithm = 1


class RenameV2Committer(RenameCommitter):
    algorithm = 2
