"""MultipartWriter: a binary file object that streams to S3 as a multipart upload.

Parts upload in the background, on the executor the writer is given, while the caller keeps writing. At most
``max_in_flight`` parts are queued or uploading at once; the call that would add one more blocks until a part finishes
(S3A's ``fs.s3a.fast.upload.active.blocks``). A part is loaded into memory only when its upload starts
(:mod:`s3commit.transfer.parts`), so the memory a writer holds is bounded by ``max_in_flight × part_size`` for parts
being uploaded, plus the part being filled by :meth:`write` (an uploaded part's buffer is filled again:
:class:`~s3commit.transfer.parts.BufferPool`). On the wire a full part of 16 MiB or more goes as pieces of at least
8 MiB, side by side, for the file's first :data:`~s3commit.transfer.parts.SPLIT_PARTS` part numbers
(:func:`~s3commit.transfer.parts.pieces_per_part`): the part is what is buffered, the piece what is sent; the bound
above counts the pieces of a part as that part. Parts can also be handed over whole
(:meth:`MultipartWriter.write_part`): the JVM bridge passes block files that way, and they are deleted as soon as their
upload ends.

On ``close()`` the writer asks its :class:`CompletionPolicy` what to do with the finished upload: complete it now (a
plain write) or defer it (the magic committer records a ``.pending`` and completes at job commit). This is Hadoop's
``PutTracker`` seam: the writer knows nothing of committers. Any error, and any exception inside ``with``, aborts the
upload and releases every queued part; a file that would need more than 10,000 parts fails on the write that crosses the
limit, before anything is published.
"""

from __future__ import annotations

import contextlib
import io
import logging
import mmap
import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from s3commit.config.options import MAX_PARTS, MIN_PART_SIZE
from s3commit.errors import ConfigError, S3CommitError, short_upload_id
from s3commit.model import checksums
from s3commit.model.checksums import SentPart
from s3commit.model.manifests import PendingUpload, now_millis
from s3commit.model.object_info import CREATE_WINDOW_KEY, CreateWindow
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import SerialExecutor
from s3commit.transfer.parts import PIECE_MIN, SPLIT_PARTS, BufferPart, BufferPool, Part, pieces_per_part, split_part

log = logging.getLogger(__name__)


class TooManyPartsError(S3CommitError, OSError):
    """The file outgrew S3's 10,000-part limit at the configured part size."""


class CompletionPolicy:
    """Decides what happens when an upload starts and when its data is all uploaded.

    The default completes on close (a normal S3 write).
    """

    may_defer = True
    """False only for a policy that always completes on close: then a small file may be one PUT instead
    of an upload (a deferred file must be an upload, to be completed later)."""
    create_early = False
    """Start the upload's Create in the background as the writer opens (a deferred file always needs one)."""
    orphans_to_job = False
    """What a Create that lost its answer may have left is the job's to abort, not this writer's (a task attempt's
    file: another attempt of the task may have an upload of the same key in that window)."""
    finish_later = False
    """``close()`` returns once the last part is queued: the parts finish in the background, then
    :meth:`upload_ready` (which must then not complete) or :meth:`close_failed` is called from there."""

    def closing(self, held: int) -> None:
        """``finish_later``: a close goes to the background holding ``held`` bytes of parts (may wait)."""

    def close_failed(self, error: BaseException) -> None:
        """``finish_later``: the background close failed (the upload was aborted)."""

    def upload_started(self, *, bucket: str, key: str, upload_id: str) -> None:
        """Called right after the upload is created (before any part)."""

    def create_was_ambiguous(self, *, bucket: str, key: str, upload_id: str, window: CreateWindow) -> None:
        """Called after :meth:`upload_started` when an attempt of the Create lost its answer: an upload of
        ``key`` initiated inside ``window`` may be an orphan of this one. The window is also kept in the
        pending upload (``extraData``); a policy that records uploads durably records it too."""

    def upload_ready(self, pending: PendingUpload) -> bool:
        """Called when every part is uploaded. Return True to complete now, False if deferred."""
        return True

    def upload_aborted(self, *, bucket: str, key: str, upload_id: str) -> None:
        """Called after the writer aborted its upload."""


class CompleteOnClose(CompletionPolicy):
    """A plain write: complete on close."""

    may_defer = False


@dataclass(frozen=True)
class WriteResult:
    """What ``close()`` produced: the pending upload, and whether it was completed."""

    pending: PendingUpload | None
    completed: bool
    length: int


class MultipartWriter(io.RawIOBase):
    """Write a file to ``s3://bucket/key`` through a multipart upload.

    Args:
        store: the S3 store.
        bucket, key: the object the upload creates.
        part_size: bytes per part (>= 5 MiB; the last part may be smaller).
        max_in_flight: parts queued or uploading at once (the memory bound, see module docstring).
        executor: runs part uploads; ``None`` uploads in the calling thread.
        policy: complete now or defer on close.
        uri: recorded in the pending upload (the magic path for magic writes).
        single_put_below: with a policy that completes, a file smaller than one part is sent as one PUT
            instead of Create + Part + Complete.
        if_none_match: publish only if the key does not exist yet (``If-None-Match: *`` on the PUT or the
            Complete): a writer that loses the race gets :class:`~s3commit.errors.PreconditionFailedError`
            and nothing is overwritten.
        checksum_algorithm: what every part carries (``...``: the store's choice for the bucket,
            :meth:`~s3commit.store.requests.RequestGroup.checksum_algorithm`).
    """

    def __init__(
        self,
        store: S3Store,
        bucket: str,
        key: str,
        *,
        part_size: int,
        max_in_flight: int = 4,
        executor: Executor | None = None,
        policy: CompletionPolicy | None = None,
        uri: str | None = None,
        content_type: str | None = None,
        single_put_below: bool = True,
        if_none_match: bool = False,
        checksum_algorithm: str | EllipsisType | None = ...,
    ) -> None:
        if part_size < MIN_PART_SIZE:
            raise ConfigError(f"part_size {part_size} is below S3's minimum part size of {MIN_PART_SIZE} bytes")
        if max_in_flight < 1:
            raise ConfigError(f"max_in_flight must be >= 1, got {max_in_flight}")
        super().__init__()
        self.store = store
        self.bucket = bucket
        self.key = key
        self.part_size = part_size
        self.max_in_flight = max_in_flight
        self.policy = policy or CompleteOnClose()
        self.uri = uri or f"s3://{bucket}/{key}"
        self._content_type = content_type
        self._single_put = single_put_below and not self.policy.may_defer
        self._if_none_match = if_none_match
        self._executor: Executor = executor or SerialExecutor()
        self._pieces = pieces_per_part(part_size)
        # Slots are counted in pieces: a part sent whole takes as many as it would have pieces, so the bytes in
        # flight stay within max_in_flight x part_size however the parts are cut.
        self._slots = threading.Semaphore(max_in_flight * self._pieces)
        # The part being filled (_fill bytes): the first a bytearray that grows, the next ones from the pool.
        self._pool = BufferPool(part_size, keep=max_in_flight)
        self._buffer: bytearray | mmap.mmap = bytearray()
        self._fill = 0
        self._parts: list[tuple[Future[SentPart], Part]] = []
        self._error: BaseException | None = None
        self._length = 0
        self._created = now_millis()
        # The checksum every part of the upload carries: what its Create names (the bucket's, chosen once).
        self._algorithm = (store.uploads.checksum_algorithm(bucket) if checksum_algorithm is ...
                           else checksum_algorithm)
        self.upload_id: str | None = None
        self.create_window: CreateWindow | None = None
        """Set when the Create lost an answer and may have left an orphan upload (see the store)."""
        self._aborted = False
        self.result: WriteResult | None = None
        self._create: Future[str] | None = None
        self._finished = threading.Condition()
        if self.policy.create_early:
            self._create = self._executor.submit(self._start_upload)

    # --- io.RawIOBase ---------------------------------------------------------------------------

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._length

    @property
    def parts_submitted(self) -> int:
        return len(self._parts)

    def write(self, data: Any) -> int:
        self._check_writable()
        view = memoryview(data).cast("B")
        size = view.nbytes
        start = 0
        while start < size:
            if not self._fill and self._parts:
                self._buffer = self._pool.take()
            take = min(size - start, self.part_size - self._fill)
            if isinstance(self._buffer, bytearray):
                self._buffer += view[start:start + take]
            else:
                self._buffer[self._fill:self._fill + take] = view[start:start + take]
            start += take
            self._fill += take
            self._length += take
            if self._fill == self.part_size:
                part = BufferPart(self._buffer, self._fill, pool=self._pool)
                self._buffer, self._fill = bytearray(), 0
                self._submit_part(part)
        return size

    def write_part(self, part: Part) -> None:
        """Queue a whole part (exactly ``part_size`` bytes; the last part goes to :meth:`close`).

        Blocks while ``max_in_flight`` parts are queued or uploading. The writer owns ``part`` from here on:
        it is released (an owned block file deleted) when its upload ends, or when the writer is aborted.
        """
        try:
            self._check_writable()
            if self._fill:
                raise S3CommitError(f"s3://{self.bucket}/{self.key}: write_part() after write() of a partial part")
            if part.size != self.part_size:
                raise S3CommitError(f"s3://{self.bucket}/{self.key}: a part of {part.size} bytes where every part "
                                    f"but the last must be {self.part_size} bytes (fs.s3a.multipart.size)")
        except BaseException:
            part.release()
            raise
        self._length += part.size
        self._submit_part(part)

    def close(self, last: Part | None = None) -> None:
        """Upload what is left (and ``last``, the final part, if given), then complete or defer as the
        policy says. Idempotent."""
        if self.closed:
            if last is not None:
                last.release()
            return
        try:
            if last is not None:
                if self._fill:
                    last.release()
                    raise S3CommitError(f"s3://{self.bucket}/{self.key}: a last part after write() of a partial part")
                self._length += last.size
            result = self._finish(last)
            if result is not None:  # else the background close sets it when it ends
                self.result = result
        except BaseException:
            self._abort_quietly()
            raise
        finally:
            self._pool.close()  # parts still uploading unmap their buffers as they end
            super().close()

    def wait_finished(self) -> None:
        """Wait until a close handed to the background (``finish_later``) has ended, well or not (tests,
        tools): its upload is then recorded, or aborted."""
        waiting: list[Future[Any]] = [self._create] if self._create is not None else []
        for future in [*waiting, *(future for future, _ in self._parts)]:
            with contextlib.suppress(BaseException):
                future.exception()
        with self._finished:
            self._finished.wait_for(lambda: self.result is not None or self._aborted)

    def abort(self) -> None:
        """Abandon the file: abort the upload (if any) and release queued parts. Nothing becomes visible."""
        if self.closed:
            return
        try:
            self._abort_quietly()
        finally:
            self._pool.close()
            super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        # Never publish a file nobody closed: io.IOBase.__del__ would call close() and complete it.
        if hasattr(self, "upload_id") and not self.closed:
            log.warning("writer for s3://%s/%s was never closed; aborting its upload", self.bucket, self.key)
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing more to do
                self.abort()

    # --- internals ------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.closed:
            raise ValueError(f"write to closed writer for s3://{self.bucket}/{self.key}")
        try:
            self._raise_part_failure()
        except BaseException:
            self._abort_quietly()  # the file can no longer be completed: its upload goes now, not at close
            raise

    def _ensure_upload(self) -> str:
        if self._create is not None:
            return self._create.result()
        return self._start_upload()

    def _start_upload(self) -> str:
        if self.upload_id is None:
            windows: list[CreateWindow] = []
            self.upload_id = self.store.uploads.create_multipart_upload(self.bucket, self.key,
                                                                        content_type=self._content_type,
                                                                        on_possible_orphan=windows.append,
                                                                        checksum_algorithm=self._algorithm)
            self.create_window = windows[0] if windows else None
            self.policy.upload_started(bucket=self.bucket, key=self.key, upload_id=self.upload_id)
            if self.create_window is not None:
                self.policy.create_was_ambiguous(bucket=self.bucket, key=self.key, upload_id=self.upload_id,
                                                 window=self.create_window)
        return self.upload_id

    def _upload(self, upload_id: str | None, part_number: int, part: Part, units: int) -> SentPart:
        try:
            # A Create started early was queued before this part: it has started, waiting on it cannot deadlock.
            upload_id = upload_id or self._ensure_upload()
            return self.store.uploads.upload_part(self.bucket, self.key, upload_id, part_number, part.load(),
                                                  checksum_algorithm=self._algorithm)
        finally:
            part.release()
            self._slots.release(units)

    def _units(self, part: Part) -> int:
        """The slots ``part`` takes: one per piece of a full part it holds (at least one)."""
        return max(1, min(self._pieces, -(-part.size * self._pieces // self.part_size)))

    def _submit_part(self, part: Part) -> None:
        """Queue a full part: cut into :func:`pieces_per_part` pieces that upload side by side while the file's
        first :data:`SPLIT_PARTS` part numbers last, whole after that (so a file still reaches nearly 10,000 parts
        of the configured size)."""
        count = self._pieces if len(self._parts) + self._pieces <= min(SPLIT_PARTS, MAX_PARTS) else 1
        self._submit_pieces(split_part(part, count))

    def _submit_pieces(self, pieces: list[Part]) -> None:
        """Queue each of ``pieces`` in order; on a failure the ones not queued are released."""
        for index, piece in enumerate(pieces):
            try:
                self._submit_one(piece)
            except BaseException:
                for unsent in pieces[index + 1:]:
                    unsent.release()
                raise

    def _submit_one(self, part: Part) -> None:
        part_number = len(self._parts) + 1
        try:
            if part_number > MAX_PARTS:
                error = TooManyPartsError(
                    f"s3://{self.bucket}/{self.key} needs more than {MAX_PARTS} parts at part size "
                    f"{self.part_size} bytes (written so far: {self._length}); raise the part size "
                    f"(fs.s3a.multipart.size). The upload was aborted; nothing was published."
                )
                self._abort_quietly()
                self._error = error
                raise error
            early = self._create is not None and not self._create.done()
            upload_id = None if early else self._ensure_upload()
            units = self._units(part)
            for _ in range(units):
                self._slots.acquire()
        except BaseException:
            part.release()
            raise
        try:
            future = self._executor.submit(self._upload, upload_id, part_number, part, units)
        except BaseException:
            part.release()
            self._slots.release(units)
            raise
        self._parts.append((future, part))

    def _raise_part_failure(self) -> None:
        if self._error is not None:
            raise self._error
        if self._create is not None and self._create.done() and self._create.exception() is not None:
            self._error = self._create.exception()
            raise self._error  # type: ignore[misc]
        for future, _ in self._parts:
            if future.done() and future.exception() is not None:
                self._error = future.exception()
                raise self._error  # type: ignore[misc]

    def _finish(self, last: Part | None) -> WriteResult | None:
        self._raise_part_failure()
        if last is not None and not last.size and self._parts:
            last.release()  # a file that ends on a part boundary: no empty part (one request less at close)
            last = None
        if last is None and (self._fill or not self._parts):
            # The last part may be short; an empty file is one empty part.
            last = BufferPart(self._buffer, self._fill)
            self._buffer, self._fill = bytearray(), 0
        if self._single_put and self.upload_id is None and last is not None and not self._parts:
            # Small plain write: one PUT is cheaper than Create + Part + Complete.
            try:
                self.store.objects.put_object(self.bucket, self.key, last.load(), content_type=self._content_type,
                                              if_none_match=self._if_none_match)
            finally:
                last.release()
            return WriteResult(None, True, self._length)
        if last is not None:
            self._submit_pieces(self._tail_pieces(last))
        if self.policy.finish_later:
            self._finish_in_background()
            return None
        return self._complete_parts()

    def _tail_pieces(self, last: Part) -> list[Part]:
        """The last part, cut into pieces of at least :data:`PIECE_MIN` that upload side by side.

        Every other part went up while the caller was still writing; the last one starts only at ``close()``, and
        the close waits for it: one part's upload time (0.4 s for 32 MiB at S3's 80 MB/s per connection) added to
        every file. Up to ``max_in_flight`` pieces cut that tail by as much, for a few more requests per file.
        """
        count = min(self.max_in_flight, last.size // PIECE_MIN, MAX_PARTS - len(self._parts))
        return split_part(last, count) if count >= 2 else [last]

    def _finish_in_background(self) -> None:
        """Hand the end of the close to the parts' threads: the last part to finish builds the pending upload
        and gives it to the policy (or, on a failure, aborts the upload and tells the policy)."""
        futures = [future for future, _ in self._parts]
        self.policy.closing(sum(part.size for future, part in self._parts if not future.done()))
        left = [len(futures)]
        lock = threading.Lock()

        def one_done(_: Future[SentPart]) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            try:
                result = self._complete_parts()
            except BaseException as err:
                self._abort_quietly()
                self.policy.close_failed(err)
                result = WriteResult(None, False, self._length)
            with self._finished:
                self.result = result
                self._finished.notify_all()

        for future in futures:
            future.add_done_callback(one_done)

    def _complete_parts(self) -> WriteResult:
        sent: tuple[SentPart, ...] = tuple(future.result() for future, _ in self._parts)
        self._parts = [(future, _DONE) for future, _ in self._parts]  # the parts are released
        assert self.upload_id is not None
        etags, algorithm = tuple(part.etag for part in sent), self._algorithm
        sums = tuple(part.checksum for part in sent if part.checksum)
        extra = {CREATE_WINDOW_KEY: self.create_window.encode()} if self.create_window is not None else {}
        extra.update(checksums.record(algorithm, sums))
        pending = PendingUpload(
            bucket=self.bucket, destination_key=self.key, upload_id=self.upload_id, etags=etags,
            length=self._length, uri=self.uri, created=self._created, saved=now_millis(), extra_data=extra,
        )
        if self.policy.upload_ready(pending):
            self.store.uploads.complete_multipart_upload(self.bucket, self.key, self.upload_id, etags,
                                                         expected_length=self._length, created_ms=self._created,
                                                         checksum_algorithm=algorithm, part_checksums=sums,
                                                         if_none_match=self._if_none_match)
            if self.create_window is not None:
                self._abort_create_orphans()
            return WriteResult(pending, True, self._length)
        log.debug("s3://%s/%s will be visible when the job is committed", self.bucket, self.key)
        return WriteResult(pending, False, self._length)

    def _abort_create_orphans(self) -> None:
        """Abort what the Create may have left, once this file is published or abandoned (best effort; a
        deferred file's records also carry the window to the job's clean-up)."""
        assert self.upload_id is not None and self.create_window is not None
        try:
            self.store.uploads.abort_create_orphans(self.bucket, self.key, self.create_window, keep=self.upload_id)
        except S3CommitError as err:  # e.g. a role that may not list uploads: the lifecycle rule remains
            log.warning("could not abort the orphan uploads of s3://%s/%s: %s", self.bucket, self.key, err)

    def _abort_quietly(self) -> None:
        for future, part in self._parts:
            if future.cancel():  # never started: its upload will not release it
                units = self._units(part)
                part.release()
                self._slots.release(units)
        for future, _ in self._parts:
            with contextlib.suppress(BaseException):
                future.exception()  # wait for in-flight parts before aborting
        BufferPart(self._buffer, self._fill).release()  # an unsent part's buffer (a mapping is unmapped)
        self._buffer, self._fill = bytearray(), 0
        if self._create is not None:
            with contextlib.suppress(BaseException):
                self._create.result()  # an early Create's upload must be aborted too
        if self.upload_id is None or self._aborted:
            return
        upload_id = self.upload_id
        self._aborted = True
        try:
            self.store.uploads.abort_multipart_upload(self.bucket, self.key, upload_id)
            self.policy.upload_aborted(bucket=self.bucket, key=self.key, upload_id=upload_id)
        except Exception as err:  # cleanup must not hide the original error
            log.warning("could not abort upload %s of s3://%s/%s: %s", short_upload_id(upload_id),
                        self.bucket, self.key, err)
        if self.create_window is not None and not self.policy.orphans_to_job:
            self._abort_create_orphans()


_DONE = BufferPart(bytearray(), 0)
"""Stands in for a part whose upload finished (and which was released)."""
