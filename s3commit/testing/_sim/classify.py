"""Classify an HTTP request to S3 into the S3 API operation it performs.

The simulator (:mod:`s3commit.testing._sim.simulator`) sees raw HTTP: a method, a path, a query string and
headers. To count requests, add per-operation latency and inject faults by operation it needs the operation
name as boto3 spells it (``UploadPart``, ``CompleteMultipartUpload``, ...). This module does only that,
from the REST API's routing rules (method + sub-resource query parameters + ``x-amz-copy-source``), for
path-style and virtual-hosted-style addressing. It does no I/O and knows nothing about latency or faults.

Operations the committers do not use are classified as :attr:`S3Operation.OTHER`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from urllib.parse import parse_qs, unquote


class S3Operation(str, Enum):
    """An S3 API operation, named as boto3 names it (the value is the boto3 name)."""

    CREATE_MULTIPART_UPLOAD = "CreateMultipartUpload"
    UPLOAD_PART = "UploadPart"
    UPLOAD_PART_COPY = "UploadPartCopy"
    COMPLETE_MULTIPART_UPLOAD = "CompleteMultipartUpload"
    ABORT_MULTIPART_UPLOAD = "AbortMultipartUpload"
    LIST_MULTIPART_UPLOADS = "ListMultipartUploads"
    LIST_PARTS = "ListParts"
    PUT_OBJECT = "PutObject"
    COPY_OBJECT = "CopyObject"
    GET_OBJECT = "GetObject"
    HEAD_OBJECT = "HeadObject"
    DELETE_OBJECT = "DeleteObject"
    DELETE_OBJECTS = "DeleteObjects"
    LIST_OBJECTS_V2 = "ListObjectsV2"
    LIST_OBJECTS = "ListObjects"
    LIST_BUCKETS = "ListBuckets"
    HEAD_BUCKET = "HeadBucket"
    CREATE_BUCKET = "CreateBucket"
    DELETE_BUCKET = "DeleteBucket"
    OTHER = "other"

    @classmethod
    def parse(cls, name: str | S3Operation) -> S3Operation:
        """Return the operation named ``name`` (its boto3 name, e.g. ``"UploadPart"``).

        Raises:
            ValueError: ``name`` is not an operation; the message lists the valid values.
        """
        if isinstance(name, S3Operation):
            return name
        try:
            return cls(name)
        except ValueError:
            valid = ", ".join(op.value for op in cls)
            raise ValueError(f"unknown S3 operation {name!r}; valid values are {valid}") from None


#: Operations S3 counts against the 3,500 PUT/COPY/POST/DELETE per second and prefix budget
#: (S3's documented request rates); everything else counts against the 5,500 GET/HEAD budget.
WRITE_OPERATIONS = frozenset(
    {
        S3Operation.CREATE_MULTIPART_UPLOAD,
        S3Operation.UPLOAD_PART,
        S3Operation.UPLOAD_PART_COPY,
        S3Operation.COMPLETE_MULTIPART_UPLOAD,
        S3Operation.ABORT_MULTIPART_UPLOAD,
        S3Operation.PUT_OBJECT,
        S3Operation.COPY_OBJECT,
        S3Operation.DELETE_OBJECT,
        S3Operation.DELETE_OBJECTS,
        S3Operation.CREATE_BUCKET,
        S3Operation.DELETE_BUCKET,
    }
)

#: Operations that copy bytes server-side (their cost is the source size over the copy bandwidth).
COPY_OPERATIONS = frozenset({S3Operation.COPY_OBJECT, S3Operation.UPLOAD_PART_COPY})

# Query parameters that do not select a sub-resource: listing options, GET options, and botocore's
# informational ``x-id``. A request whose query holds only these addresses the bucket or object itself.
_PLAIN_PARAMETERS = frozenset(
    {
        "prefix", "delimiter", "marker", "max-keys", "encoding-type", "continuation-token",
        "fetch-owner", "start-after", "versionId", "partNumber", "x-id",
        "response-content-type", "response-content-language", "response-expires",
        "response-cache-control", "response-content-disposition", "response-content-encoding",
        # A presigned URL's SigV4 authentication (s3commit.store.ranged_gets sends the data path's GETs so).
        "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
        "X-Amz-Signature", "X-Amz-Security-Token",
    }
)  # fmt: skip

_LIST_UPLOADS_PARAMETERS = frozenset({"uploads", "key-marker", "upload-id-marker", "max-uploads"})

# Virtual-hosted style: ``<bucket>.s3.<region>.amazonaws.com``, ``<bucket>.s3.amazonaws.com``,
# ``<bucket>.s3-<region>.amazonaws.com`` or ``<bucket>.localhost``. Bucket names may contain dots, so
# the bucket is everything before the first label that starts the service endpoint.
_VIRTUAL_HOST = re.compile(r"^(?P<bucket>.+?)\.(?:s3(?:[.-].*)?|localhost)$")


@dataclass(frozen=True, kw_only=True)
class RequestTarget:
    """What a request addresses: the operation, and the bucket and key it acts on.

    Attributes:
        operation: the S3 operation.
        bucket: the bucket name, or ``""`` for service-level requests (ListBuckets).
        key: the object key (URL-decoded), or ``""`` for bucket-level requests.
    """

    operation: S3Operation
    bucket: str
    key: str


def split_bucket_and_key(path: str, host: str | None = None) -> tuple[str, str]:
    """Split a request path into ``(bucket, key)``, honouring virtual-hosted-style addressing.

    Args:
        path: the request path without the query string, still URL-encoded.
        host: the ``Host`` header, if any. An IP address or a bare name means path-style.

    Returns:
        The bucket (``""`` when the request addresses the service) and the URL-decoded key.
    """
    bucket = _virtual_host_bucket(host)
    stripped = path.lstrip("/")
    if bucket is None:
        bucket, _, encoded_key = stripped.partition("/")
        bucket = unquote(bucket)
    else:
        encoded_key = stripped
    return bucket, unquote(encoded_key)


def _virtual_host_bucket(host: str | None) -> str | None:
    if not host:
        return None
    hostname = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    hostname = hostname.strip("[]")
    try:
        ipaddress.ip_address(hostname)
        return None
    except ValueError:
        pass
    match = _VIRTUAL_HOST.match(hostname.lower())
    return match.group("bucket") if match else None


def classify_request(
    method: str,
    path: str,
    query: str | Mapping[str, object],
    headers: Mapping[str, str],
) -> RequestTarget:
    """Return the S3 operation a request performs, and its bucket and key.

    Args:
        method: the HTTP method (any case).
        path: the request path without the query string, URL-encoded as sent.
        query: the raw query string, or an already parsed mapping of parameter names.
        headers: the request headers; looked up case-insensitively for ``Host`` and ``x-amz-copy-source``.

    Returns:
        The request's :class:`RequestTarget`. Unknown requests get :attr:`S3Operation.OTHER`.
    """
    params = parse_qs(query, keep_blank_values=True) if isinstance(query, str) else dict(query)
    lowered = {name.lower(): value for name, value in headers.items()}
    bucket, key = split_bucket_and_key(path, lowered.get("host"))
    operation = _operation(method.upper(), bucket, key, params, "x-amz-copy-source" in lowered)
    return RequestTarget(operation=operation, bucket=bucket, key=key)


def _operation(method: str, bucket: str, key: str, params: Mapping[str, object], copy: bool) -> S3Operation:
    subresources = set(params) - _PLAIN_PARAMETERS
    if not bucket:
        return S3Operation.LIST_BUCKETS if method == "GET" and not subresources else S3Operation.OTHER
    if not key:
        return _bucket_operation(method, subresources)
    return _object_operation(method, params, subresources, copy)


def _bucket_operation(method: str, subresources: set[str]) -> S3Operation:
    if method == "GET":
        if "uploads" in subresources and subresources <= _LIST_UPLOADS_PARAMETERS:
            return S3Operation.LIST_MULTIPART_UPLOADS
        if subresources == {"list-type"}:
            return S3Operation.LIST_OBJECTS_V2
        return S3Operation.LIST_OBJECTS if not subresources else S3Operation.OTHER
    if subresources:
        if method == "POST" and subresources == {"delete"}:
            return S3Operation.DELETE_OBJECTS
        return S3Operation.OTHER
    return {
        "HEAD": S3Operation.HEAD_BUCKET,
        "PUT": S3Operation.CREATE_BUCKET,
        "DELETE": S3Operation.DELETE_BUCKET,
    }.get(method, S3Operation.OTHER)


def _object_operation(method: str, params: Mapping[str, object], subresources: set[str], copy: bool) -> S3Operation:
    upload = "uploadId" in subresources
    if upload and subresources != {"uploadId"}:
        # ListParts paginates with part-number-marker / max-parts; anything else is unknown.
        if method == "GET" and subresources <= {"uploadId", "part-number-marker", "max-parts"}:
            return S3Operation.LIST_PARTS
        return S3Operation.OTHER
    if upload:
        if method == "PUT" and "partNumber" in params:
            return S3Operation.UPLOAD_PART_COPY if copy else S3Operation.UPLOAD_PART
        return {
            "POST": S3Operation.COMPLETE_MULTIPART_UPLOAD,
            "DELETE": S3Operation.ABORT_MULTIPART_UPLOAD,
            "GET": S3Operation.LIST_PARTS,
        }.get(method, S3Operation.OTHER)
    if subresources == {"uploads"}:
        return S3Operation.CREATE_MULTIPART_UPLOAD if method == "POST" else S3Operation.OTHER
    if subresources:
        return S3Operation.OTHER  # ?tagging, ?acl, ?retention, ?attributes, ...
    if method == "PUT":
        return S3Operation.COPY_OBJECT if copy else S3Operation.PUT_OBJECT
    return {
        "GET": S3Operation.GET_OBJECT,
        "HEAD": S3Operation.HEAD_OBJECT,
        "DELETE": S3Operation.DELETE_OBJECT,
    }.get(method, S3Operation.OTHER)
