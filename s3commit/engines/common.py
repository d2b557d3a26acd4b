"""What the Python engines' committed writes share (:mod:`s3commit.arrow`, :mod:`s3commit.dask`,
:mod:`s3commit.ray`): the write modes, the options split between the committer and the engine, the check of
``mode="error"``, the job commit with the mode's overwrite plan, a task attempt id unique to each execution of a
task, and the split of one task's rows into hive partition files (:func:`write_parquet_partitions`, for Dask and
Ray).

Modes: ``append`` adds files; ``overwrite`` replaces the whole destination, whose old objects are deleted only
after every new file is complete (a failed job keeps them); ``overwrite-partitions`` replaces only the
partition directories the job wrote; ``error`` refuses a destination that holds any object, before anything
is written.
"""

from __future__ import annotations

import hashlib
import pickle
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from s3commit.committers import create_committer
from s3commit.committers.base import Committer
from s3commit.config.options import CommitterOptions
from s3commit.errors import CommitConflictError, ConfigError
from s3commit.model.paths import TaskAttemptId
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

MODES = ("append", "overwrite", "overwrite-partitions", "error")
WRITE_BUFFER = 1024 * 1024
"""Bytes pyarrow's output to one file gathers in C++ before one call into the attempt's Python file. pyarrow's
writers call their stream once per page and footer piece (12,000 calls of 8 B to 128 KiB for 1,000,000 rows in 16
Parquet files): behind this buffer, one call per MiB. Per open file (a dataset of 200 partitions open at once holds
200 MiB). Measured on issue 48's table (4,000,000 rows, 16 partition files): the writing process's CPU went from
1.53x pyarrow's own S3 writer's to 1.35x."""


def native_stream(out: Any) -> Any:
    """A pyarrow output stream over the attempt's file ``out`` that calls it once per :data:`WRITE_BUFFER` bytes
    (closing the stream flushes and closes ``out``)."""
    import pyarrow as pa

    return pa.BufferedOutputStream(pa.PythonFile(out, mode="w"), buffer_size=WRITE_BUFFER)


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The directory value of a null partition value: Hive's, which pyarrow's and Spark's readers read back as null."""


def write_parquet_partitions(attempt: Any, table: Any, columns: Sequence[str], name: str,
                             writer_options: Mapping[str, Any]) -> None:
    """Write the pyarrow ``table`` as the attempt's Parquet file ``name``, one per distinct value combination of
    ``columns`` under hive-style directories (``day=2026-11-25/name``), in the order of those values, the
    partition columns dropped from the files. The split stays in Arrow (one hash grouping, one ``take`` per
    partition): Ray's blocks are Arrow already, and a Dask partition is converted once, so every partition's
    file has the frame's one schema."""
    import pyarrow.parquet as pq

    for directory, part in _partitions(table, list(columns)):
        with attempt.open(f"{directory}/{name}" if directory else name) as out, native_stream(out) as stream:
            pq.write_table(part, stream, **writer_options)


def _partitions(table: Any, columns: list[str]) -> Any:
    if not columns:
        yield "", table
        return
    import numpy as np
    import pyarrow as pa

    rows = "__s3commit_row"
    keyed = table.select(columns).append_column(rows, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    groups = keyed.group_by(columns, use_threads=False).aggregate([(rows, "list")])
    groups = groups.sort_by([(c, "ascending") for c in columns])
    data = table.drop_columns(columns)
    lists = groups[f"{rows}_list"].combine_chunks()
    for values, indices in zip(groups.select(columns).to_pylist(), lists, strict=True):
        directory = "/".join(f"{c}={NULL_PARTITION if values[c] is None else values[c]}" for c in columns)
        yield directory, data.take(indices.values)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ConfigError(f"mode {mode!r} is not valid. Valid values are: {', '.join(MODES)}")
    return mode


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(committer options, engine options)``: the names of :class:`CommitterOptions` go to the committer."""
    names = CommitterOptions.field_names()
    return ({k: v for k, v in options.items() if k in names}, {k: v for k, v in options.items() if k not in names})


def new_job(dest: str, *, committer: str, mode: str, store: S3Store | None, job_id: str | None,
            options: Mapping[str, Any]) -> Committer:
    """A committer for one write, its job set up; ``mode="error"`` checked first (nothing written if it fails).

    Raises:
        ConfigError: a bad mode, destination or option.
        CommitConflictError: ``mode="error"`` and the destination holds an object.
    """
    check_mode(mode)
    job = create_committer(committer, S3Uri.parse(dest), store=store, job_id=job_id, **options)
    start(job, mode)
    return job


def start(job: Committer, mode: str) -> None:
    """Set up ``job``'s job; ``mode="error"`` checked first (nothing written if it fails)."""
    if mode == "error":
        dest = job.dest
        existing = next(iter(job.store.objects.list_objects(dest.bucket, dest.prefix)), None)
        if existing is not None:
            raise CommitConflictError(f"{dest} already holds data (s3://{dest.bucket}/{existing.key}) and mode is "
                                      "'error': nothing was written")
    job.setup_job()


def commit(job: Committer, messages: Sequence[TaskCommitMessage], mode: str) -> dict[str, Any]:
    """Commit the job with the mode's overwrite plan; returns the ``_SUCCESS`` data as a dict."""
    success = job.commit_job(list(messages), delete_paths=[""] if mode == "overwrite" else (),
                             replace_partitions=mode == "overwrite-partitions", create_only=mode == "error")
    return success.to_dict()


def execution_attempt_id(task: int) -> str:
    """A task attempt id for one *execution* of task ``task``: a retried or recomputed task (a lost worker,
    a retried exception) is a new attempt, never the same one again."""
    return str(TaskAttemptId.of(task, secrets.randbelow(1 << 30), job_tracker="s3commit"))


WORKER_JOBS_KEPT = 8
"""Jobs whose committer a worker process keeps for its next tasks (:func:`worker_job`)."""
_worker_jobs: OrderedDict[bytes, Committer] = OrderedDict()
_worker_jobs_lock = threading.Lock()


def worker_job(job: Committer) -> Committer:
    """The one copy of ``job`` this process's tasks use: a task gets the job pickled, and each unpickled copy
    would make its own boto3 client (~0.1 s of CPU, most of a small task's own cost) and thread pools. The
    copy of the first task is kept and handed to the job's later tasks in this process (the committer's task
    side is thread-safe), for the :data:`WORKER_JOBS_KEPT` most recent jobs. Copies are the same job only if
    they pickle the same: a job run again with its id and other options is another job here."""
    key = hashlib.sha256(pickle.dumps(job)).digest()
    with _worker_jobs_lock:
        kept = _worker_jobs.setdefault(key, job)
        _worker_jobs.move_to_end(key)
        while len(_worker_jobs) > WORKER_JOBS_KEPT:  # an older job's tasks keep their own reference
            _worker_jobs.popitem(last=False)
    return kept
