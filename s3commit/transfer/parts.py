"""Part data: the bytes of one multipart-upload part, in memory or in a local file.

A :class:`Part` is what a writer queues and the store uploads. It is loaded only when its upload starts
(:meth:`Part.load`), so parts waiting their turn cost no memory when they are files, and it is released
(:meth:`Part.release`) when its upload ends or is abandoned, which frees the memory and deletes a block file
the part owns. The store sends the loaded buffer as it is (:mod:`s3commit.store.body_policy`): its checksums are
computed from it and urllib3 sends it to the socket, no copy made in Python.

A file part is mapped, not read (:mod:`mmap`): its bytes stay in the page cache where the JVM (or a staging
task) wrote them, and the checksums and the socket read them there. Reading a 32 MiB part into a new
``bytearray`` cost 1.3 s of CPU per GiB on the reference machine, most of it zeroing the new buffer and
faulting its pages in with the GIL held (a profile of the sidecar put 90% of its GIL-held samples there); a
mapping costs nothing until the bytes are read. A mapped file must keep its length while its part uploads (a
block file is the sidecar's alone; a staging file is closed before its task commits): reading past the end
of a file truncated meanwhile would kill the process (SIGBUS).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading


class Part:
    """The data of one part. Subclasses say where it lives."""

    size: int

    def load(self) -> bytearray | memoryview:
        """The part's bytes, exactly :attr:`size` of them (mapped from its file for a file part)."""
        raise NotImplementedError

    def release(self) -> None:
        """Free the data; delete an owned block file. Idempotent."""


class BufferPart(Part):
    """A part held in memory (``data[:size]`` is the part; ``data`` may be a larger reused buffer): a
    ``bytearray``, or an anonymous :func:`memory_buffer` (unmapped on release, or given back to ``pool``)."""

    def __init__(self, data: bytearray | mmap.mmap, size: int | None = None, *,
                 pool: BufferPool | None = None) -> None:
        self._data: bytearray | mmap.mmap | None = data
        self._pool = pool
        self.size = len(data) if size is None else size
        if self.size > len(data):
            raise ValueError(f"part size {self.size} exceeds its buffer of {len(data)} bytes")

    def load(self) -> bytearray | memoryview:
        if self._data is None:
            raise ValueError("the part was released")
        if isinstance(self._data, mmap.mmap):
            return memoryview(self._data)[:self.size]
        if len(self._data) != self.size:
            del self._data[self.size:]  # shrink in place: no copy
        return self._data

    def release(self) -> None:
        data, self._data = self._data, None
        if isinstance(data, mmap.mmap):
            if self._pool is not None:
                self._pool.give(data)
            else:
                _unmap(data)


def _unmap(data: mmap.mmap) -> None:
    with contextlib.suppress(BufferError):  # a view still held elsewhere: unmapped when it goes
        data.close()


class BufferPool:
    """The part buffers of one writer, filled again once their parts are uploaded: a new :func:`populated_buffer`
    costs the kernel a page fault and a zeroed page per 4 KiB (0.2 s of system CPU per GiB on the reference
    machine), a buffer filled again costs neither. Keeps at most ``keep`` spare buffers, so a writer's memory stays
    within its bound (a spare is a part no longer in flight); :meth:`close` unmaps them, and a buffer given back
    after it is unmapped at once. A part gives its buffer back when its upload has ended: nothing reads it then."""

    def __init__(self, size: int, keep: int) -> None:
        self.size, self._keep = size, keep
        self._spare: list[mmap.mmap] = []
        self._open = True
        self._lock = threading.Lock()

    def take(self) -> mmap.mmap:
        """A buffer of :attr:`size` bytes to fill whole: a spare, else a new :func:`populated_buffer`."""
        with self._lock:
            if self._spare:
                return self._spare.pop()
        return populated_buffer(self.size)

    def give(self, data: mmap.mmap) -> None:
        """Take ``data`` back as a spare (a buffer :meth:`take` gave), or unmap it."""
        with self._lock:
            if self._open and len(self._spare) < self._keep and len(data) == self.size and not data.closed:
                self._spare.append(data)
                return
        _unmap(data)

    def close(self) -> None:
        """Unmap the spares; buffers given back from now on are unmapped. Idempotent."""
        with self._lock:
            self._open, spare, self._spare = False, self._spare, []
        for data in spare:
            _unmap(data)


def memory_buffer(size: int) -> bytearray | mmap.mmap:
    """A writable buffer of ``size`` bytes to receive a part into. ``bytearray(size)`` zeroes its memory with the
    GIL held (5-10 ms for 32 MiB on the reference machine); an anonymous mapping costs nothing until written,
    and the kernel supplies its zeroed pages as a ``readinto`` fills them, the GIL released."""
    return mmap.mmap(-1, size) if size else bytearray()


def populated_buffer(size: int) -> mmap.mmap:
    """An anonymous mapping of ``size`` bytes whose pages the kernel supplies at once (``MAP_POPULATE`` where the
    platform has it), for a part that will be filled whole: one system call instead of a page fault per 4 KiB as
    it fills (measured alone: 0.55 -> 0.23 s of system CPU per GiB). Zeroed, as a lazy mapping's pages would be."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    return mmap.mmap(-1, size, flags=flags)


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
        self._maps: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def load(self) -> bytearray | memoryview:
        if self.size == 0:
            return bytearray()
        start = self.offset - self.offset % mmap.ALLOCATIONGRANULARITY  # a mapping starts on a page
        with open(self.path, "rb", buffering=0) as f:
            length = os.fstat(f.fileno()).st_size
            if length < self.offset + self.size:
                raise OSError(f"{self.path} is shorter than expected: {length} of {self.offset + self.size} bytes")
            mapped = mmap.mmap(f.fileno(), self.offset + self.size - start, access=mmap.ACCESS_READ, offset=start)
        with self._lock:
            self._maps.append(mapped)
        return memoryview(mapped)[self.offset - start:]

    def release(self) -> None:
        with self._lock:
            maps, self._maps = self._maps, []
            released, self._released = self._released, True
        for mapped in maps:
            with contextlib.suppress(BufferError):  # a view still held elsewhere: unmapped when it goes
                mapped.close()
        if self.owned and not released:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


PIECE_MIN = 8 * 1024 * 1024
"""The smallest part a file is cut into below the configured part size (boto3's default part size; S3's minimum is
5 MiB): the pieces of a file's last part (:mod:`s3commit.transfer.writer`), a staged file's parts
(:func:`staged_part_size`)."""


PIECES_MAX = 8
"""The most pieces a full part is cut into (:func:`pieces_per_part`)."""
SPLIT_PARTS = 500
"""Part numbers a file spends on pieces: its first ``SPLIT_PARTS`` parts are pieces, later parts go whole, so a
file of 32 MiB parts still reaches 125 parts in pieces and 9,500 whole: 301 GiB (312 GiB with no piece at all)."""


def pieces_per_part(part_size: int) -> int:
    """How many pieces of at least :data:`PIECE_MIN` a full part of ``part_size`` is sent as, side by side.

    A part is the unit a writer buffers (``fs.s3a.multipart.size``: a block file or an array); on the wire it is
    cheaper in pieces of 8 MiB. Each piece is a request of its own over its own connection (S3 gives 80-90 MB/s
    per connection: a 32 MiB part alone takes 0.4 s, four pieces 0.1 s), and a server handles an 8 MiB body in
    buffers it reuses where a body of 32 MiB or more is above glibc's largest ``mmap`` threshold, a fresh mapping
    faulted in page by page (moto: 1.1 million page faults and 20-30% more CPU per GiB). Up to :data:`PIECES_MAX`.
    """
    return max(1, min(PIECES_MAX, part_size // PIECE_MIN))


def staged_part_size(length: int, part_size: int, slots: int) -> int:
    """The part size a staged file of ``length`` bytes uploads in, when ``slots`` upload threads are its share.

    A staging task uploads its files only once it has written them, so a file's upload time is the task's to wait:
    a 128 MiB file of 32 MiB parts is four parts side by side, each 0.4 s at S3's 80 MB/s per connection, while
    the threads meant for it idle. A file with fewer parts than ``slots`` is cut into up to ``slots`` equal parts
    of at least :data:`PIECE_MIN` (never more parts than that: it only adds requests); otherwise, and when the
    configured size is already that small, ``part_size`` as configured.
    """
    parts = max(1, -(-length // part_size))
    if parts >= slots or part_size <= PIECE_MIN:
        return part_size
    pieces = min(slots, length // PIECE_MIN)
    if pieces <= parts:
        return part_size
    return max(PIECE_MIN, -(-length // pieces))


def file_parts(path: str, part_size: int) -> list[FilePart]:
    """A local file cut into parts of ``part_size`` (one empty part for an empty file)."""
    length = os.path.getsize(path)
    if length == 0:
        return [FilePart(path, offset=0, length=0)]
    return [FilePart(path, offset=start, length=min(part_size, length - start))
            for start in range(0, length, part_size)]


class _SharedRelease:
    """Releases ``part`` once every one of ``count`` pieces cut from it has been released."""

    def __init__(self, part: Part, count: int) -> None:
        self._part, self._left, self._lock = part, count, threading.Lock()

    def release_one(self) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._part.release()


class _Piece(Part):
    """``size`` bytes from ``offset`` of a part cut in pieces (:func:`split_part`)."""

    def __init__(self, parent: Part, offset: int, size: int, shared: _SharedRelease) -> None:
        self.size = size
        self._shared = shared
        self._released = False
        self._lock = threading.Lock()
        self._view: memoryview | None = None
        self._file: FilePart | None = None
        if isinstance(parent, FilePart):  # mapped on its own when its upload starts, like any file part
            self._file = FilePart(parent.path, offset=parent.offset + offset, length=size)
        else:
            self._view = memoryview(parent.load())[offset:offset + size]

    def load(self) -> bytearray | memoryview:
        if self._released:
            raise ValueError("the part was released")
        if self._file is not None:
            return self._file.load()
        assert self._view is not None
        return self._view

    def release(self) -> None:
        with self._lock:
            released, self._released = self._released, True
        if released:
            return
        if self._file is not None:
            self._file.release()
        self._view = None  # the views the request made of it go with it
        self._shared.release_one()


def split_part(part: Part, pieces: int) -> list[Part]:
    """``part`` cut into ``pieces`` parts of nearly equal size, in order; ``part`` itself (its memory, its owned
    block file) is released when the last piece is. No byte is copied: pieces are views of a buffer, or ranges of
    a file mapped when their uploads start."""
    if pieces < 2:
        return [part]
    shared = _SharedRelease(part, pieces)
    base, extra = divmod(part.size, pieces)
    out: list[Part] = []
    offset = 0
    for index in range(pieces):
        size = base + (1 if index < extra else 0)
        out.append(_Piece(part, offset, size, shared))
        offset += size
    return out
