"""The sidecar's data path: files written part by part, and object ranges read as a stream.

**Writes.** ``fs.open_write`` opens a :class:`~s3commit.transfer.writer.MultipartWriter` (a magic path defers its
completion to the job commit) and returns a handle, the part size and the block directory. The JVM fills one
part at a time and hands it over with ``fs.write_block``: as the name of a block file it wrote in that
directory (``fs.s3a.fast.upload.buffer=disk``, the default) or as the request's body (``array``). The call
returns as soon as the part is queued; the part uploads in the background on the configuration's upload
threads, and the call blocks only while ``fs.s3a.fast.upload.active.blocks`` parts of the file are queued or
uploading. ``fs.close_write`` takes the last part, waits for the others and completes (or records the pending
upload); ``fs.abort_write`` aborts. A block file is the sidecar's from the moment it is named: it is deleted
when its upload ends, on abort, or when the writer fails.

Handles are tied to their task attempt (from the magic path): ``forget_attempt`` aborts what an attempt left
open when it commits or aborts, and a handle untouched for ``s3commit.bridge.idle-timeout`` is aborted, so
a long session does not accumulate abandoned writers.

**Reads.** ``fs.read`` streams bytes ``[offset, offset + length)`` of an object from one GET, chunk by chunk
as they arrive (the store resumes a GET cut short). The read policy (sequential, random, vectored,
prefetching) is the JVM's: every read is a stateless range, so nothing is lost if a sidecar dies.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from s3commit.bridge.blocks import BlockDirectories
from s3commit.bridge.protocol import Body
from s3commit.bridge.registry import Configurations
from s3commit.bridge.reply import Reply
from s3commit.commit.process_state import THIS_PROCESS, ProcessState
from s3commit.committers import open_magic_file
from s3commit.config.options import KEYS
from s3commit.errors import CommitStateError, ConfigError
from s3commit.model.paths import is_magic_file_key, job_id_of_magic_key, task_attempt_id_of_magic_key
from s3commit.model.uri import S3Uri
from s3commit.store.capability_cache import known
from s3commit.transfer.parts import BufferPart, FilePart, Part, memory_buffer
from s3commit.transfer.writer import MultipartWriter

log = logging.getLogger(__name__)

READ_CHUNK = 1024 * 1024


@dataclass
class _Handle:
    writer: MultipartWriter
    blocks_dir: str
    owner: tuple[str, str] | None  # (job id, task attempt id) of a magic path
    idle_timeout: float
    touched: float
    busy: int = 0


class Streams:
    """``fs.open_write``, ``fs.write_block``, ``fs.close_write``, ``fs.abort_write``, ``fs.read``."""

    def __init__(self, confs: Configurations, blocks: BlockDirectories, *, process: ProcessState = THIS_PROCESS,
                 clock: Any = time.monotonic) -> None:
        self.confs = confs
        self.blocks = blocks
        self.process = process
        self._clock = clock
        self._lock = threading.Lock()
        self._handles: dict[int, _Handle] = {}
        self._next = 1

    def ops(self) -> dict[str, Any]:
        return {"fs.open_write": self.open_write, "fs.write_block": self.write_block,
                "fs.close_write": self.close_write, "fs.abort_write": self.abort_write, "fs.read": self.read}

    def __len__(self) -> int:
        with self._lock:
            return len(self._handles)

    # --- writes ----------------------------------------------------------------------------------

    def open_write(self, req: dict[str, Any], _: Body | None) -> Reply:
        """Open a writer: a magic path defers completion to the job commit; any other path is a plain write."""
        registered = self.confs.get(req.get("conf_id"))
        uri, options = S3Uri.from_location(req["path"]), registered.options
        magic = is_magic_file_key(uri.key)
        writer: MultipartWriter
        if magic:
            writer = open_magic_file(registered.store, uri, options=options, executor=registered.upload_pool,
                                     registry=self.process.tasks)
            owner: tuple[str, str] | None = (job_id_of_magic_key(uri.key), task_attempt_id_of_magic_key(uri.key))
        else:
            known(registered.store, uri.bucket, prefix=uri.key.rpartition("/")[0])  # the parts' checks
            writer = MultipartWriter(registered.store, uri.bucket, uri.key, part_size=options.part_size,
                                     max_in_flight=options.max_in_flight, executor=registered.upload_pool,
                                     if_none_match=bool(req.get("if_none_match")))
            owner = None
        buffer_dir = registered.conf.get("fs.s3a.buffer.dir", "").strip()
        directory = self.blocks.for_buffer_dir(buffer_dir) if buffer_dir else self.blocks.default
        idle_key = "s3commit.bridge.idle-timeout"
        idle = float(registered.conf.get(idle_key) or KEYS[idle_key].default)
        self._reap()
        with self._lock:
            handle = self._next
            self._next += 1
            self._handles[handle] = _Handle(writer, directory.path, owner, idle, self._clock())
        return Reply({"handle": handle, "magic": magic, "part_size": options.part_size,
                      "blocks_dir": directory.path})

    def _take(self, req: dict[str, Any], *, remove: bool = False) -> _Handle:
        number = int(req["handle"])
        with self._lock:
            found = self._handles.pop(number, None) if remove else self._handles.get(number)
            if found is not None:
                found.touched = self._clock()
                found.busy += 1
        if found is None:
            raise CommitStateError(
                f"unknown or closed write handle {number}: the file was closed or aborted, or the sidecar that "
                "opened it is gone (a new one starts after a crash; the write must start again)")
        return found

    def _done(self, handle: _Handle) -> None:
        with self._lock:
            handle.busy -= 1
            handle.touched = self._clock()

    def _part(self, handle: _Handle, req: dict[str, Any], body: Body | None) -> Part | None:
        """The part a request carries: a block file it names, or its body."""
        if req.get("block"):
            path = self.blocks.find(handle.blocks_dir).block(str(req["block"]))
            return FilePart(path, owned=True)
        if body is not None:
            length = int(req.get("length", -1))
            if not 0 <= length <= handle.writer.part_size:
                raise ConfigError(f"a part body of {length} bytes (the part size is {handle.writer.part_size})")
            buffer = memory_buffer(length)
            got = body.readinto(buffer)
            if got != length or body.readinto(bytearray(1)):
                raise ConfigError(f"a part body of {got}+ bytes where {length} were announced")
            return BufferPart(buffer)
        return None

    def write_block(self, req: dict[str, Any], body: Body | None) -> Reply:
        handle = self._take(req)
        try:
            part = self._part(handle, req, body)
            if part is None:
                raise ConfigError("fs.write_block needs a block file name or a body")
            handle.writer.write_part(part)  # blocks while active.blocks parts are in flight
        except BaseException:
            self._abort(handle, req)
            raise
        finally:
            self._done(handle)
        return Reply({"parts": handle.writer.parts_submitted})

    def close_write(self, req: dict[str, Any], body: Body | None) -> Reply:
        handle = self._take(req, remove=True)
        try:
            last = self._part(handle, req, body)
            handle.writer.close(last)
        except BaseException:
            handle.writer.abort()
            raise
        finally:
            self._done(handle)
        return Reply({"length": handle.writer.tell()})

    def abort_write(self, req: dict[str, Any], _: Body | None) -> Reply:
        with self._lock:
            handle = self._handles.pop(int(req["handle"]), None)
        if handle is not None:
            handle.writer.abort()  # the blocks it was handed are released by the writer; unsent ones are the JVM's
        return Reply({})

    def _abort(self, handle: _Handle, req: dict[str, Any]) -> None:
        with self._lock:
            self._handles.pop(int(req["handle"]), None)
        with contextlib.suppress(Exception):
            handle.writer.abort()
        self._discard_block(req, handle)

    def _discard_block(self, req: dict[str, Any], handle: _Handle | None) -> None:
        """A block file a failed or aborted request named is still ours to delete."""
        if handle is None or not req.get("block"):
            return
        with contextlib.suppress(Exception):
            FilePart(self.blocks.find(handle.blocks_dir).block(str(req["block"])), owned=True).release()

    def forget_attempt(self, job_id: str, task_attempt_id: str) -> int:
        """Abort the writers a task attempt left open; returns how many."""
        with self._lock:
            numbers = [n for n, h in self._handles.items() if h.owner == (job_id, task_attempt_id)]
            handles = [self._handles.pop(n) for n in numbers]
        for handle in handles:
            log.warning("task attempt %s ended with s3://%s/%s still open: aborting it", task_attempt_id,
                        handle.writer.bucket, handle.writer.key)
            with contextlib.suppress(Exception):
                handle.writer.abort()
        return len(handles)

    def forget_job(self, job_id: str) -> int:
        with self._lock:
            numbers = [n for n, h in self._handles.items() if h.owner is not None and h.owner[0] == job_id]
            handles = [self._handles.pop(n) for n in numbers]
        for handle in handles:
            with contextlib.suppress(Exception):
                handle.writer.abort()
        return len(handles)

    def _reap(self) -> None:
        """Abort handles nobody has touched for their idle timeout (abandoned streams)."""
        now = self._clock()
        with self._lock:
            stale = [n for n, h in self._handles.items() if not h.busy and now - h.touched > h.idle_timeout]
            handles = [self._handles.pop(n) for n in stale]
        for handle in handles:
            log.warning("aborting s3://%s/%s: its stream was abandoned (untouched for %.0f s)",
                        handle.writer.bucket, handle.writer.key, now - handle.touched)
            with contextlib.suppress(Exception):
                handle.writer.abort()

    def close(self) -> None:
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            with contextlib.suppress(Exception):
                handle.writer.abort()

    # --- reads -----------------------------------------------------------------------------------

    def read(self, req: dict[str, Any], _: Body | None) -> Reply:
        """Bytes ``[offset, offset + length)`` of an object, streamed from one GET."""
        registered = self.confs.get(req.get("conf_id"))
        uri = S3Uri.from_location(req["path"])
        start, length = int(req["offset"]), int(req["length"])
        if start < 0 or length < 0:
            raise ConfigError(f"a read of {length} bytes at offset {start} of {uri}")
        stream = registered.store.objects.stream_object(uri.bucket, uri.key, start=start, end=start + length,
                                                        chunk_size=READ_CHUNK)
        # The first chunk is fetched before answering, so a missing object or a refused GET is a plain
        # error response; a failure later cuts the streamed body short with the error.
        first = next(stream, b"")
        return Reply({"length": length}, stream=itertools.chain((first,), stream))
