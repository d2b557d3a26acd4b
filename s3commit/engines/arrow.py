"""Committed writes from pandas and pyarrow: ``write_dataset(data, "s3://bucket/table", ...)``.

pyarrow's own dataset writer (``pyarrow.dataset.write_dataset``) does the work, file sizes, row groups and
partition directories included; its files are opened on a ``pyarrow.fs.PyFileSystem`` whose output streams
are the files of one task attempt of an s3commit job (:class:`AttemptFileSystem`). Nothing is visible under
the destination until the job commits; a failure aborts the job and leaves no object and no upload; the
``overwrite`` modes replace old data only after every new file is complete (:mod:`s3commit.engines.common`).

    import s3commit.arrow
    success = s3commit.arrow.write_dataset(df, "s3://bucket/table", partitioning=["day"], mode="overwrite")
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from s3commit.committers.attempt import TaskAttempt
from s3commit.engines import common
from s3commit.errors import ConfigError
from s3commit.store.s3store import S3Store

DATASET_ROOT = "dataset"
"""The root the dataset writer sees; the attempt's files are its paths below it."""



def _handler_class() -> type:
    import pyarrow.fs as pafs

    class AttemptFileSystem(pafs.FileSystemHandler):
        """A write-only file system over one task attempt: ``open_output_stream(path)`` opens the attempt's
        file ``path`` (relative to :data:`DATASET_ROOT`); directories need no creating on S3."""

        def __init__(self, attempt: TaskAttempt) -> None:
            self.attempt = attempt
            self.opened: list[str] = []

        def open_output_stream(self, path: str, metadata: Any) -> Any:
            relative = path.removeprefix(DATASET_ROOT).lstrip("/")
            if not relative:
                raise ConfigError(f"pyarrow asked to write the dataset's root {path!r} as a file")
            self.opened.append(relative)
            return common.native_stream(self.attempt.open(relative))

        def get_type_name(self) -> str:
            return "s3commit-attempt"

        def normalize_path(self, path: str) -> str:
            return path

        def equals(self, other: Any) -> bool:
            return self is other

        def create_dir(self, path: str, recursive: bool) -> None:
            pass  # S3 has no directories

        def get_file_info(self, paths: Sequence[str]) -> list[Any]:
            return [pafs.FileInfo(p, pafs.FileType.NotFound) for p in paths]

        def get_file_info_selector(self, selector: Any) -> list[Any]:
            return []

        def _unsupported(self, *_: Any, **__: Any) -> Any:
            raise NotImplementedError("s3commit's attempt file system only writes new files")

        delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _unsupported
        move = copy_file = open_input_stream = open_input_file = open_append_stream = _unsupported

    return AttemptFileSystem


def as_reader(data: Any) -> Any:
    """``data`` as something ``pyarrow.dataset.write_dataset`` takes: a Table, a RecordBatchReader, or a
    reader over an iterable of RecordBatches; a pandas DataFrame becomes a Table (its index dropped)."""
    import pyarrow as pa

    if isinstance(data, pa.Table | pa.RecordBatchReader | pa.RecordBatch):
        return data
    if type(data).__module__.startswith("pandas") and hasattr(data, "columns"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, Iterable) and not isinstance(data, str | bytes):
        batches = iter(data)
        first = next(batches, None)
        if first is None:
            raise ConfigError("write_dataset: the iterable of RecordBatches is empty (its schema is unknown); "
                              "pass an empty pyarrow Table instead")
        if not isinstance(first, pa.RecordBatch):
            raise ConfigError(f"write_dataset: expected RecordBatches, got {type(first).__name__}")
        return pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
    raise ConfigError(f"write_dataset: cannot write a {type(data).__name__}: pass a pyarrow Table, "
                      "RecordBatchReader, an iterable of RecordBatches or a pandas DataFrame")


def write_dataset(data: Any, dest: str, *, format: str = "parquet", partitioning: Sequence[str] | None = None,
                  mode: str = "append", committer: str = "magic", store: S3Store | None = None,
                  job_id: str | None = None, **options: Any) -> dict[str, Any]:
    """Write ``data`` to ``dest`` as one committed job; returns the ``_SUCCESS`` data.

    Args:
        data: a pyarrow Table, RecordBatchReader, iterable of RecordBatches, or a pandas DataFrame.
        dest: ``s3://bucket/path`` (or ``s3a://``).
        format: pyarrow's dataset format (``parquet``, ``csv``, ``feather``/``ipc``, ``orc``).
        partitioning: columns for hive-style directories (``day=2026-11-25/``), in order.
        mode: ``append``, ``overwrite``, ``overwrite-partitions`` or ``error`` (:mod:`s3commit.engines.common`).
        committer: ``magic`` (default), ``directory`` or ``partitioned``.
        store: the S3 store (endpoint, credentials); default resolves them as boto3 does.
        job_id: the job's id (a new UUID by default); it is in every file name.
        options: committer options (``threads``, ``part_size``, ``staging_dir``, ``validate_output``, ...) and
            pyarrow's writer options (``max_rows_per_file``, ``max_rows_per_group``, ``min_rows_per_group``,
            ``max_partitions``, ``basename_template``, ``compression`` and the format's other write options).

    Raises:
        ConfigError: bad input (mode, destination, format, a partition column missing, an option), before
            anything is written.
        CommitConflictError: ``mode="error"`` and the destination holds data.
    """
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    committer_options, writer_options = common.split_options(options)
    common.check_mode(mode)
    reader = as_reader(data)
    schema = reader.schema
    missing = [c for c in partitioning or () if c not in schema.names]
    if missing:
        raise ConfigError(f"write_dataset: partition column(s) {', '.join(missing)} not in the data's columns "
                          f"({', '.join(schema.names)})")
    file_format = _format(format)
    format_args = {k: writer_options.pop(k) for k in list(writer_options) if k not in _WRITER_ARGS}
    try:
        file_options = file_format.make_write_options(**format_args)
    except TypeError as err:
        raise ConfigError(f"write_dataset: {err}") from err
    job = common.new_job(dest, committer=committer, mode=mode, store=store, job_id=job_id,
                         options=committer_options)
    attempt = job.setup_task(common.execution_attempt_id(0))
    try:
        handler = _handler_class()(attempt)
        ds.write_dataset(
            reader, DATASET_ROOT, format=file_format, file_options=file_options, filesystem=pafs.PyFileSystem(handler),
            partitioning=ds.partitioning(schema=_partition_schema(schema, partitioning), flavor="hive")
            if partitioning else None,
            basename_template=writer_options.pop("basename_template", f"part-{{i}}-{job.job_id}.{format}"),
            existing_data_behavior="overwrite_or_ignore", **writer_options)
        message = job.commit_task(attempt)
        return common.commit(job, [message], mode)
    except BaseException:
        _abort(job, attempt)
        raise


_WRITER_ARGS = frozenset({"max_rows_per_file", "max_rows_per_group", "min_rows_per_group", "max_partitions",
                          "max_open_files", "basename_template", "use_threads", "preserve_order",
                          "create_dir"})
"""``pyarrow.dataset.write_dataset``'s own keywords; every other engine option is the format's."""


def _format(name: str) -> Any:
    import pyarrow.dataset as ds

    formats = {"parquet": ds.ParquetFileFormat, "csv": ds.CsvFileFormat, "ipc": ds.IpcFileFormat,
               "feather": ds.IpcFileFormat, "orc": getattr(ds, "OrcFileFormat", None)}
    factory = formats.get(name)
    if factory is None:
        raise ConfigError(f"write_dataset: format {name!r} is not valid. Valid values are: "
                          f"{', '.join(k for k, v in formats.items() if v is not None)}")
    return factory()


def _partition_schema(schema: Any, columns: Sequence[str] | None) -> Any:
    import pyarrow as pa

    return pa.schema([schema.field(c) for c in columns or ()])


def _abort(job: Any, attempt: TaskAttempt) -> None:
    try:
        job.abort_task(attempt)
    finally:
        job.abort_job()
