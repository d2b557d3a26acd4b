"""Committed writes from Dask: ``to_parquet(ddf, "s3://bucket/table", ...)``, exactly once.

Each Dask partition is one task of one s3commit job, and each *execution* of it is a new task attempt (a task
retried, or recomputed after its worker was lost, never reuses an attempt): it writes one Parquet file per
partition value (``part.<i>-<job id>.parquet``, under hive-style ``col=value/`` directories with
``partition_on``), and commits its attempt in the same worker process. The client commits the job once every
partition has committed. A failure cancels what has not run, aborts the job and raises.

A *fence* keeps an aborted job aborted: the client marks the job aborted, then aborts it holding the job's
lock; a task commits its attempt only holding that lock, after checking the mark, so a task still running
when the job failed (or re-run after a worker loss) aborts its own uploads instead of committing them. With a
``dask.distributed`` client the fence is a distributed ``Event`` and ``Lock``; with the threaded scheduler,
in-process ones. (Dask's multiprocessing scheduler is not supported: its processes share neither.)

With Dask's local schedulers the client tells the job of each partition's commit as the task finishes (a
``dask.callbacks.Callback``), so that its pendingset is read while the other partitions run, as Spark's driver
does (:meth:`~s3commit.committers.base.Committer.task_committed`): the job commit then starts with them read. A
``dask.distributed`` client hands every message over at the end, and the job commit reads them then.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Sequence
from typing import Any

from s3commit.committers.base import Committer
from s3commit.engines import common
from s3commit.errors import CommitStateError, ConfigError, S3CommitError
from s3commit.model.task_message import TaskCommitMessage
from s3commit.store import moto_inprocess
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)


class _LocalFence:
    """The fence of the threaded scheduler: the tasks run in this process."""

    _flags: dict[str, threading.Event] = {}
    _locks: dict[str, threading.Lock] = {}
    _guard = threading.Lock()

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        with self._guard:
            self._flags.setdefault(job_id, threading.Event())
            self._locks.setdefault(job_id, threading.Lock())

    def aborted(self) -> bool:
        return self._flags[self.job_id].is_set()

    def abort(self) -> None:
        self._flags[self.job_id].set()

    def lock(self) -> Any:
        return self._locks[self.job_id]


class _ClusterFence:
    """The fence of a ``dask.distributed`` cluster: an Event and a Lock on the scheduler, by name."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id

    def aborted(self) -> bool:
        from distributed import Event

        return bool(Event(f"s3commit-aborted-{self.job_id}").is_set())

    def abort(self) -> None:
        from distributed import Event

        Event(f"s3commit-aborted-{self.job_id}").set()

    def lock(self) -> Any:
        from distributed import Lock

        return Lock(f"s3commit-commit-{self.job_id}")


def _fence(job_id: str) -> _LocalFence | _ClusterFence:
    try:
        from distributed import default_client

        default_client()
    except (ImportError, ValueError):
        return _LocalFence(job_id)
    return _ClusterFence(job_id)


def _tasks_in_other_processes(compute_kwargs: dict[str, Any]) -> bool:
    """Whether Dask runs the tasks in other processes: its multiprocessing scheduler, or a ``distributed``
    cluster whose scheduler is not in this process (a ``Client(processes=False)`` one is: ``inproc://``)."""
    import dask

    scheduler = compute_kwargs.get("scheduler") or dask.config.get("scheduler", None)
    if isinstance(scheduler, str) and scheduler not in ("dask.distributed", "distributed"):
        return scheduler in ("processes", "multiprocessing")
    rpc = getattr(scheduler, "scheduler", None)  # a distributed Client given as the scheduler
    if rpc is None:
        try:
            from distributed import default_client

            rpc = default_client().scheduler
        except (ImportError, ValueError):
            return False
    return not str(getattr(rpc, "address", "")).startswith("inproc://")


def _write_partition(payload: bytes, index: int, frame: Any, partition_on: Sequence[str],
                     writer_options: dict[str, Any], fence: _LocalFence | _ClusterFence) -> TaskCommitMessage:
    """One execution of one partition's task, in the worker: a new attempt, its files, its commit."""
    import pyarrow as pa

    job = common.worker_job(pickle.loads(payload))
    attempt = job.setup_task(common.execution_attempt_id(index))
    try:
        if fence.aborted():
            raise CommitStateError(f"job {job.job_id} was aborted: partition {index} is not written")
        common.write_parquet_partitions(attempt, pa.Table.from_pandas(frame, preserve_index=False), partition_on,
                                        f"part.{index}-{job.job_id}.parquet", writer_options)
        with fence.lock():
            if fence.aborted():
                raise CommitStateError(f"job {job.job_id} was aborted while partition {index} was written")
            return job.commit_task(attempt)
    except BaseException:
        job.abort_task(attempt)
        raise


def _read_ahead(job: Committer, tasks: Sequence[Any]) -> Any:
    """A callback of Dask's local schedulers (which call it in the client as each task finishes; a distributed
    scheduler does not) telling ``job`` of each partition's commit: its pendingset read from then on."""
    from dask.callbacks import Callback

    keys = {task.key for task in tasks}

    def finished(key: Any, result: Any, *_: Any) -> None:
        if key in keys and isinstance(result, TaskCommitMessage):
            try:
                job.task_committed(result)
            except S3CommitError as err:  # (optional: the job commit reads what it was not told of)
                log.debug("job %s: partition commit not read ahead: %s", job.job_id, err)

    return Callback(posttask=finished)


def to_parquet(ddf: Any, dest: str, *, partition_on: Sequence[str] | None = None, mode: str = "append",
               committer: str = "magic", store: S3Store | None = None, job_id: str | None = None,
               compute_kwargs: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """Write a Dask DataFrame to ``dest`` as one committed job; returns the ``_SUCCESS`` data.

    Args:
        ddf: the Dask DataFrame; each of its partitions is one task.
        dest: ``s3://bucket/path``.
        partition_on: columns for hive-style directories (one file per partition and value, as Dask writes).
        mode: ``append``, ``overwrite``, ``overwrite-partitions`` or ``error`` (:mod:`s3commit.engines.common`).
        committer: ``magic`` (default), ``directory`` or ``partitioned``.
        store: the S3 store; it is pickled to the workers (its options, not its client).
        compute_kwargs: passed to ``dask.compute`` (``scheduler=``...).
        options: committer options (``threads``, ``part_size``, ...) and ``pyarrow.parquet.write_table``'s
            (``compression``, ``row_group_size``, ...).

    Raises:
        ConfigError: bad input, before anything is written; :class:`~s3commit.store.moto_inprocess.InProcessMockError`
            inside moto's in-process mock (``mock_aws``) when the tasks would run in other processes.
        CommitConflictError: ``mode="error"`` and the destination holds data.
    """
    import dask

    committer_options, writer_options = common.split_options(options)
    common.check_mode(mode)
    columns = list(getattr(ddf, "columns", []))
    missing = [c for c in partition_on or () if c not in columns]
    if missing:
        raise ConfigError(f"to_parquet: partition column(s) {', '.join(missing)} not in the frame's columns "
                          f"({', '.join(map(str, columns))})")
    store = store or S3Store()
    if moto_inprocess.started() and _tasks_in_other_processes(compute_kwargs or {}):
        moto_inprocess.refuse_other_processes("Dask's tasks run in worker processes here",
                                              lambda: store.requests.client)
    job = common.new_job(dest, committer=committer, mode=mode, store=store, job_id=job_id,
                         options=committer_options)
    fence = _fence(job.job_id)
    payload = pickle.dumps(job)
    tasks = [dask.delayed(_write_partition, pure=False)(payload, i, part, list(partition_on or ()), writer_options,
                                                         fence)
             for i, part in enumerate(ddf.to_delayed())]
    try:
        with _read_ahead(job, tasks):
            messages = dask.compute(*tasks, **(compute_kwargs or {}))
    except BaseException:
        fence.abort()
        with fence.lock():  # no task is committing now, and none will: every commit is aborted by the job
            job.abort_job()
        raise
    return common.commit(job, messages, mode)
