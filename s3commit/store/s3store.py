"""S3Store: the only module that talks to S3 (boto3).

Owns, for every request: retries (tenacity, :mod:`s3commit.store.retry`; botocore's own retries are off), error
translation (:func:`s3commit.errors.translate_client_error`, once, keeping the cause), and counters by
operation (requests, retries, failures, bytes uploaded, bytes copied server-side). Each method declares in
code how its request may be retried (:class:`~s3commit.store.retry.Retry`: ``IDEMPOTENT``, ``VERIFIED`` or
``RECORDED``), which decides what a retry may cost:

=====================================  ===========  ========================================================
method                                 retry        after an attempt that may have taken effect unseen
=====================================  ===========  ========================================================
create_multipart_upload                RECORDED     retried only if the caller records the Create's window
complete_multipart_upload              VERIFIED     NoSuchUpload / 412 / exhausted: HEAD decides if it is ours
put_object(if_none_match=True)         VERIFIED     a 412 after an ambiguous attempt: read back, same bytes
put_if_match, delete_if_match          VERIFIED     (:mod:`s3commit.store.conditional`) read back after a lost answer
every other method                     IDEMPOTENT   retried as it is
=====================================  ===========  ========================================================

It knows nothing of committers, manifests or layouts. It is picklable: the client is rebuilt lazily in
each process (boto3 clients do not pickle), counters start afresh.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from s3commit.config.options import StoreOptions
from s3commit.errors import (
    ChecksumMismatchError,
    CompletionUnknownError,
    NoSuchUploadError,
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    TransientError,
    error_class_for_code,
    short_upload_id,
)
from s3commit.model.checksums import Sending, SentPart, complete_parts
from s3commit.model.object_info import CreateWindow, ObjectInfo, UploadInfo, is_completed_upload, multipart_etag
from s3commit.store.body_policy import Payload, PayloadPolicy, sha256_hex
from s3commit.store.capabilities import Capabilities
from s3commit.store.conditional import ConditionalRequests
from s3commit.store.counters import StoreCounters
from s3commit.store.ranged_gets import RangedGets
from s3commit.store.requests import Requests
from s3commit.store.responses import answered_at, read_get_body
from s3commit.store.retry import Attempts, Retry

__all__ = ["DELETE_BATCH", "ObjectInfo", "S3Store", "StoreCounters", "UploadInfo", "multipart_etag"]

log = logging.getLogger(__name__)

DELETE_BATCH = 1000
"""S3's maximum number of keys in one DeleteObjects request."""


class S3Store:
    """Every S3 request s3commit makes goes through here.

    Args:
        options: endpoint, credentials, retry policy, write options (SSE, storage class, ACL).
        client: an existing boto3 S3 client to use instead of building one (not pickled;
            :func:`~s3commit.store.moto_inprocess.adapt`).
        sleep: injectable backoff sleep, for tests.

    Composed of collaborators: :class:`~s3commit.store.requests.Requests` (the choke point every request goes
    through), :class:`~s3commit.store.body_policy.PayloadPolicy` (what is checked of the bodies sent) and
    :class:`~s3commit.store.conditional.ConditionalRequests` (the requests that check before they act).
    """

    def __init__(
        self,
        options: StoreOptions | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options or StoreOptions()
        #: The one choke point: the client, retries, error translation, counters (:mod:`s3commit.store.requests`).
        self.requests = Requests(self.options, client=client, sleep=sleep)
        self.counters = self.requests.counters
        #: ListMultipartUploads' MaxUploads (None: the server's default page, 1,000 on AWS).
        self.upload_page_size: int | None = None
        #: What each bucket's store was seen to honour (:mod:`s3commit.store.capability_cache` fills it).
        self.capabilities: dict[str, Capabilities] = {}
        #: What the store checks of the bodies it sends, per bucket (:mod:`s3commit.store.body_policy`).
        self.bodies = PayloadPolicy(self.options, self.capabilities)
        #: The requests that check before they act (:mod:`s3commit.store.conditional`).
        self.conditional = ConditionalRequests(self.requests, self.bodies)
        self._ranges = RangedGets()

    # --- pickling: ship options and what is known of the store, not the client --------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "capabilities": dict(self.capabilities)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]
        self.capabilities.update(state.get("capabilities") or {})

    # --- plumbing -------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The boto3 S3 client (built on first use in each process)."""
        return self.requests.client

    def verifies_etags(self, bucket: str) -> bool:
        """:meth:`PayloadPolicy.verifies_etags`."""
        return self.bodies.verifies_etags(bucket)

    def signs_payload(self, bucket: str) -> bool | None:
        """:meth:`PayloadPolicy.signs_payload`."""
        return self.bodies.signs_payload(bucket)

    def send_once(self, operation: str, bucket: str, key: str | None = None, **params: Any) -> Any:
        """One request for a capability probe (:meth:`Requests.send_once`)."""
        return self.requests.send_once(operation, bucket, key, **params)

    # --- requests that check before they act (:class:`ConditionalRequests`) ------------------------

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str, *, content_type: str | None = None) -> str:
        return self.conditional.put_if_match(bucket, key, body, etag, content_type=content_type)

    def delete_if_match(self, bucket: str, key: str, etag: str) -> None:
        self.conditional.delete_if_match(bucket, key, etag)

    def delete_objects_if_match(self, bucket: str, objects: Iterable[tuple[str, str]]) -> tuple[int, list[str]]:
        return self.conditional.delete_objects_if_match(bucket, objects)

    def read_object(self, bucket: str, key: str) -> tuple[bytes, ObjectInfo, datetime]:
        return self.conditional.read_object(bucket, key)

    def delete_quietly(self, bucket: str, key: str) -> None:
        self.conditional.delete_quietly(bucket, key)

    def head_bucket(self, bucket: str) -> None:
        self.conditional.head_bucket(bucket)

    # --- multipart uploads ----------------------------------------------------------------------

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
        sending = Sending(self.options.checksum_algorithm, body, etag_is_md5=self.verifies_etags(bucket))
        where = f"part {part_number} of s3://{bucket}/{key} (upload {short_upload_id(upload_id)})"
        signed, sha256 = self.signs_payload(bucket), sha256_hex(sending.algorithm, sending.value)

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
        try:
            response = self.requests.call(
                "CompleteMultipartUpload",
                lambda: self.client.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **extra),
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
            info = self.head_object(bucket, key)
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
            if self.upload_page_size:
                args["MaxUploads"] = self.upload_page_size
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

    # --- objects --------------------------------------------------------------------------------

    def put_object(self, bucket: str, key: str, body: bytes | bytearray | memoryview, *, if_none_match: bool = False,
                   content_type: str | None = None) -> str:
        """Write a whole object; returns its ETag. ``Retry.IDEMPOTENT`` (same bytes).

        With ``if_none_match`` the key must not exist (``If-None-Match: *``): ``Retry.VERIFIED``. When an
        attempt's answer was lost and a retry then meets an object (412), the object is read back and, if it
        holds exactly ``body``, it is ours and the PUT succeeded; otherwise, and always when no attempt can
        have applied (a 412 first, or after 503s only), :class:`PreconditionFailedError`: someone else's.
        """
        args: dict[str, Any] = dict(self.options.write_args())
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if content_type:
            args["ContentType"] = content_type
        sending = Sending(self.options.checksum_algorithm, body, etag_is_md5=self.verifies_etags(bucket))
        args.update(sending.args())
        signed, sha256 = self.signs_payload(bucket), sha256_hex(sending.algorithm, sending.value)

        def send() -> Any:
            response = self.client.put_object(Bucket=bucket, Key=key, Body=Payload(body, signed=signed,
                                                                                  sha256_hex=sha256), **args)
            if not sending.arrived(str(response.get("ETag", ""))) and if_none_match:
                self.client.delete_object(Bucket=bucket, Key=key)  # ours, corrupt: the retry must not meet it
            return sending.check(f"s3://{bucket}/{key}", response)

        attempts = Attempts()
        try:
            response = self.requests.call("PutObject", send,
                                          retry=Retry.VERIFIED if if_none_match else Retry.IDEMPOTENT,
                                          attempts=attempts, bucket=bucket, key=key)
        except PreconditionFailedError as err:
            read = self.conditional.read_if_exists(bucket, key) if attempts.ambiguous else None
            if read is None or read[0] != body:
                raise
            err.__suppress_context__ = True
            return read[1].etag
        self.counters.add_bytes(uploaded=memoryview(body).nbytes)
        return str(response.get("ETag", ""))

    def get_object(self, bucket: str, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        """Read an object, or the byte range ``[start, end)``. ``Retry.IDEMPOTENT``."""
        args: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if start is not None or end is not None:
            first = start or 0
            args["Range"] = f"bytes={first}-{'' if end is None else end - 1}"

        def read() -> bytes:
            return bytes(self.client.get_object(**args)["Body"].read())

        return self.requests.call("GetObject", read, retry=Retry.IDEMPOTENT, bucket=bucket, key=key)

    def stream_object(self, bucket: str, key: str, *, start: int, end: int,
                      chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """Bytes ``[start, end)`` of an object as they arrive, in chunks of at most ``chunk_size``: one GET
        streamed (:mod:`s3commit.store.ranged_gets`), never the whole range in memory. ``Retry.IDEMPOTENT``, in
        one retry loop (:meth:`Requests.retrying`): a GET that fails, or whose body fails part way (a reset, a
        timeout, a short body), is followed by a new GET from the next byte not yet read, and all of them share
        the policy's attempts; each retry is counted once.
        """
        position = start
        seen = Attempts()
        try:
            for attempt in self.requests.retrying("GetObject", Retry.IDEMPOTENT):
                with attempt:
                    body = self.requests.attempt("GetObject", lambda p=position: self._ranges.get(  # type: ignore[misc]
                        self.client, bucket, key, p, end - 1), seen, bucket=bucket, key=key)["Body"]
                    try:
                        while position < end:
                            data = read_get_body(body, min(chunk_size, end - position), bucket, key, position)
                            position += len(data)
                            yield data
                    finally:
                        body.close()
        except StoreError as err:
            self.requests.gave_up("GetObject", err, seen)
            raise

    def head_object(self, bucket: str, key: str, *, checksums: bool = False) -> ObjectInfo:
        """Metadata of an object (``checksums``: with the checksums S3 keeps); raises :class:`NotFoundError`."""
        mode = {"ChecksumMode": "ENABLED"} if checksums else {}
        response = self.requests.call("HeadObject", lambda: self.client.head_object(Bucket=bucket, Key=key, **mode),
                                      retry=Retry.IDEMPOTENT, bucket=bucket, key=key)
        return ObjectInfo(key, int(response.get("ContentLength", 0)), str(response.get("ETag", "")),
                          response.get("LastModified"), tuple((name[8:], str(value)) for name, value in
                                                              response.items() if name.startswith("Checksum")
                                                              and name != "ChecksumType"))

    def list_objects(self, bucket: str, prefix: str, *, delimiter: str | None = None) -> Iterator[ObjectInfo]:
        """Objects under ``prefix``, all pages; with a delimiter also common prefixes (``size == -1``).
        ``Retry.IDEMPOTENT``."""
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if delimiter:
                args["Delimiter"] = delimiter
            if token:
                args["ContinuationToken"] = token
            page = self.requests.call("ListObjectsV2",
                                      lambda a=args: self.client.list_objects_v2(**a),  # type: ignore[misc]
                                      retry=Retry.IDEMPOTENT, bucket=bucket, key=prefix)
            for common in page.get("CommonPrefixes", []) or []:
                yield ObjectInfo(common["Prefix"], -1)
            for obj in page.get("Contents", []) or []:
                yield ObjectInfo(obj["Key"], int(obj.get("Size", 0)), str(obj.get("ETag", "")),
                                 obj.get("LastModified"))
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def delete_object(self, bucket: str, key: str) -> None:
        """Delete one object (a missing one is fine). ``Retry.IDEMPOTENT``."""
        self.requests.call("DeleteObject", lambda: self.client.delete_object(Bucket=bucket, Key=key),
                           retry=Retry.IDEMPOTENT, bucket=bucket, key=key)

    def delete_objects(self, bucket: str, keys: Iterable[str]) -> int:
        """Delete keys in batches of 1,000; returns how many were deleted. ``Retry.IDEMPOTENT``."""
        batch: list[str] = []
        deleted = 0
        for key in keys:
            batch.append(key)
            if len(batch) == DELETE_BATCH:
                deleted += self._delete_batch(bucket, batch)
                batch = []
        if batch:
            deleted += self._delete_batch(bucket, batch)
        return deleted

    def _delete_batch(self, bucket: str, keys: list[str]) -> int:
        request = {"Objects": [{"Key": k} for k in keys], "Quiet": True}
        response = self.requests.call("DeleteObjects",
                                      lambda: self.client.delete_objects(Bucket=bucket, Delete=request),
                                      retry=Retry.IDEMPOTENT, bucket=bucket, key=keys[0])
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise error_class_for_code(first.get("Code"))(
                f"{len(errors)} of {len(keys)} deletes failed; first: {first.get('Message', '')}",
                operation="DeleteObjects", bucket=bucket, key=first.get("Key"), code=first.get("Code"),
            )
        return len(keys)

    def copy_object(self, bucket: str, src_key: str, dst_key: str, *, size: int | None = None) -> str:
        """Server-side copy (what a "rename" costs on S3); returns the new ETag. ``Retry.IDEMPOTENT``.

        ``size`` (if known from a listing) is only used to count bytes copied; otherwise it is looked up.
        """
        if size is None:
            size = self.head_object(bucket, src_key).size
        args = dict(self.options.write_args())
        response = self.requests.call(
            "CopyObject",
            lambda: self.client.copy_object(Bucket=bucket, Key=dst_key,
                                            CopySource={"Bucket": bucket, "Key": src_key}, **args),
            retry=Retry.IDEMPOTENT, bucket=bucket, key=dst_key,
        )
        self.counters.add_bytes(copied=size)
        return str(response.get("CopyObjectResult", {}).get("ETag", ""))
