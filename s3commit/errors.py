"""The exception hierarchy of s3commit, and the one place S3 error codes are translated.

Translation happens once, in :func:`translate_client_error`, by S3 error *code* (never by message text),
keeping the botocore exception as ``__cause__``. Every message names the operation, the object and, where
there is one, a short upload id, so an operator can tell what failed and what state is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def short_upload_id(upload_id: str | None, *, width: int = 12) -> str:
    """An upload id cut to ``width`` characters (an ellipsis marks the cut): enough to find it, short enough for
    a log line or a listing."""
    if not upload_id:
        return ""
    return upload_id if len(upload_id) <= width else f"{upload_id[:width - 2]}…"


class S3CommitError(Exception):
    """Base class of every error s3commit raises on purpose."""


class ConfigError(S3CommitError, ValueError):
    """Bad configuration or arguments: unknown committer, bad conflict mode, part size too small, bad URI."""


class StoreError(S3CommitError, OSError):
    """An S3 request failed (after the retries it was entitled to).

    Attributes:
        operation: the S3 API operation, e.g. ``CompleteMultipartUpload``.
        bucket, key, upload_id: the object concerned (``key``/``upload_id`` may be ``None``).
        code: the S3 error code (``SlowDown``, ``NoSuchUpload``...) or a transport error name.
        attempts: how many attempts were made.
    """

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        bucket: str | None = None,
        key: str | None = None,
        upload_id: str | None = None,
        code: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.operation = operation
        self.bucket = bucket
        self.key = key
        self.upload_id = upload_id
        self.code = code
        self.attempts = attempts
        self.detail = message
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"s3://{self.bucket}/{self.key}" if self.key is not None else f"s3://{self.bucket}"
        upload = f" (upload_id={short_upload_id(self.upload_id)})" if self.upload_id else ""
        attempts = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        code = f": {self.code}" if self.code else ""
        return f"{self.operation} failed for {where}{upload}{attempts}{code}: {self.detail}"

    def __str__(self) -> str:
        return self._describe()

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep errors picklable (they cross process boundaries in Spark and the sidecar).
        return (
            _rebuild_store_error,
            (type(self), self.detail, self.operation, self.bucket, self.key, self.upload_id, self.code,
             self.attempts),
        )


def _rebuild_store_error(cls: type[StoreError], detail: str, *args: Any) -> StoreError:
    operation, bucket, key, upload_id, code, attempts = args
    return cls(detail, operation=operation, bucket=bucket, key=key, upload_id=upload_id, code=code,
               attempts=attempts)


class NotFoundError(StoreError, FileNotFoundError):
    """The object does not exist (NoSuchKey, 404)."""


class NoSuchUploadError(NotFoundError):
    """The multipart upload is unknown: already completed, aborted (by this or another job) or never made."""


class NoSuchBucketError(NotFoundError):
    """The bucket does not exist."""


class AccessDeniedError(StoreError, PermissionError):
    """The credentials may not do this (AccessDenied, 403), or they are invalid."""


class ThrottledError(StoreError):
    """S3 asked us to slow down (503 SlowDown, RequestLimitExceeded, 429 Too Many Requests); retried with backoff
    before this is raised, and each one lowers the store's concurrency limit (:mod:`s3commit.store.concurrency`)."""


class TransientError(StoreError):
    """A 5xx, a timeout or a dropped connection: retried before this is raised."""


class ChecksumMismatchError(TransientError):
    """Bytes did not arrive as sent: the server refused a part or object whose checksum did not match
    (``BadDigest``), or the ETag it answered is not the MD5 of the bytes sent. Re-sent from the buffer a
    bounded number of times (the retry policy's attempts) before this is raised."""


class CompletionUnknownError(TransientError):
    """A Complete whose answer was lost may have taken effect, and its object could not be read back to tell: the
    caller must treat the upload as possibly completed (a roll-back reverts it if it is there)."""


class PreconditionFailedError(StoreError, FileExistsError):
    """A conditional write lost: the key already exists (If-None-Match) or changed (If-Match)."""


class EndpointUnreachableError(StoreError, ConnectionError):
    """The S3 endpoint could not be reached at all (connection refused, DNS)."""


class InvalidRequestError(StoreError):
    """S3 rejected the request as malformed (InvalidPart, EntityTooSmall, InvalidArgument...)."""


class ManifestError(S3CommitError, ValueError):
    """A ``.pending``, ``.pendingset``, ``_SUCCESS`` or journal file is corrupt, foreign or inconsistent."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


class CommitConflictError(S3CommitError, FileExistsError):
    """Conflict mode ``fail`` found existing output at the destination."""


class LeaseError(S3CommitError):
    """The destination's commit lease (:mod:`s3commit.commit.lease`) could not be held."""


class LeaseTimeoutError(LeaseError):
    """Another job held the destination's commit lease for longer than this job would wait (the message names it)."""


class LeaseLostError(LeaseError):
    """This job's commit lease was taken over (its renewals stopped for longer than its duration): the commit stops."""


class CommitStateError(S3CommitError):
    """A lifecycle call out of order: task attempt not set up, job already committed, ..."""


class JobSweptError(CommitStateError):
    """This job was judged dead (its liveness record silent longer than ``s3commit.job.liveness``) and swept by
    another job or ``s3commit uploads sweep``: its uploads were aborted, so it cannot commit."""


class JournalExistsError(CommitStateError):
    """The job already has a commit journal: another commit of it is running, or one was interrupted."""


class PendingsetMissingError(CommitStateError):
    """A pendingset the job commit was given is gone: the job committed (and began its clean-up) or aborted."""


class OutputMismatchError(S3CommitError):
    """``validate_output``: a committed object is not what its manifest says (size or checksum)."""


class SinkRecoveryError(S3CommitError):
    """A streaming batch the sink's log has committed could not be completed (its files are not all visible)."""


class JobCommitError(S3CommitError):
    """Job commit failed; completed uploads were reverted and the rest aborted.

    Attributes:
        failures: (``s3://bucket/key``, exception) for each upload that failed.
        reverted: how many completed uploads were deleted again.
        aborted: how many uploads were aborted.
        not_rolled_back: how many uploads (or unreadable pendingsets) the roll-back could not undo; when
            non-zero the job directory and its journal are kept for ``s3commit recover --abort``.
    """

    def __init__(
        self,
        message: str,
        *,
        failures: Sequence[tuple[str, BaseException]] = (),
        reverted: int = 0,
        aborted: int = 0,
        not_rolled_back: int = 0,
    ) -> None:
        self.failures = list(failures)
        self.reverted = reverted
        self.aborted = aborted
        self.not_rolled_back = not_rolled_back
        first = f"; first failure: {self.failures[0][1]}" if self.failures else ""
        super().__init__(f"{message} ({reverted} completed uploads reverted, {aborted} aborted){first}")


# --- translation ---------------------------------------------------------------------------------

_CODE_TO_ERROR: dict[str, type[StoreError]] = {
    "NoSuchKey": NotFoundError,
    "NotFound": NotFoundError,
    "404": NotFoundError,
    "NoSuchUpload": NoSuchUploadError,
    "NoSuchBucket": NoSuchBucketError,
    "AccessDenied": AccessDeniedError,
    "403": AccessDeniedError,
    "Forbidden": AccessDeniedError,
    "InvalidAccessKeyId": AccessDeniedError,
    "SignatureDoesNotMatch": AccessDeniedError,
    "ExpiredToken": AccessDeniedError,
    "AllAccessDisabled": AccessDeniedError,
    "SlowDown": ThrottledError,
    "Throttling": ThrottledError,
    "ThrottlingException": ThrottledError,
    "RequestLimitExceeded": ThrottledError,
    "TooManyRequests": ThrottledError,
    "429": ThrottledError,
    "503": ThrottledError,
    "ServiceUnavailable": TransientError,
    "InternalError": TransientError,
    "500": TransientError,
    "502": TransientError,
    "504": TransientError,
    "RequestTimeout": TransientError,
    "RequestTimeTooSkewed": TransientError,
    "OperationAborted": TransientError,
    "ConditionalRequestConflict": TransientError,
    "BadDigest": ChecksumMismatchError,
    "InvalidDigest": ChecksumMismatchError,
    "XAmzContentChecksumMismatch": ChecksumMismatchError,
    "PreconditionFailed": PreconditionFailedError,
    "412": PreconditionFailedError,
    "InvalidPart": InvalidRequestError,
    "InvalidPartOrder": InvalidRequestError,
    "EntityTooSmall": InvalidRequestError,
    "EntityTooLarge": InvalidRequestError,
    "InvalidArgument": InvalidRequestError,
    "MalformedXML": InvalidRequestError,
    "InvalidRequest": InvalidRequestError,
    "KeyTooLongError": InvalidRequestError,
}

RETRYABLE = (ThrottledError, TransientError)
"""Error types the store's retry policy retries."""


def error_class_for_code(code: str | None) -> type[StoreError]:
    """The exception type for an S3 error code (or HTTP status text); unknown codes give ``StoreError``."""
    return _CODE_TO_ERROR.get(code or "", StoreError)


def translate_client_error(
    err: BaseException,
    *,
    operation: str,
    bucket: str | None,
    key: str | None = None,
    upload_id: str | None = None,
    attempts: int = 1,
) -> StoreError:
    """Turn a botocore exception into the matching :class:`StoreError` (caller raises it ``from err``)."""
    # Imported here so this module stays importable (and picklable) without botocore loaded.
    from botocore import exceptions as bce

    if isinstance(err, bce.ClientError):
        response = getattr(err, "response", {}) or {}
        error = response.get("Error", {}) or {}
        code = str(error.get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode") or "")
        message = str(error.get("Message") or err)
        cls = error_class_for_code(code)
        if cls is StoreError:
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 429:  # Too Many Requests, whatever the code: throttling
                cls = ThrottledError
            elif isinstance(status, int) and status >= 500:
                cls = TransientError
        return cls(message, operation=operation, bucket=bucket, key=key, upload_id=upload_id, code=code,
                   attempts=attempts)
    if isinstance(err, bce.EndpointConnectionError | bce.ConnectTimeoutError):
        cls2: type[StoreError] = EndpointUnreachableError
        # A refused connection on a later attempt may be a restart; the first is treated as unreachable.
        return cls2(str(err), operation=operation, bucket=bucket, key=key, upload_id=upload_id,
                    code=type(err).__name__, attempts=attempts)
    if isinstance(err, bce.ReadTimeoutError | bce.ConnectionClosedError | bce.ResponseStreamingError
                  | bce.IncompleteReadError | bce.HTTPClientError):
        return TransientError(str(err), operation=operation, bucket=bucket, key=key, upload_id=upload_id,
                              code=type(err).__name__, attempts=attempts)
    if isinstance(err, bce.NoCredentialsError | bce.PartialCredentialsError):
        return AccessDeniedError(str(err), operation=operation, bucket=bucket, key=key, upload_id=upload_id,
                                 code=type(err).__name__, attempts=attempts)
    return StoreError(f"{type(err).__name__}: {err}", operation=operation, bucket=bucket, key=key,
                      upload_id=upload_id, code=type(err).__name__, attempts=attempts)
