"""Committed writes from Ray Data: ``ds.write_datasink(CommitDatasink("s3://bucket/table", ...))``.

Each execution of a Ray write task is one task attempt of one s3commit job: it writes its blocks as Parquet
files (``part-<task>-<n>-<job id>.parquet``, under hive-style ``col=value/`` directories with
``partition_cols``) and commits its attempt in the worker; ``on_write_complete`` commits the job on the
driver with every task's commit message, ``on_write_failed`` aborts it. A task retried as a new task (a killed
worker, ``ray_remote_args={"retry_exceptions": ...}``) or re-run in place (``DataContext.retried_map_errors``
re-runs the task's chain with the same ``TaskContext``, whose ``task_idx`` is therefore not an attempt id) is
a new attempt each time: an execution that fails aborts its own uploads, and a killed one's are aborted by
the job's clean-up (the job id is in every file name). Only the attempts whose messages reach the driver
are committed: every row exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ray.data import Datasink

from s3commit.committers import create_committer
from s3commit.engines import common
from s3commit.errors import ConfigError
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store import moto_inprocess
from s3commit.store.s3store import S3Store


class CommitDatasink(Datasink):
    """A Ray Data sink that writes Parquet through one s3commit job (see the module docstring).

    Args:
        dest: ``s3://bucket/path``.
        format: ``parquet`` (the one format written today).
        partition_cols: columns for hive-style directories.
        mode: ``append``, ``overwrite``, ``overwrite-partitions`` or ``error`` (:mod:`s3commit.engines.common`).
        committer: ``magic`` (default), ``directory`` or ``partitioned``.
        store: the S3 store; pickled to the workers (its options, not its client).
        options: committer options and ``pyarrow.parquet.write_table``'s (``compression``...).

    After ``write_datasink`` returns, :attr:`result` holds the ``_SUCCESS`` data.

    Raises:
        ConfigError: bad input, when the sink is made (before anything is written);
            :class:`~s3commit.store.moto_inprocess.InProcessMockError` inside moto's in-process mock (``mock_aws``).
    """

    def __init__(self, dest: str, *, format: str = "parquet", partition_cols: Sequence[str] | None = None,
                 mode: str = "append", committer: str = "magic", store: S3Store | None = None,
                 job_id: str | None = None, **options: Any) -> None:
        if format != "parquet":
            raise ConfigError(f"CommitDatasink: format {format!r} is not valid. Valid values are: parquet")
        self.dest = str(S3Uri.parse(dest))
        self.mode = common.check_mode(mode)
        self.partition_cols = list(partition_cols or ())
        committer_options, self.writer_options = common.split_options(options)
        # Made here, not at write start, so that the workers' pickled copies share its job id.
        self.job = create_committer(committer, dest, store=store, job_id=job_id, **committer_options)
        moto_inprocess.refuse_other_processes("Ray Data's write tasks run in Ray's worker processes",
                                              lambda: self.job.store.requests.client)
        self.result: dict[str, Any] | None = None

    def get_name(self) -> str:
        return "S3Commit"

    def on_write_start(self, schema: Any = None) -> None:
        missing = [c for c in self.partition_cols if schema is not None and c not in schema.names]
        if missing:
            raise ConfigError(f"CommitDatasink: partition column(s) {', '.join(missing)} not in the data's "
                              f"columns ({', '.join(schema.names)})")
        common.start(self.job, self.mode)

    def write(self, blocks: Iterable[Any], ctx: Any) -> TaskCommitMessage:
        from ray.data.block import BlockAccessor

        job = common.worker_job(self.job)  # this worker's copy of the job, shared by its tasks
        attempt = job.setup_task(common.execution_attempt_id(int(ctx.task_idx)))
        try:
            for n, block in enumerate(blocks):
                common.write_parquet_partitions(attempt, BlockAccessor.for_block(block).to_arrow(),
                                                self.partition_cols,
                                                f"part-{int(ctx.task_idx):05d}-{n}-{job.job_id}.parquet",
                                                self.writer_options)
            return job.commit_task(attempt)
        except BaseException:
            job.abort_task(attempt)
            raise

    def on_write_complete(self, write_result: Any) -> None:
        returns = getattr(write_result, "write_returns", write_result)
        self.result = common.commit(self.job, [m for m in returns if m is not None], self.mode)

    def on_write_failed(self, error: Exception) -> None:
        self.job.abort_job()

