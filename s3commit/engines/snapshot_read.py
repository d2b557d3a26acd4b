"""Reading a snapshot destination from Python: ``s3commit.arrow.dataset("s3://bucket/table")``.

The last committed snapshot (:mod:`s3commit.commit.snapshots`) becomes a ``pyarrow.dataset.Dataset`` of exactly its
files, so pandas (``.to_table().to_pandas()``), Dask, Ray and DuckDB (which scan a pyarrow Dataset) read one whole
job's output, never a listing taken in the middle of a commit. Planning costs one listing of the log's directory
and one GET of its entry, whatever the number of files: sizes come from the entry, so no file is HEADed.

The files are read through the same store as s3commit's writes (endpoint, credentials, retries:
:class:`StoreFiles`, a read-only ``pyarrow.fs`` handler doing ranged GETs), or through the ``filesystem`` the caller
gives (e.g. ``pyarrow.fs.S3FileSystem``, pyarrow's native client).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from s3commit.commit.snapshot_admin import current_files
from s3commit.errors import ConfigError
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

READ_AHEAD = 8 * 1024 * 1024
"""Bytes one ranged GET reads at least (Parquet readers ask for footers and column chunks in small pieces)."""


def dataset(dest: str, *, store: S3Store | None = None, filesystem: Any = None, format: str = "parquet",
            partitioning: Any = "hive", **options: Any) -> Any:
    """The last committed snapshot of ``dest`` as a ``pyarrow.dataset.Dataset``.

    Args:
        dest: ``s3://bucket/table`` (or ``s3a://``), a snapshot destination.
        store: the store to read the log (and, without ``filesystem``, the files) through.
        filesystem: a ``pyarrow.fs`` file system to read the files through instead (paths ``bucket/key``).
        format: the files' format (``parquet``, ``orc``, ``csv``, ``ipc``...).
        partitioning: as ``pyarrow.dataset.dataset`` takes it; ``"hive"`` (default) reads ``day=.../`` directories.
        options: passed to ``pyarrow.dataset.dataset`` (``schema``, ...).

    Raises:
        ConfigError: ``dest`` is not a snapshot destination.
    """
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    uri = S3Uri.parse(dest)
    store = store or S3Store()
    snapshot = current_files(uri, store=store)
    paths = [f"{uri.bucket}/{uri.prefix}{f.relative}" for f in snapshot.files]
    if filesystem is None:
        sizes = {path: f.size for path, f in zip(paths, snapshot.files, strict=True)}
        filesystem = pafs.PyFileSystem(_store_files_class()(store, sizes))
    if not paths:
        schema = options.pop("schema", None)
        if schema is None:
            raise ConfigError(f"snapshot {snapshot.id} of {uri} has no files: give schema= to read it as empty")
        return ds.dataset([], schema=schema, format=format)
    return ds.dataset(paths, filesystem=filesystem, format=format, partitioning=partitioning,
                      partition_base_dir=f"{uri.bucket}/{uri.key}".rstrip("/"), **options)


class StoreFile(io.RawIOBase):
    """One object read through the store by ranged GETs, ``READ_AHEAD`` at a time; its size is known."""

    def __init__(self, store: S3Store, bucket: str, key: str, size: int) -> None:
        super().__init__()
        self.store, self.bucket, self.key, self.size = store, bucket, key, size
        self.position = 0
        self._buffer, self._start = b"", 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self.size - self.position)
        if wanted <= 0:
            return 0
        end = self.position + wanted
        if not (self._start <= self.position and end <= self._start + len(self._buffer)):
            fetch_end = min(self.size, max(end, self.position + READ_AHEAD))
            self._buffer = self.store.objects.get_object(self.bucket, self.key, start=self.position, end=fetch_end)
            self._start = self.position
        offset = self.position - self._start
        if len(self._buffer) < offset + wanted:
            raise OSError(f"s3://{self.bucket}/{self.key}: {len(self._buffer) + self._start} bytes read, the snapshot "
                          f"lists {self.size}: the object changed after its snapshot was committed")
        view[:wanted] = self._buffer[offset:offset + wanted]
        self.position = end
        return wanted


def _store_files_class() -> type:
    import pyarrow.fs as pafs

    class StoreFiles(pafs.FileSystemHandler):
        """A read-only file system of a snapshot's files (paths ``bucket/key``), read through an s3commit store."""

        def __init__(self, store: S3Store, sizes: dict[str, int]) -> None:
            self.store, self.sizes = store, sizes

        def _file(self, path: str) -> StoreFile:
            if path not in self.sizes:
                raise FileNotFoundError(f"{path} is not a file of the snapshot")
            bucket, _, key = path.partition("/")
            return StoreFile(self.store, bucket, key, self.sizes[path])

        def open_input_file(self, path: str) -> Any:
            import pyarrow as pa

            return pa.PythonFile(self._file(path), mode="r")

        def open_input_stream(self, path: str) -> Any:
            return self.open_input_file(path)

        def get_file_info(self, paths: Sequence[str]) -> list[Any]:
            return [pafs.FileInfo(p, pafs.FileType.File, size=self.sizes[p]) if p in self.sizes
                    else pafs.FileInfo(p, pafs.FileType.NotFound) for p in paths]

        def get_file_info_selector(self, selector: Any) -> list[Any]:
            base = selector.base_dir.rstrip("/") + "/"
            return [pafs.FileInfo(p, pafs.FileType.File, size=s) for p, s in self.sizes.items() if p.startswith(base)]

        def get_type_name(self) -> str:
            return "s3commit-snapshot"

        def normalize_path(self, path: str) -> str:
            return path

        def equals(self, other: Any) -> bool:
            return self is other

        def _read_only(self, *_: Any, **__: Any) -> Any:
            raise NotImplementedError("a snapshot's file system is read-only")

        create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
        move = copy_file = open_output_stream = open_append_stream = _read_only

    return StoreFiles
