"""What a sidecar handler returns, and how errors travel back to the JVM.

Every error type of s3commit (and of the bridge) maps to one Java exception family (:data:`JAVA_FAMILIES`,
``Sidecar.toException`` in the jar). The error header names the family, the message, the Python class and,
when the error knows them, S3's error code, the bucket, the key and the upload id: the Java exception carries
them (``s3commit.bridge.SidecarErrors.Details``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from s3commit import errors


@dataclass
class Reply:
    """A response: header fields (``ok`` is added), and either a body in hand or one streamed chunk by chunk.

    A streamed body that fails part way reaches the JVM as an error after the bytes already sent.
    """

    header: dict[str, Any] = field(default_factory=dict)
    body: bytes | bytearray | memoryview | None = None
    stream: Iterable[bytes | bytearray | memoryview] | None = None


@cache
def java_families() -> tuple[tuple[type[BaseException], str], ...]:
    """(Python error type, Java family), most specific first; the first ``isinstance`` match wins. Every error
    class of :mod:`s3commit.errors` and of the bridge is listed by name (a test keeps it so)."""
    from s3commit.bridge.operations import BadRequest
    from s3commit.bridge.protocol import BodyError, FrameTooLarge, ProtocolError
    from s3commit.bridge.registry import UnknownConfiguration

    return (
        (UnknownConfiguration, "UnknownConfiguration"),
        (FrameTooLarge, "FrameTooLarge"),
        (BodyError, "IO"),
        (ProtocolError, "IO"),
        (errors.NoSuchUploadError, "FileNotFound"),
        (errors.NoSuchBucketError, "FileNotFound"),
        (errors.NotFoundError, "FileNotFound"),
        (errors.AccessDeniedError, "AccessDenied"),
        (errors.PreconditionFailedError, "FileAlreadyExists"),
        (errors.CommitConflictError, "FileAlreadyExists"),
        (errors.EndpointUnreachableError, "Unreachable"),
        (errors.ThrottledError, "Transient"),
        (errors.ChecksumMismatchError, "IO"),
        (errors.CompletionUnknownError, "IO"),
        (errors.TransientError, "Transient"),
        (errors.InvalidRequestError, "IllegalArgument"),
        (BadRequest, "IllegalArgument"),
        (errors.ManifestError, "IllegalArgument"),
        (errors.ConfigError, "IllegalArgument"),
        (errors.JobSweptError, "IllegalState"),
        (errors.JournalExistsError, "IllegalState"),
        (errors.PendingsetMissingError, "IllegalState"),
        (errors.CommitStateError, "IllegalState"),
        (errors.OutputMismatchError, "IO"),
        (errors.LeaseTimeoutError, "IO"),
        (errors.LeaseLostError, "IO"),
        (errors.LeaseError, "IO"),
        (errors.JobCommitError, "IO"),
        (errors.SinkRecoveryError, "IO"),
        (errors.StoreError, "IO"),
        (errors.S3CommitError, "IO"),
        (FileNotFoundError, "FileNotFound"),
        (FileExistsError, "FileAlreadyExists"),
        (PermissionError, "AccessDenied"),
        (ValueError, "IllegalArgument"),
    )


def error_type(err: BaseException) -> str:
    """The Java exception family the client raises for ``err`` (``Sidecar.toException`` in the jar)."""
    for python_type, family in java_families():
        if isinstance(err, python_type):
            return family
    return "IO"


def _details(err: BaseException) -> dict[str, str]:
    """S3's error code, the bucket, key and upload id, where the error (or a job commit's first failure) has
    them."""
    source: Any = err
    if isinstance(err, errors.JobCommitError) and err.failures:
        source = err.failures[0][1]
    found = {name: getattr(source, name, None) for name in ("code", "bucket", "key", "upload_id")}
    return {name: str(value) for name, value in found.items() if value}


def error_header(err: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": {"type": error_type(err), "message": str(err) or type(err).__name__,
                                   "error_class": type(err).__name__, **_details(err)}}
