"""Part data: the bytes of one multipart-upload part, in memory or in a local file.

A :class:`Part` is what a writer queues and the store uploads. It is loaded only when its upload starts
(:meth:`Part.load`), so parts waiting their turn cost no memory when they are files, and it is released
(:meth:`Part.release`) when its upload ends or is abandoned, which frees the memory and deletes a block file
the part owns. The store sends the loaded ``bytearray`` as it is: botocore hashes and sends a bytes-like body
without copying it, where a file object would be read and sent in small pieces.
"""

from __future__ import annotations

import contextlib
import os
import threading


class Part:
    """The data of one part. Subclasses say where it lives."""

    size: int

    def load(self) -> bytearray:
        """The part's bytes, exactly :attr:`size` of them (read from disk for a file part)."""
        raise NotImplementedError

    def release(self) -> None:
        """Free the data; delete an owned block file. Idempotent."""


class BufferPart(Part):
    """A part held in memory (``data[:size]`` is the part; ``data`` may be a larger reused buffer)."""

    def __init__(self, data: bytearray, size: int | None = None) -> None:
        self._data: bytearray | None = data
        self.size = len(data) if size is None else size
        if self.size > len(data):
            raise ValueError(f"part size {self.size} exceeds its buffer of {len(data)} bytes")

    def load(self) -> bytearray:
        if self._data is None:
            raise ValueError("the part was released")
        if len(self._data) != self.size:
            del self._data[self.size:]  # shrink in place: no copy
        return self._data

    def release(self) -> None:
        self._data = None


class FilePart(Part):
    """A part read from ``path`` (``length`` bytes from ``offset``), deleted on release if ``owned``.

    ``owned`` files are block files the JVM handed over: the part deletes them whatever happens to the
    upload. Files that are not owned (a staging committer's task output) are only read.
    """

    def __init__(self, path: str, *, offset: int = 0, length: int | None = None, owned: bool = False) -> None:
        self.path = path
        self.offset = offset
        self.size = os.path.getsize(path) - offset if length is None else length
        self.owned = owned
        self._released = False
        self._lock = threading.Lock()

    def load(self) -> bytearray:
        buffer = bytearray(self.size)
        view = memoryview(buffer)
        with open(self.path, "rb", buffering=0) as f:
            f.seek(self.offset)
            filled = 0
            while filled < self.size:
                got = f.readinto(view[filled:])
                if not got:
                    raise OSError(f"{self.path} is shorter than expected: {self.offset + filled} of "
                                  f"{self.offset + self.size} bytes")
                filled += got
        return buffer

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        if self.owned:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


def file_parts(path: str, part_size: int) -> list[FilePart]:
    """A local file cut into parts of ``part_size`` (one empty part for an empty file)."""
    length = os.path.getsize(path)
    if length == 0:
        return [FilePart(path, offset=0, length=0)]
    return [FilePart(path, offset=start, length=min(part_size, length - start))
            for start in range(0, length, part_size)]
