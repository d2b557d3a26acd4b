"""Multipart uploads: Create, UploadPart, Complete (idempotent: an upload already completed is recognised by its
object), Abort and the listing of uploads in progress, the collaborator of :class:`~s3commit.store.s3store.S3Store`
for the requests every committer's data goes through.

Every request declares its :class:`~s3commit.store.retry.Retry` and is sent through the store's
:class:`~s3commit.store.requests.Requests`; an object is read back through the store's
:class:`~s3commit.store.objects.ObjectRequests`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, TypeVar

from s3commit.errors import (
    ChecksumMismatchError,
    CompletionUnknownError,
    EndpointUnreachableError,
    NoSuchUploadError,
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    ThrottledError,
    TransientError,
    short_upload_id,
    translate_client_error,
)
from s3commit.model.checksums import Sending, SentPart, complete_parts
from s3commit.model.object_info import CreateWindow, ObjectInfo, UploadInfo, is_completed_upload
from s3commit.store.body_policy import Payload, PayloadPolicy, sha256_hex
from s3commit.store.concurrency import SLOT_POLL_SECONDS, ConcurrencyLimit
from s3commit.store.lean_complete import answer_of
from s3commit.store.lean_http import Connections, Feed, LeanLoop, Origin, Unanswered, settings_of
from s3commit.store.objects import ObjectRequests
from s3commit.store.requests import RequestGroup, Requests
from s3commit.store.responses import answered_at
from s3commit.store.retry import Attempts, Retry

log = logging.getLogger(__name__)

Tag = TypeVar("Tag")
COMPLETE = "CompleteMultipartUpload"
SETTLERS = 32
"""Threads that settle the Completes :meth:`UploadRequests.complete_many` does not settle at once (retries,
read-backs): few are needed while a store answers, and each waits in its own retry loop."""
CALLS_AHEAD = 1024
"""Calls read ahead of the loop that sends them (:meth:`UploadRequests.complete_many`)."""
ROOM_EVERY = 64
"""The loop gives the reader room for this many calls at once (a semaphore's release wakes a thread: per call it
was ~4% of the loop's CPU)."""



class UploadRequests(RequestGroup):
    """The multipart upload's requests. ``page_size``: ListMultipartUploads' MaxUploads (None: the server's
    default page, 1,000 on AWS)."""

    def __init__(self, requests: Requests, bodies: PayloadPolicy, objects: ObjectRequests) -> None:
        super().__init__(requests, bodies)
        self.objects = objects
        self.page_size: int | None = None
        #: Completes sent by s3commit's lean path where ``s3commit.store.lean-requests`` asks (else None): the
        #: store's one (:attr:`ObjectRequests.lean`).
        self.lean = objects.lean

    def create_multipart_upload(self, bucket: str, key: str, *, content_type: str | None = None,
                                on_possible_orphan: Callable[[CreateWindow], None] | None = None,
                                checksum_algorithm: str | EllipsisType | None = ...) -> str:
        """Start an upload; returns its id. ``Retry.RECORDED``: an attempt whose answer was lost (500,
        timeout, reset) may have started an upload S3 never named to us, so a retry after one is allowed only
        with ``on_possible_orphan``, which is then called once, after the upload was created, with the window
        (S3's clock) in which such an orphan of ``key`` was initiated; the caller records it with the upload
        (upload marker, ``.pending``), and the job's clean-up aborts what it covers. Without the callback,
        only failures that never reached S3 (503 SlowDown, a refused connection) are retried.
        ``checksum_algorithm``: what every part of the upload will carry (``...``: the bucket's,
        :meth:`PayloadPolicy.algorithm`; its caller passes the same to :meth:`upload_part`)."""
        args = dict(self.options.write_args())
        if content_type:
            args["ContentType"] = content_type
        algorithm = self.checksum_algorithm(bucket) if checksum_algorithm is ... else checksum_algorithm
        if algorithm:  # every part then carries one, and Complete names them
            args["ChecksumAlgorithm"] = algorithm
        attempts = Attempts()
        response = self.requests.call(
            "CreateMultipartUpload",
            lambda: self.client.create_multipart_upload(Bucket=bucket, Key=key, **args),
            retry=Retry.RECORDED, attempts=attempts, recorded=on_possible_orphan is not None,
            bucket=bucket, key=key,
        )
        upload_id = str(response["UploadId"])
        if attempts.ambiguous and on_possible_orphan is not None:
            window = CreateWindow.around(answered_at(response), time.monotonic() - attempts.first_sent)
            log.info("s3://%s/%s: %d CreateMultipartUpload attempts lost their answer; uploads of the key "
                     "initiated in %s are orphans of this job", bucket, key, attempts.ambiguous, window.encode())
            on_possible_orphan(window)
        return upload_id

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                    body: bytes | bytearray | memoryview, *,
                    checksum_algorithm: str | EllipsisType | None = ...) -> SentPart:
        """Upload one part; returns its ETag and the checksum sent. ``Retry.IDEMPOTENT``: a part whose bytes did
        not arrive as sent (:class:`ChecksumMismatchError`) is re-sent from ``body`` like any transient failure.
        ``body`` is sent as it is, never copied (:mod:`s3commit.store.body_policy`; but see
        :mod:`s3commit.store.moto_inprocess`). ``checksum_algorithm``: the one the upload's Create named (``...``:
        the bucket's now)."""
        algorithm = self.checksum_algorithm(bucket) if checksum_algorithm is ... else checksum_algorithm
        sending = Sending(algorithm, body, etag_is_md5=self.bodies.verifies_etags(bucket))
        where = f"part {part_number} of s3://{bucket}/{key} (upload {short_upload_id(upload_id)})"
        signed, sha256 = self.bodies.signs_payload(bucket), sha256_hex(sending.algorithm, sending.value)

        def send() -> Any:
            return sending.check(where, self.client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=part_number,
                Body=Payload(body, signed=signed, sha256_hex=sha256), **sending.args()))

        try:
            response = self.requests.call("UploadPart", send, retry=Retry.IDEMPOTENT, bucket=bucket, key=key,
                                          upload_id=upload_id)
        except ChecksumMismatchError as err:
            raise ChecksumMismatchError(
                f"{where} could not be sent intact in {err.attempts} attempt(s) ({sending.describe()}): "
                f"{err.detail}",
                operation="UploadPart", bucket=bucket, key=key, upload_id=upload_id, code=err.code,
                attempts=err.attempts) from err
        self.counters.add_bytes(uploaded=memoryview(body).nbytes)
        return SentPart(str(response["ETag"]), sending.value)

    def complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, etags: Sequence[str], *, expected_length: int | None = None,
        if_none_match: bool = False, created_ms: int = 0, checksum_algorithm: str | None = None,
        part_checksums: Sequence[str] = (), attempts: Attempts | None = None,
    ) -> str:
        """Complete an upload from its ordered part ETags; returns the object's ETag.

        ``Retry.VERIFIED``, so completing is idempotent: when S3 says the upload is unknown (an earlier
        commit or attempt completed it), keeps failing, or answers 412 after an attempt whose answer was lost,
        the object decides (:meth:`completed_object`: this upload's multipart ETag, or its length when the
        ETag cannot be predicted): if it is this upload's, the completion happened and counts as done. With
        ``if_none_match`` the object must not exist yet (``If-None-Match: *``): a key that exists with other
        content raises :class:`PreconditionFailedError`. ``created_ms``: when the upload was started.
        ``attempts``: what earlier attempts of this Complete did (:meth:`complete_many` hands one on).
        """
        call = CompleteCall(bucket, key, upload_id, tuple(etags), expected_length=expected_length,
                            if_none_match=if_none_match, created_ms=created_ms,
                            checksum_algorithm=checksum_algorithm, part_checksums=tuple(part_checksums))
        parts = call.parts()
        attempts = attempts if attempts is not None else Attempts()
        client, lean = self.client, self.lean
        extra = {"IfNoneMatch": "*"} if if_none_match else {}

        def by_botocore() -> Any:
            return client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **extra)

        if lean is not None and lean.usable(client, bucket):
            def send() -> Any:  # one attempt, built and signed here (s3commit.store.lean_complete)
                return lean.attempt(bucket, lambda: lean.complete(client, bucket, key, upload_id, parts,
                                                                  if_none_match=if_none_match), by_botocore)
        else:
            send = by_botocore
        try:
            response = self.requests.call(
                "CompleteMultipartUpload", send,
                retry=Retry.VERIFIED, attempts=attempts, bucket=bucket, key=key, upload_id=upload_id,
            )
        except (NoSuchUploadError, TransientError, PreconditionFailedError) as err:
            return self._settled(call, err, attempts)
        return str(response.get("ETag", ""))

    def _settled(self, call: CompleteCall, err: StoreError, attempts: Attempts) -> str:
        """The ETag of the object ``call``'s upload completed to, where ``err`` (NoSuchUpload, a transient failure
        or a 412) may hide an earlier attempt's success and the object shows one; else ``err`` raised."""
        if isinstance(err, PreconditionFailedError) and not attempts.ambiguous:
            raise err  # no attempt can have completed it: the object there is someone else's
        try:
            done = self.completed_object(call.bucket, call.key, call.etags, length=call.expected_length,
                                         created_ms=call.created_ms)
        except StoreError as unread:
            raise CompletionUnknownError(
                f"the Complete may have taken effect ({err.code or type(err).__name__}), and the object could not "
                f"be read back to tell: {unread}", operation="CompleteMultipartUpload", bucket=call.bucket,
                key=call.key, upload_id=call.upload_id, code="CompletionUnknown", attempts=attempts.made) from err
        if done is None:
            raise err
        err.__suppress_context__ = True
        return done.etag

    # --- many Completes from one thread -------------------------------------------------------------------------

    def can_complete_many(self, bucket: str) -> bool:
        """Whether :meth:`complete_many` sends ``bucket``'s Completes on connections of its own (the lean path,
        ``s3commit.store.lean-requests``, on plain HTTP(S): :mod:`s3commit.store.lean_http`). Not for a subclass
        that overrides :meth:`complete_multipart_upload` and not this: its override is called for every Complete."""
        own = type(self)
        if own.complete_multipart_upload is not UploadRequests.complete_multipart_upload \
                and own.complete_many is UploadRequests.complete_many:
            return False  # a subclass that sees each Complete (a fault injected, an audit) is called for each one
        return self.lean is not None and self.lean.own_connections(self.client, bucket) is not None

    def complete_many(self, calls: Iterable[tuple[Tag, CompleteCall]], *, done: Callable[[Tag, str], None],
                      most: int | None = None, stop_on_failure: bool = True, settlers: int = SETTLERS,
                      loop: LeanLoop | None = None) -> list[tuple[Tag, BaseException]]:
        """Complete every upload of ``calls`` (``(tag, call)`` pairs, read as they are sent), as many in flight as
        the adaptive limit of each call's prefix allows (:mod:`s3commit.store.concurrency`, shared with every other
        request of the process), from one event loop (:mod:`s3commit.store.lean_http`; see
        :meth:`can_complete_many`, which must hold for every call's bucket). ``done(tag, etag)`` is called for each
        upload completed (from the loop's thread or a settler's). ``most``: a cap of this call's own on the Completes
        in flight (a user's ``fs.s3a.committer.threads``), below the limit's.

        Each call is one attempt where it succeeds, as :meth:`complete_multipart_upload`'s first would be (counted
        the same); a call it does not settle at once goes on in :meth:`complete_multipart_upload` on one of
        ``settlers`` threads, with what its first attempt did: a throttled, transient or lost answer is retried
        there under the store's policy, NoSuchUpload and an ambiguous 412 are read back, so that the outcome of
        every call is the outcome it has one at a time. A definite refusal (403, 400, a 412 after a clean attempt)
        is not sent again. Returns the failures, ``(tag, error)``, in the order they happened; with
        ``stop_on_failure`` the first stops calls not yet sent (those in flight end). An exception raised by
        ``calls`` itself is raised once those in flight end.

        ``loop``: the loop they are sent from, on its connections (:meth:`ObjectRequests.lean_loop
        <s3commit.store.objects.ObjectRequests.lean_loop>`: opened ahead, left open for what follows); else a
        loop of their own, on connections opened as the first Completes go."""
        work = _Many(self, calls, done, stop_on_failure, most)
        with ThreadPoolExecutor(settlers, thread_name_prefix="s3commit-settle") as settle, \
                contextlib.ExitStack() as stack:
            on = loop if loop is not None else stack.enter_context(LeanLoop(name="s3commit-complete-loop"))
            on.run(work.run(settle, on))
        if work.raised is not None:
            raise work.raised
        return work.failures

    def completed_object(self, bucket: str, key: str, etags: Sequence[str], *, length: int | None = None,
                         created_ms: int = 0) -> ObjectInfo | None:
        """The object at ``key`` if it is what the upload with these part ETags completed to, else ``None``:
        the one "already complete?" check (:func:`~s3commit.model.object_info.is_completed_upload`). One HEAD."""
        try:
            info = self.objects.head_object(bucket, key)
        except NotFoundError:
            return None
        return info if is_completed_upload(info, etags, length=length, created_ms=created_ms,
                                           multipart_etags=self.bodies.multipart_etags(bucket)) else None

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """Abort an upload. ``Retry.IDEMPOTENT``: an unknown upload counts as aborted."""
        with contextlib.suppress(NoSuchUploadError):
            self.requests.call(
                "AbortMultipartUpload",
                lambda: self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id),
                retry=Retry.IDEMPOTENT, bucket=bucket, key=key, upload_id=upload_id,
            )

    def abort_create_orphans(self, bucket: str, key: str, window: CreateWindow, *, keep: str) -> int:
        """Abort what a Create whose answer was lost may have left: the uploads of exactly ``key`` initiated
        inside ``window``, other than ``keep`` (the upload the Create returned). Returns how many."""
        orphans = [u for u in self.list_multipart_uploads(bucket, key)
                   if u.key == key and u.upload_id != keep and window.contains(u.initiated)]
        for upload in orphans:
            self.abort_multipart_upload(bucket, key, upload.upload_id)
        return len(orphans)

    def list_multipart_uploads(self, bucket: str, prefix: str) -> Iterator[UploadInfo]:
        """Uploads in progress under ``prefix``, all pages. ``Retry.IDEMPOTENT``."""
        key_marker: str | None = None
        upload_marker: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if self.page_size:
                args["MaxUploads"] = self.page_size
            if key_marker is not None:
                args["KeyMarker"] = key_marker
                if upload_marker:
                    args["UploadIdMarker"] = upload_marker
            try:
                page = self.requests.call("ListMultipartUploads",
                                          lambda a=args: self.client.list_multipart_uploads(**a),  # type: ignore[misc]
                                          retry=Retry.IDEMPOTENT, bucket=bucket, key=prefix)
            except NoSuchUploadError:
                return  # rclone's answer while its bucket has no upload at all (docs/test-servers.md)
            for upload in page.get("Uploads", []) or []:
                yield UploadInfo(upload["Key"], upload["UploadId"], upload.get("Initiated"))
            if not page.get("IsTruncated"):
                return
            key_marker = page.get("NextKeyMarker")
            upload_marker = page.get("NextUploadIdMarker")
            if not key_marker:
                # SeaweedFS does this (docs/test-servers.md); it answers up to 10,000 uploads a page by default.
                log.warning("ListMultipartUploads of s3://%s/%s was truncated without NextKeyMarker: the "
                            "server cannot page this listing, uploads past this page are not listed",
                            bucket, prefix)
                return



@dataclass(frozen=True)
class CompleteCall:
    """One upload to complete, as :meth:`UploadRequests.complete_multipart_upload` takes it."""

    bucket: str
    key: str
    upload_id: str
    etags: tuple[str, ...]
    expected_length: int | None = None
    if_none_match: bool = False
    created_ms: int = 0
    checksum_algorithm: str | None = None
    part_checksums: tuple[str, ...] = ()

    def parts(self) -> list[dict[str, Any]]:
        return complete_parts(self.etags, self.checksum_algorithm, self.part_checksums)


class _Many:
    """One :meth:`UploadRequests.complete_many`: the loop's side."""

    def __init__(self, uploads: UploadRequests, calls: Iterable[tuple[Any, CompleteCall]],
                 done: Callable[[Any, str], None], stop_on_failure: bool, most: int | None) -> None:
        self.uploads, self.calls, self.done, self.stop_on_failure = uploads, calls, done, stop_on_failure
        self.most = most
        self.failures: list[tuple[Any, BaseException]] = []
        self.raised: BaseException | None = None
        self.stopped = False

    async def run(self, settle: ThreadPoolExecutor, on: LeanLoop) -> None:
        uploads = self.uploads
        lean, client = uploads.lean, uploads.client
        assert lean is not None
        requests, counters = uploads.requests, uploads.counters
        loop = asyncio.get_running_loop()
        connections: Connections | None = on.connections
        origins: dict[str, tuple[Origin, str]] = {}
        in_flight: set[asyncio.Future[None]] = set()
        freed = asyncio.Event()

        async def settled(tag: Any, work: Callable[..., str], *args: Any) -> None:
            """``work(*args)`` on a settler, its outcome recorded: what a first attempt left to do (``_settle``), or
            the Complete sent by botocore where the store refused the lean path's (``_resend``)."""
            try:
                etag = await loop.run_in_executor(settle, work, *args)
            except BaseException as err:
                self.failures.append((tag, err))
                if self.stop_on_failure:
                    self.stopped = True
                return
            finally:
                freed.set()
            self.done(tag, etag)

        async def one(tag: Any, call: CompleteCall, limit: ConcurrencyLimit, generation: int) -> None:
            attempts = Attempts(made=1, first_sent=time.monotonic())
            error: StoreError | None = None
            refused = False
            etag = ""
            if lean.was_refused(call.bucket):  # botocore's, on the settlers
                limit.release(generation, throttled=False)
                freed.set()
                await settled(tag, self._resend, call, Attempts())
                return
            counters.add("requests", COMPLETE)
            try:
                prepared = lean.prepare(client, call.bucket, call.key, call.upload_id, call.parts(),
                                        if_none_match=call.if_none_match)
                origin, host = origins[call.bucket]
                assert connections is not None
                answer = await connections.send(origin, host, "POST", prepared.path_query, prepared.headers,
                                                prepared.body)
                etag = str(answer_of(answer.status, answer.headers, answer.body)["ETag"])
            except Unanswered as err:
                error = (TransientError if err.sent else EndpointUnreachableError)(
                    str(err), operation=COMPLETE, bucket=call.bucket, key=call.key, upload_id=call.upload_id,
                    code="ConnectionLost" if err.sent else "ConnectionRefused")
            except Exception as err:  # botocore's ClientError of the answer: translated once, as the store does
                refused = lean.refused(call.bucket, err)
                if not refused:
                    error = translate_client_error(err, operation=COMPLETE, bucket=call.bucket, key=call.key,
                                                   upload_id=call.upload_id)
            finally:
                throttled = isinstance(error, ThrottledError)
                if throttled:
                    counters.add("throttles", COMPLETE)
                limit.release(generation, throttled=throttled)
                freed.set()
            if refused:
                await settled(tag, self._resend, call, Attempts())  # (the refused attempt was not acted on)
                return
            if error is None:
                self.done(tag, etag)
                return
            attempts.failed(error)
            await settled(tag, self._settle, call, error, attempts)

        ticks: asyncio.TimerHandle | None = None

        def poll() -> None:  # a slot another thread's request freed is seen within SLOT_POLL_SECONDS (no wait_for each)
            nonlocal ticks
            freed.set()
            ticks = loop.call_later(SLOT_POLL_SECONDS, poll)

        poll()
        ahead: Feed[tuple[Any, CompleteCall] | None] = Feed(loop)
        room = threading.Semaphore(CALLS_AHEAD)
        threading.Thread(target=self._read, args=(ahead, room), name="s3commit-complete-calls",
                         daemon=True).start()
        taken = 0
        try:
            while (item := await ahead.get()) is not None:
                taken += 1
                if taken == ROOM_EVERY:
                    room.release(taken)
                    taken = 0
                if self.stopped:
                    continue  # (read to the end: the reader stops at its next call)
                tag, call = item
                if lean.was_refused(call.bucket):  # one() hands it to botocore: no more in flight than the settlers
                    self.most = min(self.most or SETTLERS, SETTLERS)
                elif call.bucket not in origins:
                    target = lean.target(call.bucket) if lean.usable(client, call.bucket) else None
                    settings = settings_of(client, target.base) if target is not None else None
                    if target is None or settings is None:
                        raise ValueError(f"the Completes of bucket {call.bucket} cannot be sent on connections of "
                                         "s3commit's own (UploadRequests.can_complete_many)")
                    origins[call.bucket] = (Origin.of(target.base), target.host)
                    connections = connections or on.connections_for(settings)
                limit = requests.limit(call.bucket, call.key)
                while (self.most is not None and len(in_flight) >= self.most) \
                        or (generation := limit.try_acquire()) is None:  # a slot freed here, or (polled) elsewhere
                    freed.clear()
                    await freed.wait()  # set as each of this loop's requests ends, and by the poll's ticks
                if self.stopped:  # a failure while this call waited for a slot
                    limit.release(generation, throttled=False)
                    continue
                task = asyncio.ensure_future(one(tag, call, limit, generation))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
        except BaseException as err:
            self.raised, self.stopped = err, True
            while await ahead.get() is not None:  # let the reader end
                room.release()
        if ticks is not None:
            ticks.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)

    def _read(self, ahead: Feed[tuple[Any, CompleteCall] | None], room: threading.Semaphore) -> None:
        """On a thread of its own: the calls, read ahead of the loop (at most CALLS_AHEAD waiting). Reading them may
        send requests of its own (a pendingset's GET) that wait for a slot of the limit the loop's Completes hold:
        the loop must not wait for that. A failure of the calls' iterator (a lease lost) stops the Completes not
        yet sent and is raised once those in flight end."""
        try:
            for item in self.calls:
                if self.stopped:
                    break
                room.acquire()
                ahead.put(item)
        except BaseException as err:
            self.raised, self.stopped = err, True
        finally:
            ahead.put(None)

    def _resend(self, call: CompleteCall, attempts: Attempts) -> str:
        """On a settler thread: ``call`` sent by botocore, under the store's policy, on from ``attempts``."""
        return self.uploads.complete_multipart_upload(
            call.bucket, call.key, call.upload_id, call.etags, expected_length=call.expected_length,
            if_none_match=call.if_none_match, created_ms=call.created_ms, checksum_algorithm=call.checksum_algorithm,
            part_checksums=call.part_checksums, attempts=attempts)

    def _settle(self, call: CompleteCall, error: StoreError, attempts: Attempts) -> str:
        """On a settler thread: what the first attempt's ``error`` leaves to do (see ``complete_many``)."""
        uploads = self.uploads
        if isinstance(error, NoSuchUploadError) or (isinstance(error, PreconditionFailedError)
                                                     and not attempts.ambiguous):
            try:
                return uploads._settled(call, error, attempts)
            except StoreError as err:
                uploads.requests.gave_up(COMPLETE, err, attempts)
                raise
        if not Retry.VERIFIED.may_retry(error) or attempts.made >= uploads.options.retry.max_attempts:
            uploads.requests.gave_up(COMPLETE, error, attempts)
            raise error
        uploads.counters.add("retries", COMPLETE)
        # The store's retry loop goes on from this first attempt: after its back-off, within the same budget.
        return self._resend(call, attempts)
