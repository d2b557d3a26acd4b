"""S3Store: the only module that talks to S3 (boto3).

Owns, for every request: retries (tenacity, :mod:`s3commit.retry`; botocore's own retries are off), error
translation (:func:`s3commit.errors.translate_client_error`, once, keeping the cause), and counters by
operation (requests, retries, failures, bytes uploaded, bytes copied server-side). Each method says whether
it is idempotent, which decides what a retry may cost.

It knows nothing of committers, manifests or layouts. It is picklable: the client is rebuilt lazily in
each process (boto3 clients do not pickle), counters start afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from s3commit import redact
from s3commit.config import StoreOptions
from s3commit.errors import (
    NoSuchBucketError,
    NoSuchUploadError,
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    TransientError,
    error_class_for_code,
    translate_client_error,
)
from s3commit.retry import build_retrying, is_retryable

T = TypeVar("T")

DELETE_BATCH = 1000
"""S3's maximum number of keys in one DeleteObjects request."""


@dataclass(frozen=True)
class ObjectInfo:
    """An object (or, with ``size == -1``, a common prefix from a delimited listing)."""

    key: str
    size: int
    etag: str = ""
    last_modified: datetime | None = None

    @property
    def is_prefix(self) -> bool:
        return self.size < 0


@dataclass(frozen=True)
class UploadInfo:
    """A multipart upload in progress."""

    key: str
    upload_id: str
    initiated: datetime | None = None


def multipart_etag(part_etags: Sequence[str]) -> str | None:
    """The ETag S3 gives an object completed from these parts (md5 of the part md5s, ``-N``).

    ``None`` when a part ETag is not a plain MD5 (e.g. SSE-KMS), so it cannot be predicted.
    """
    try:
        digest = hashlib.md5(b"".join(bytes.fromhex(e.strip('"')) for e in part_etags), usedforsecurity=False)
    except ValueError:
        return None
    return f'"{digest.hexdigest()}-{len(part_etags)}"'


class StoreCounters:
    """Thread-safe counters of requests by operation; ``snapshot()`` gives a plain dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.bytes_uploaded = 0
        self.bytes_copied = 0

    def add(self, name: str, operation: str, amount: int = 1) -> None:
        with self._lock:
            getattr(self, name)[operation] += amount

    def add_bytes(self, *, uploaded: int = 0, copied: int = 0) -> None:
        with self._lock:
            self.bytes_uploaded += uploaded
            self.bytes_copied += copied

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(self.requests),
                "retries": dict(self.retries),
                "failures": dict(self.failures),
                "total_requests": sum(self.requests.values()),
                "bytes_uploaded": self.bytes_uploaded,
                "bytes_copied": self.bytes_copied,
            }

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.retries.clear()
            self.failures.clear()
            self.bytes_uploaded = 0
            self.bytes_copied = 0


class S3Store:
    """Every S3 request s3commit makes goes through here.

    Args:
        options: endpoint, credentials, retry policy, write options (SSE, storage class, ACL).
        client: an existing boto3 S3 client to use instead of building one (not pickled).
        sleep: injectable backoff sleep, for tests.
    """

    def __init__(
        self,
        options: StoreOptions | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options or StoreOptions()
        self._client = client
        self._sleep = sleep
        self._lock = threading.Lock()
        self.counters = StoreCounters()

    # --- pickling: ship options, not the client ---------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # --- plumbing -------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build_client()
        return self._client

    def _build_client(self) -> Any:
        import boto3
        from botocore.config import Config

        opts = self.options
        # botocore's DEBUG logs print request headers and signed strings: keep credentials out of them.
        redact.install((opts.access_key, opts.secret_key, opts.session_token))
        config = Config(
            # tenacity is the one retry owner: botocore makes exactly one attempt.
            retries={"total_max_attempts": 1, "mode": "standard"},
            max_pool_connections=opts.max_pool_connections,
            connect_timeout=opts.connect_timeout,
            read_timeout=opts.read_timeout,
            s3={"addressing_style": "path" if opts.path_style else "auto"},
            # Plain MD5-free uploads: newer botocore adds CRC checksums by default, which some
            # S3-compatible stores reject; only calculate when the operation requires it.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        session = boto3.session.Session(
            aws_access_key_id=opts.access_key,
            aws_secret_access_key=opts.secret_key,
            aws_session_token=opts.session_token,
            region_name=opts.region,
        )
        return session.client("s3", endpoint_url=opts.endpoint_url, config=config)

    def _call(
        self,
        operation: str,
        fn: Callable[[], T],
        *,
        bucket: str,
        key: str | None = None,
        upload_id: str | None = None,
    ) -> T:
        """Run one S3 request under the retry policy; translate its errors once."""
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            self.counters.add("requests", operation)
            try:
                return fn()
            except StoreError:
                raise
            except Exception as err:  # botocore raises many unrelated types; translate all once
                raise translate_client_error(
                    err, operation=operation, bucket=bucket, key=key, upload_id=upload_id
                ) from err

        retrying = build_retrying(
            self.options.retry, sleep=self._sleep,
            on_retry=lambda _state: self.counters.add("retries", operation),
        )
        try:
            return retrying(attempt)
        except StoreError as err:
            err.attempts = attempts
            self.counters.add("failures", operation)
            raise

    # --- multipart uploads ----------------------------------------------------------------------

    def create_multipart_upload(self, bucket: str, key: str, *, content_type: str | None = None) -> str:
        """Start an upload; returns its id. Not idempotent: a retry after a lost response orphans the
        first upload, which the job-scoped orphan sweep finds by key."""
        args = dict(self.options.write_args())
        if content_type:
            args["ContentType"] = content_type
        response = self._call(
            "CreateMultipartUpload",
            lambda: self.client.create_multipart_upload(Bucket=bucket, Key=key, **args),
            bucket=bucket, key=key,
        )
        return str(response["UploadId"])

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                    body: bytes | bytearray | memoryview) -> str:
        """Upload one part; returns its ETag. Idempotent (a part number can be re-sent).

        A ``bytes`` or ``bytearray`` body is hashed and sent as it is (botocore sends a bytes-like body with
        one ``sendall``); a ``memoryview`` is copied once, because botocore accepts only the former."""
        data = bytes(body) if isinstance(body, memoryview) else body
        response = self._call(
            "UploadPart",
            lambda: self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                            PartNumber=part_number, Body=data),
            bucket=bucket, key=key, upload_id=upload_id,
        )
        self.counters.add_bytes(uploaded=len(data))
        return str(response["ETag"])

    def complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, etags: Sequence[str], *, expected_length: int | None = None,
        if_none_match: bool = False,
    ) -> str:
        """Complete an upload from its ordered part ETags; returns the object's ETag.

        Idempotent: if S3 says the upload is unknown (or keeps failing) but the object already holds
        exactly this upload's content (same multipart ETag, or same length when the ETag cannot be
        predicted), the completion already happened (a lost response, or an earlier commit) and counts
        as done. With ``if_none_match`` the object must not exist yet (``If-None-Match: *``): a key that
        exists with other content raises :class:`PreconditionFailedError`.
        """
        parts = [{"PartNumber": i + 1, "ETag": etag} for i, etag in enumerate(etags)]
        extra = {"IfNoneMatch": "*"} if if_none_match else {}
        try:
            response = self._call(
                "CompleteMultipartUpload",
                lambda: self.client.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}, **extra),
                bucket=bucket, key=key, upload_id=upload_id,
            )
        except (NoSuchUploadError, TransientError, PreconditionFailedError) as err:
            if isinstance(err, PreconditionFailedError) and err.attempts <= 1:
                raise  # the first attempt met someone else's object
            # A 412 on a retry may be our own earlier attempt, whose answer was lost: look at the object.
            done = self._already_completed(bucket, key, etags, expected_length)
            if done is None:
                raise
            err.__suppress_context__ = True
            return done
        return str(response.get("ETag", ""))

    def _already_completed(
        self, bucket: str, key: str, etags: Sequence[str], expected_length: int | None
    ) -> str | None:
        try:
            info = self.head_object(bucket, key)
        except NotFoundError:
            return None
        expected = multipart_etag(etags)
        if expected is not None:
            return info.etag if info.etag == expected else None
        if expected_length is not None and info.size == expected_length:
            return info.etag
        return None

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """Abort an upload. Idempotent: an unknown upload counts as aborted."""
        with contextlib.suppress(NoSuchUploadError):
            self._call(
                "AbortMultipartUpload",
                lambda: self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id),
                bucket=bucket, key=key, upload_id=upload_id,
            )

    def list_multipart_uploads(self, bucket: str, prefix: str) -> Iterator[UploadInfo]:
        """Uploads in progress under ``prefix``, all pages. Idempotent."""
        key_marker: str | None = None
        upload_marker: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if key_marker is not None:
                args["KeyMarker"] = key_marker
                if upload_marker:
                    args["UploadIdMarker"] = upload_marker
            page = self._call("ListMultipartUploads",
                              lambda a=args: self.client.list_multipart_uploads(**a),  # type: ignore[misc]
                              bucket=bucket, key=prefix)
            for upload in page.get("Uploads", []) or []:
                yield UploadInfo(upload["Key"], upload["UploadId"], upload.get("Initiated"))
            if not page.get("IsTruncated"):
                return
            key_marker = page.get("NextKeyMarker")
            upload_marker = page.get("NextUploadIdMarker")
            if not key_marker:
                return

    # --- objects --------------------------------------------------------------------------------

    def put_object(self, bucket: str, key: str, body: bytes | bytearray, *, if_none_match: bool = False,
                   content_type: str | None = None) -> str:
        """Write a whole object; returns its ETag. Idempotent (same bytes).

        With ``if_none_match`` the key must not exist (``If-None-Match: *``), so retrying is safe only with
        a check: when an attempt's answer was lost and a retry then meets an object, the object is read back
        and, if it holds exactly ``body``, it is ours and the PUT succeeded; otherwise
        :class:`PreconditionFailedError` (someone else's object is there).
        """
        args: dict[str, Any] = dict(self.options.write_args())
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if content_type:
            args["ContentType"] = content_type
        try:
            response = self._call(
                "PutObject", lambda: self.client.put_object(Bucket=bucket, Key=key, Body=body, **args),
                bucket=bucket, key=key,
            )
        except PreconditionFailedError as err:
            if err.attempts <= 1 or not self._holds(bucket, key, body):
                raise
            err.__suppress_context__ = True
            return self.head_object(bucket, key).etag
        self.counters.add_bytes(uploaded=len(body))
        return str(response.get("ETag", ""))

    def _holds(self, bucket: str, key: str, body: bytes | bytearray) -> bool:
        """True if the object exists with exactly these bytes."""
        try:
            return self.get_object(bucket, key) == bytes(body)
        except NotFoundError:
            return False

    def get_object(self, bucket: str, key: str, *, start: int | None = None, end: int | None = None) -> bytes:
        """Read an object, or the byte range ``[start, end)``. Idempotent."""
        args: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if start is not None or end is not None:
            first = start or 0
            args["Range"] = f"bytes={first}-{'' if end is None else end - 1}"

        def read() -> bytes:
            return bytes(self.client.get_object(**args)["Body"].read())

        return self._call("GetObject", read, bucket=bucket, key=key)

    def stream_object(self, bucket: str, key: str, *, start: int, end: int,
                      chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """Bytes ``[start, end)`` of an object as they arrive, in chunks of at most ``chunk_size``: one GET
        streamed, never the whole range in memory. Idempotent: a transient failure part way (a reset, a
        timeout, a short body) resumes from the next byte with a new GET, within the retry policy's attempts.
        """
        position = start
        failures = 0
        while position < end:
            response = self._call(
                "GetObject",
                lambda p=position: self.client.get_object(  # type: ignore[misc]
                    Bucket=bucket, Key=key, Range=f"bytes={p}-{end - 1}"),
                bucket=bucket, key=key)
            body = response["Body"]
            try:
                while position < end:
                    data = body.read(min(chunk_size, end - position))
                    if not data:
                        raise TransientError(f"s3://{bucket}/{key}: the body ended at byte {position} of "
                                             f"{start}..{end}", operation="GetObject", bucket=bucket, key=key)
                    position += len(data)
                    yield data
            except Exception as err:
                error = err if isinstance(err, StoreError) else translate_client_error(
                    err, operation="GetObject", bucket=bucket, key=key)
                failures += 1
                if not is_retryable(error) or failures >= self.options.retry.max_attempts:
                    error.attempts = failures
                    self.counters.add("failures", "GetObject")
                    if error is err:
                        raise
                    raise error from err
                self.counters.add("retries", "GetObject")
                self._sleep(min(self.options.retry.max_delay, self.options.retry.initial_delay * 2 ** failures))
            finally:
                body.close()

    def head_object(self, bucket: str, key: str) -> ObjectInfo:
        """Metadata of an object; raises :class:`NotFoundError`. Idempotent."""
        response = self._call("HeadObject", lambda: self.client.head_object(Bucket=bucket, Key=key),
                              bucket=bucket, key=key)
        return ObjectInfo(key, int(response.get("ContentLength", 0)), str(response.get("ETag", "")),
                          response.get("LastModified"))

    def head_metadata(self, bucket: str, key: str) -> dict[str, Any]:
        """The full HEAD response (encryption, storage class, user metadata). Idempotent."""
        response = self._call("HeadObject", lambda: self.client.head_object(Bucket=bucket, Key=key),
                              bucket=bucket, key=key)
        return {k: v for k, v in response.items() if k != "ResponseMetadata"}

    def list_objects(self, bucket: str, prefix: str, *, delimiter: str | None = None) -> Iterator[ObjectInfo]:
        """Objects under ``prefix``, all pages; with a delimiter also common prefixes (``size == -1``).
        Idempotent."""
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
            if delimiter:
                args["Delimiter"] = delimiter
            if token:
                args["ContinuationToken"] = token
            page = self._call("ListObjectsV2",
                              lambda a=args: self.client.list_objects_v2(**a),  # type: ignore[misc]
                              bucket=bucket, key=prefix)
            for common in page.get("CommonPrefixes", []) or []:
                yield ObjectInfo(common["Prefix"], -1)
            for obj in page.get("Contents", []) or []:
                yield ObjectInfo(obj["Key"], int(obj.get("Size", 0)), str(obj.get("ETag", "")),
                                 obj.get("LastModified"))
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def delete_object(self, bucket: str, key: str) -> None:
        """Delete one object (a missing one is fine). Idempotent."""
        self._call("DeleteObject", lambda: self.client.delete_object(Bucket=bucket, Key=key),
                   bucket=bucket, key=key)

    def delete_objects(self, bucket: str, keys: Iterable[str]) -> int:
        """Delete keys in batches of 1,000; returns how many were deleted. Idempotent."""
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
        response = self._call("DeleteObjects",
                              lambda: self.client.delete_objects(Bucket=bucket, Delete=request),
                              bucket=bucket, key=keys[0])
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise error_class_for_code(first.get("Code"))(
                f"{len(errors)} of {len(keys)} deletes failed; first: {first.get('Message', '')}",
                operation="DeleteObjects", bucket=bucket, key=first.get("Key"), code=first.get("Code"),
            )
        return len(keys)

    def copy_object(self, bucket: str, src_key: str, dst_key: str, *, size: int | None = None) -> str:
        """Server-side copy (what a "rename" costs on S3); returns the new ETag. Idempotent.

        ``size`` (if known from a listing) is only used to count bytes copied; otherwise it is looked up.
        """
        if size is None:
            size = self.head_object(bucket, src_key).size
        args = dict(self.options.write_args())
        response = self._call(
            "CopyObject",
            lambda: self.client.copy_object(Bucket=bucket, Key=dst_key,
                                            CopySource={"Bucket": bucket, "Key": src_key}, **args),
            bucket=bucket, key=dst_key,
        )
        self.counters.add_bytes(copied=size)
        return str(response.get("CopyObjectResult", {}).get("ETag", ""))

    def head_bucket(self, bucket: str) -> None:
        """Check the bucket exists and is reachable. Raises :class:`NoSuchBucketError`. Idempotent."""
        try:
            self._call("HeadBucket", lambda: self.client.head_bucket(Bucket=bucket), bucket=bucket)
        except NotFoundError as err:
            raise NoSuchBucketError(
                f"bucket {bucket!r} does not exist", operation="HeadBucket", bucket=bucket,
                code="NoSuchBucket", attempts=err.attempts,
            ) from err
