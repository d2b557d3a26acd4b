"""Multipart uploads: Create, UploadPart, Complete (idempotent: an upload already completed is recognised by its
object), Abort and the listing of uploads in progress, the collaborator of :class:`~s3commit.store.s3store.S3Store`
for the requests every committer's data goes through.

Every request declares its :class:`~s3commit.store.retry.Retry` and is sent through the store's
:class:`~s3commit.store.requests.Requests`; an object is read back through the store's
:class:`~s3commit.store.objects.ObjectRequests`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from s3commit.errors import (
    ChecksumMismatchError,
    CompletionUnknownError,
    NoSuchUploadError,
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    TransientError,
    short_upload_id,
)
from s3commit.model.checksums import Sending, SentPart, complete_parts
from s3commit.model.object_info import CreateWindow, ObjectInfo, UploadInfo, is_completed_upload
from s3commit.store.body_policy import Payload, PayloadPolicy, sha256_hex
from s3commit.store.lean_complete import LeanCompletes
from s3commit.store.objects import ObjectRequests
from s3commit.store.requests import RequestGroup, Requests
from s3commit.store.responses import answered_at
from s3commit.store.retry import Attempts, Retry

log = logging.getLogger(__name__)


class UploadRequests(RequestGroup):
    """The multipart upload's requests. ``page_size``: ListMultipartUploads' MaxUploads (None: the server's
    default page, 1,000 on AWS)."""

    def __init__(self, requests: Requests, bodies: PayloadPolicy, objects: ObjectRequests) -> None:
        super().__init__(requests, bodies)
        self.objects = objects
        self.page_size: int | None = None
        #: Completes sent by s3commit's lean path where ``s3commit.store.lean-requests`` asks (else None).
        self.lean = LeanCompletes() if self.options.lean_requests else None

    def create_multipart_upload(self, bucket: str, key: str, *, content_type: str | None = None,
                                on_possible_orphan: Callable[[CreateWindow], None] | None = None) -> str:
        """Start an upload; returns its id. ``Retry.RECORDED``: an attempt whose answer was lost (500,
        timeout, reset) may have started an upload S3 never named to us, so a retry after one is allowed only
        with ``on_possible_orphan``, which is then called once, after the upload was created, with the window
        (S3's clock) in which such an orphan of ``key`` was initiated; the caller records it with the upload
        (upload marker, ``.pending``), and the job's clean-up aborts what it covers. Without the callback,
        only failures that never reached S3 (503 SlowDown, a refused connection) are retried."""
        args = dict(self.options.write_args())
        if content_type:
            args["ContentType"] = content_type
        if self.options.checksum_algorithm:  # every part then carries one, and Complete names them
            args["ChecksumAlgorithm"] = self.options.checksum_algorithm
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
                    body: bytes | bytearray | memoryview) -> SentPart:
        """Upload one part; returns its ETag and the checksum sent. ``Retry.IDEMPOTENT``: a part whose bytes did
        not arrive as sent (:class:`ChecksumMismatchError`) is re-sent from ``body`` like any transient failure.
        ``body`` is sent as it is, never copied (:mod:`s3commit.store.body_policy`; but see
        :mod:`s3commit.store.moto_inprocess`)."""
        sending = Sending(self.options.checksum_algorithm, body, etag_is_md5=self.bodies.verifies_etags(bucket))
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
        part_checksums: Sequence[str] = (),
    ) -> str:
        """Complete an upload from its ordered part ETags; returns the object's ETag.

        ``Retry.VERIFIED``, so completing is idempotent: when S3 says the upload is unknown (an earlier
        commit or attempt completed it), keeps failing, or answers 412 after an attempt whose answer was lost,
        the object decides (:meth:`completed_object`: this upload's multipart ETag, or its length when the
        ETag cannot be predicted): if it is this upload's, the completion happened and counts as done. With
        ``if_none_match`` the object must not exist yet (``If-None-Match: *``): a key that exists with other
        content raises :class:`PreconditionFailedError`. ``created_ms``: when the upload was started.
        """
        parts = complete_parts(etags, checksum_algorithm, part_checksums)
        extra = {"IfNoneMatch": "*"} if if_none_match else {}
        attempts = Attempts()
        client, lean = self.client, self.lean
        if lean is not None and lean.usable(client, bucket):
            def send() -> Any:  # one attempt, built and signed here (s3commit.store.lean_complete)
                return lean.complete(client, bucket, key, upload_id, parts, if_none_match=if_none_match)
        else:
            def send() -> Any:
                return client.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **extra)
        try:
            response = self.requests.call(
                "CompleteMultipartUpload", send,
                retry=Retry.VERIFIED, attempts=attempts, bucket=bucket, key=key, upload_id=upload_id,
            )
        except (NoSuchUploadError, TransientError, PreconditionFailedError) as err:
            if isinstance(err, PreconditionFailedError) and not attempts.ambiguous:
                raise  # no attempt can have completed it: the object there is someone else's
            try:
                done = self.completed_object(bucket, key, etags, length=expected_length, created_ms=created_ms)
            except StoreError as unread:
                raise CompletionUnknownError(
                    f"the Complete may have taken effect ({err.code or type(err).__name__}), and the object could not "
                    f"be read back to tell: {unread}", operation="CompleteMultipartUpload", bucket=bucket, key=key,
                    upload_id=upload_id, code="CompletionUnknown", attempts=attempts.made) from err
            if done is None:
                raise
            err.__suppress_context__ = True
            return done.etag
        return str(response.get("ETag", ""))

    def completed_object(self, bucket: str, key: str, etags: Sequence[str], *, length: int | None = None,
                         created_ms: int = 0) -> ObjectInfo | None:
        """The object at ``key`` if it is what the upload with these part ETags completed to, else ``None``:
        the one "already complete?" check (:func:`~s3commit.model.object_info.is_completed_upload`). One HEAD."""
        try:
            info = self.objects.head_object(bucket, key)
        except NotFoundError:
            return None
        return info if is_completed_upload(info, etags, length=length, created_ms=created_ms) else None

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
