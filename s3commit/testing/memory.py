"""S3 in memory, for tests that must be exact and fast: every request the commit path sends, answered as S3 answers
it, deterministic, honouring conditional writes, and able to fail or stop a process at its Nth request.

:class:`MemoryS3` is the store's contents (buckets, objects, multipart uploads) and its clock; :meth:`MemoryS3.store`
gives an ordinary :class:`~s3commit.store.s3store.S3Store` (the same class users run: its retries, error
translation, verified requests and counters) whose client is a :class:`MemoryClient` onto those contents. A client is
one *process*: ``stop_at=N`` makes the process die at its Nth request, before the request reaches the store
(``stop="before"``) or after the store applied it and before its answer arrived (``stop="after"``); from then on every
request of that process raises :class:`ProcessStopped`, so its other threads die with it. Another
:meth:`MemoryS3.store` (``recover``, the next job) sees what the dead one left.

What is modelled, as AWS S3 does it: strong consistency; ``If-None-Match: *`` on PUT and Complete; ``If-Match`` on
PUT and DELETE and per key in DeleteObjects; part ETags the MD5 of their bytes and the multipart ETag S3 gives; a
repeated Complete of a completed upload answered with its ETag; NoSuchUpload for an upload aborted or unknown;
ListObjectsV2 and ListMultipartUploads paged and sorted, with a delimiter; the ``Date`` of every answer and
``Last-Modified`` of every object from the store's clock, which tests move with :meth:`MemoryS3.advance` (never
sleeping). Not modelled: checksum validation (the store tells s3commit it does not validate, so parts are checked by
their ETags), server-side encryption, ranged-GET streaming
(:meth:`~s3commit.store.objects.ObjectRequests.stream_object`), bandwidth and latency.

The capabilities an S3Store built here knows are AWS's (:func:`aws_capabilities`), so no probe runs.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Any, Literal

from s3commit.config.options import RetryPolicy, StoreOptions
from s3commit.model.object_info import multipart_etag
from s3commit.store.capabilities import CHECK_BY_NAME, Capabilities, Finding, Outcome
from s3commit.store.concurrency import ConcurrencyLimits
from s3commit.store.s3store import S3Store

ENDPOINT = "memory://s3"
"""The endpoint a :class:`MemoryClient` names (``meta.endpoint_url``)."""

PAGE = 1000
"""S3's page of ListObjectsV2 and ListMultipartUploads."""

Stop = Literal["before", "after"]
PRECONDITION = "At least one of the pre-conditions you specified did not hold"


class ProcessStopped(BaseException):
    """The process this client belongs to died (:meth:`MemoryS3.store` ``stop_at``). A ``BaseException``, as a
    ``SIGKILL`` is no exception the code could catch: nothing after it runs in that process (its other threads'
    requests raise it too)."""


@dataclass
class _Object:
    body: bytes
    etag: str
    modified: float
    content_type: str = "binary/octet-stream"


@dataclass
class _Upload:
    bucket: str
    key: str
    upload_id: str
    initiated: float
    parts: dict[int, tuple[bytes, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    """One request a client sent: its number in that process (from 1), the operation (boto3's name) and key."""

    number: int
    operation: str
    bucket: str
    key: str


def aws_capabilities(bucket: str, *, endpoint: str = ENDPOINT, conditional: bool = True) -> Capabilities:
    """What a :class:`MemoryS3` honours, as a probe would record it: AWS's answers, but no checksum validation
    (so parts are checked by their ETags) and, with ``conditional=False``, no conditional request (as rclone)."""
    findings: dict[str, Finding] = {}
    for name, check in CHECK_BY_NAME.items():
        if name.startswith("checksum-") or name == "content-md5" or name == "head-checksum":
            outcome = Outcome.IGNORED if check.good is Outcome.HONOURED else Outcome.NO
        elif not conditional and "if-" in name:
            outcome = Outcome.IGNORED
        else:
            outcome = check.good
        findings[name] = Finding(outcome, detail="memory store")
    return Capabilities(endpoint=endpoint, bucket=bucket, probed_at=time.time(), findings=findings)


class _KeyIndex:
    """A bucket's keys in order, kept lazily so that a listing reads only the keys under its prefix: a new key is
    merged in at the next listing (a sort of the sorted keys and the few new ones, linear), a deleted one is skipped
    and compacted away once they are many."""

    def __init__(self) -> None:
        self._sorted: list[str] = []
        self._fresh: list[str] = []
        self._gone = 0

    def added(self, key: str) -> None:
        self._fresh.append(key)

    def deleted(self) -> None:
        self._gone += 1

    def under(self, objects: dict[str, _Object], prefix: str, after: str | None = None) -> Iterator[str]:
        """The keys of ``objects`` under ``prefix``, in order, those after ``after`` only."""
        if self._fresh or self._gone > len(self._sorted) // 2:
            self._sorted = sorted(k for k in itertools.chain(self._sorted, self._fresh) if k in objects)
            self._fresh, self._gone = [], 0
        keys = self._sorted
        position = bisect.bisect_right(keys, after) if after is not None and after >= prefix else \
            bisect.bisect_left(keys, prefix)
        while position < len(keys) and keys[position].startswith(prefix):
            if keys[position] in objects:
                yield keys[position]
            position += 1


class MemoryS3:
    """The contents and clock of an S3 in memory, shared by every client (process) made from it.

    Args:
        start: the store's clock at creation (seconds since the epoch; default this host's clock, so that ages the
            code compares with its own clock stay sensible).
        tick: how far the clock moves at each request (so that objects written one after another have ordered
            ``Last-Modified`` dates, as on S3, without waiting).
        conditional: honour conditional requests (``False``: accept them as if the condition were not there, as
            rclone's ``serve s3`` does).
    """

    def __init__(self, *, start: float | None = None, tick: float = 0.001, conditional: bool = True) -> None:
        self._lock = threading.RLock()
        self._now = time.time() if start is None else start
        self.tick = tick
        self.conditional = conditional
        self._buckets: dict[str, dict[str, _Object]] = {}
        self._indexes: dict[str, _KeyIndex] = {}
        self._uploads: dict[str, _Upload] = {}
        self._completed: dict[str, tuple[str, str, str]] = {}  # upload id -> (bucket, key, etag)
        self._ids = itertools.count(1)
        #: Every request every client sent, in the order the store took them.
        self.log: list[Request] = []

    # --- the clock ---------------------------------------------------------------------------------------------

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the store's clock on (a lease or a liveness record grows old without anyone sleeping)."""
        with self._lock:
            self._now += seconds

    # --- what tests set up and look at -------------------------------------------------------------------------

    def create_bucket(self, bucket: str) -> str:
        with self._lock:
            self._buckets.setdefault(bucket, {})
            self._indexes.setdefault(bucket, _KeyIndex())
        return bucket

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """The objects under ``prefix``: key -> bytes."""
        with self._lock:
            return {k: o.body for k, o in sorted(self._buckets[bucket].items()) if k.startswith(prefix)}

    def buckets(self) -> tuple[str, ...]:
        """The buckets' names."""
        with self._lock:
            return tuple(self._buckets)

    def size(self, bucket: str, key: str) -> int | None:
        """The size of an object, or None if there is none."""
        with self._lock:
            found = self._buckets.get(bucket, {}).get(key)
            return None if found is None else len(found.body)

    def uploads(self, bucket: str, prefix: str = "") -> list[tuple[str, str]]:
        """The uploads in progress under ``prefix``: (key, upload id), sorted."""
        with self._lock:
            return sorted((u.key, u.upload_id) for u in self._uploads.values()
                          if u.bucket == bucket and u.key.startswith(prefix))

    def store(self, *, stop_at: int | None = None, stop: Stop = "before",
              fail: Callable[[Request], Exception | None] | None = None, retry: RetryPolicy | None = None,
              conditional: bool | None = None, buckets: tuple[str, ...] | None = None,
              options: StoreOptions | None = None, store_class: type[S3Store] = S3Store) -> S3Store:
        """A new :class:`S3Store` onto this S3: one process's view (see the module docstring). ``fail``: called with
        each request before it is applied; an exception it returns is raised instead (a botocore ``ClientError``
        from :func:`s3_error` goes through the store's retries and translation as S3's own would; a throttling one,
        ``s3_error("SlowDown", 503)``, lowers the store's concurrency limit, which is this process's own:
        ``store.requests.limits``). ``buckets``: those whose capabilities the store knows (default: every bucket
        now). ``options``: the store's (its region and retry policy replaced by this S3's and ``retry``'s);
        ``store_class``: a test double's subclass of :class:`S3Store` (naming the collaborator it replaces)."""
        client = MemoryClient(self, stop_at=stop_at, stop=stop, fail=fail)
        options = replace(options or StoreOptions(), region="us-east-1",
                          retry=retry or RetryPolicy(initial_delay=0, max_delay=0))
        store = store_class(options, client=client, sleep=lambda _seconds: None, limits=ConcurrencyLimits())
        honours = self.conditional if conditional is None else conditional
        for bucket in self.buckets() if buckets is None else buckets:
            store.capabilities[bucket] = aws_capabilities(bucket, conditional=honours)
        return store

    # --- requests (called by MemoryClient under the store's lock) ----------------------------------------------

    def _bucket(self, name: str) -> dict[str, _Object]:
        found = self._buckets.get(name)
        if found is None:
            raise s3_error("NoSuchBucket", 404, f"The specified bucket does not exist: {name}")
        return found

    def _answer(self, **fields: Any) -> dict[str, Any]:
        date = format_datetime(datetime.fromtimestamp(self._now, timezone.utc), usegmt=True)
        return {**fields, "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {"date": date}}}

    def _put(self, bucket: str, key: str, body: bytes, etag: str, content_type: str | None = None) -> None:
        objects = self._bucket(bucket)
        if key not in objects:
            self._indexes[bucket].added(key)
        objects[key] = _Object(body, etag, self._now, content_type or "binary/octet-stream")

    def _check_if_match(self, current: _Object | None, params: dict[str, Any]) -> None:
        if not self.conditional:
            return
        if params.get("IfNoneMatch") == "*" and current is not None:
            raise s3_error("PreconditionFailed", 412, PRECONDITION)
        wanted = params.get("IfMatch")
        if wanted is not None:
            if current is None:
                raise s3_error("NoSuchKey", 404, "The specified key does not exist.")
            if current.etag != wanted:
                raise s3_error("PreconditionFailed", 412, PRECONDITION)

    def head_bucket(self, p: dict[str, Any]) -> dict[str, Any]:
        if p["Bucket"] not in self._buckets:
            raise s3_error("404", 404, "Not Found")
        return self._answer()

    def put_object(self, p: dict[str, Any]) -> dict[str, Any]:
        objects = self._bucket(p["Bucket"])
        self._check_if_match(objects.get(p["Key"]), p)
        body = body_bytes(p.get("Body", b""))
        etag = f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'
        self._put(p["Bucket"], p["Key"], body, etag, p.get("ContentType"))
        return self._answer(ETag=etag)

    def get_object(self, p: dict[str, Any]) -> dict[str, Any]:
        found = self._bucket(p["Bucket"]).get(p["Key"])
        if found is None:
            raise s3_error("NoSuchKey", 404, "The specified key does not exist.")
        body, ranged = found.body, dict[str, str]()
        if p.get("Range"):
            first, _, last = p["Range"].removeprefix("bytes=").partition("-")
            body = body[int(first):(int(last) + 1 if last else None)]
            ranged["ContentRange"] = f"bytes {first}-{int(first) + len(body) - 1}/{len(found.body)}"
        return self._answer(Body=io.BytesIO(body), ContentLength=len(body), ETag=found.etag,
                            LastModified=_date(found.modified), ContentType=found.content_type, **ranged)

    def head_object(self, p: dict[str, Any]) -> dict[str, Any]:
        found = self._bucket(p["Bucket"]).get(p["Key"])
        if found is None:
            raise s3_error("404", 404, "Not Found")
        return self._answer(ContentLength=len(found.body), ETag=found.etag, LastModified=_date(found.modified),
                            ContentType=found.content_type)

    def delete_object(self, p: dict[str, Any]) -> dict[str, Any]:
        objects = self._bucket(p["Bucket"])
        current = objects.get(p["Key"])
        self._check_if_match(current, p)
        if objects.pop(p["Key"], None) is not None:
            self._indexes[p["Bucket"]].deleted()
        return self._answer()

    def delete_objects(self, p: dict[str, Any]) -> dict[str, Any]:
        objects = self._bucket(p["Bucket"])
        errors = []
        for item in p["Delete"]["Objects"]:
            current = objects.get(item["Key"])
            wanted = item.get("ETag")
            if self.conditional and wanted is not None and current is not None and current.etag != wanted:
                errors.append({"Key": item["Key"], "Code": "PreconditionFailed", "Message": "ETag changed"})
                continue
            if objects.pop(item["Key"], None) is not None:
                self._indexes[p["Bucket"]].deleted()
        return self._answer(Errors=errors) if errors else self._answer()

    def copy_object(self, p: dict[str, Any]) -> dict[str, Any]:
        source = self._bucket(p["CopySource"]["Bucket"]).get(p["CopySource"]["Key"])
        if source is None:
            raise s3_error("NoSuchKey", 404, "The specified key does not exist.")
        self._put(p["Bucket"], p["Key"], source.body, source.etag, source.content_type)
        return self._answer(CopyObjectResult={"ETag": source.etag, "LastModified": _date(self._now)})

    def list_objects_v2(self, p: dict[str, Any]) -> dict[str, Any]:
        prefix, delimiter = p.get("Prefix", ""), p.get("Delimiter")
        objects = self._bucket(p["Bucket"])
        token = p.get("ContinuationToken") or p.get("StartAfter")  # (S3 reads StartAfter without a token only)
        size = p.get("MaxKeys", PAGE)
        entries: list[tuple[str, bool]] = []  # (key or common prefix, is a prefix), one past the page
        for key in self._indexes[p["Bucket"]].under(objects, prefix, token):
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                common = key[:cut + len(delimiter or "")]
                if common != token and (not entries or entries[-1] != (common, True)):
                    entries.append((common, True))
            else:
                entries.append((key, False))
            if len(entries) > size:
                break
        page = entries[:size]
        truncated = len(entries) > size
        answer = self._answer(
            Contents=[{"Key": k, "Size": len(objects[k].body), "ETag": objects[k].etag,
                       "LastModified": _date(objects[k].modified)} for k, is_prefix in page if not is_prefix],
            CommonPrefixes=[{"Prefix": k} for k, is_prefix in page if is_prefix], IsTruncated=truncated,
            KeyCount=len(page))
        if truncated:
            answer["NextContinuationToken"] = page[-1][0]
        return answer

    def create_multipart_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        self._bucket(p["Bucket"])
        upload_id = f"upload-{next(self._ids):06d}-{hashlib.md5(p['Key'].encode()).hexdigest()[:8]}"
        self._uploads[upload_id] = _Upload(p["Bucket"], p["Key"], upload_id, self._now)
        return self._answer(UploadId=upload_id, Bucket=p["Bucket"], Key=p["Key"])

    def _upload(self, p: dict[str, Any]) -> _Upload:
        upload = self._uploads.get(p["UploadId"])
        if upload is None or upload.bucket != p["Bucket"] or upload.key != p["Key"]:
            raise s3_error("NoSuchUpload", 404, "The specified upload does not exist.")
        return upload

    def upload_part(self, p: dict[str, Any]) -> dict[str, Any]:
        upload = self._upload(p)
        body = body_bytes(p.get("Body", b""))
        etag = f'"{hashlib.md5(body, usedforsecurity=False).hexdigest()}"'
        upload.parts[int(p["PartNumber"])] = (body, etag)
        return self._answer(ETag=etag)

    def complete_multipart_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        done = self._completed.get(p["UploadId"])
        if done is not None and done[:2] == (p["Bucket"], p["Key"]):
            return self._answer(ETag=done[2], Bucket=p["Bucket"], Key=p["Key"])  # a repeated Complete
        upload = self._upload(p)
        self._check_if_match(self._bucket(p["Bucket"]).get(p["Key"]), p)
        parts = p["MultipartUpload"]["Parts"]
        numbers = [int(part["PartNumber"]) for part in parts]
        if numbers != sorted(set(numbers)):
            raise s3_error("InvalidPartOrder", 400, "The list of parts was not in ascending order.")
        for part in parts:
            held = upload.parts.get(int(part["PartNumber"]))
            if held is None or held[1] != part["ETag"]:
                raise s3_error("InvalidPart", 400, "One or more of the specified parts could not be found.")
        etag = multipart_etag([part["ETag"] for part in parts]) or '"?"'
        self._put(p["Bucket"], p["Key"], b"".join(upload.parts[n][0] for n in numbers), etag)
        del self._uploads[p["UploadId"]]
        self._completed[p["UploadId"]] = (p["Bucket"], p["Key"], etag)
        return self._answer(ETag=etag, Bucket=p["Bucket"], Key=p["Key"])

    def abort_multipart_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        self._upload(p)
        del self._uploads[p["UploadId"]]
        return self._answer()

    def list_multipart_uploads(self, p: dict[str, Any]) -> dict[str, Any]:
        self._bucket(p["Bucket"])
        prefix = p.get("Prefix", "")
        found = sorted((u.key, u.initiated, u.upload_id) for u in self._uploads.values()
                       if u.bucket == p["Bucket"] and u.key.startswith(prefix))
        marker = p.get("KeyMarker")
        if marker is not None:
            after = p.get("UploadIdMarker") or ""
            found = [u for u in found if u[0] > marker or (u[0] == marker and after and u[2] > after)]
        page = found[:p.get("MaxUploads", PAGE)]
        truncated = len(page) < len(found)
        answer = self._answer(Uploads=[{"Key": k, "UploadId": i, "Initiated": _date(t)} for k, t, i in page],
                              IsTruncated=truncated)
        if truncated:
            answer["NextKeyMarker"], answer["NextUploadIdMarker"] = page[-1][0], page[-1][2]
        return answer


class _Meta:
    endpoint_url = ENDPOINT
    region_name = "us-east-1"
    events = None


class MemoryClient:
    """A boto3 S3 client's methods that s3commit calls, answered by a :class:`MemoryS3`: one process's client (see
    :meth:`MemoryS3.store`). ``requests`` lists what this process sent."""

    meta = _Meta()

    def __init__(self, s3: MemoryS3, *, stop_at: int | None = None, stop: Stop = "before",
                 fail: Callable[[Request], Exception | None] | None = None) -> None:
        if stop not in ("before", "after"):
            raise ValueError(f"stop must be 'before' or 'after', not {stop!r}")
        self.s3 = s3
        self.stop_at = stop_at
        self.stop = stop
        self.fail = fail
        self.requests: list[Request] = []
        self.stopped: Request | None = None
        """The request at which the process died, once it has."""

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        handler = getattr(MemoryS3, name, None)
        if handler is None or name.startswith("_") or name in ("store", "objects", "uploads", "now", "advance",
                                                               "create_bucket", "size",
                                                               "buckets"):
            raise AttributeError(f"the memory S3 client has no operation {name!r}")
        return lambda **params: self.send(name, params)

    def create_bucket(self, **params: Any) -> dict[str, Any]:
        self.s3.create_bucket(params["Bucket"])
        return self.s3._answer()

    def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request of this process: ``operation`` (boto3's method name, ``"put_object"``) with boto3's
        parameters, answered as boto3 answers (or raising its ``ClientError``). The memory wire
        (:mod:`s3commit.testing.memory_wire`) sends what botocore serialized through here."""
        s3 = self.s3
        with s3._lock:
            if self.stopped is not None:
                raise ProcessStopped(f"the process died at request {self.stopped.number} ({self.stopped.operation})")
            request = Request(len(self.requests) + 1, operation, params.get("Bucket", ""),
                              params.get("Key") or params.get("Prefix") or "")
            self.requests.append(request)
            s3.log.append(request)
            s3._now += s3.tick
            dies = self.stop_at is not None and request.number >= self.stop_at
            if dies and self.stop == "before":
                self.stopped = request
                raise ProcessStopped(f"the process died before request {request.number} ({operation})")
            injected = self.fail(request) if self.fail is not None else None
            if injected is not None:
                raise injected
            answer = getattr(s3, operation)(params)
            if dies:  # applied; the answer never reaches the process
                self.stopped = request
                raise ProcessStopped(f"the process died after request {request.number} ({operation})")
            return answer


def s3_error(code: str, status: int, message: str = "") -> Exception:
    """A botocore ``ClientError`` as S3 answers it: ``code`` (``SlowDown``, ``InternalError``...) and HTTP status."""
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message or code},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "memory")


def body_bytes(body: Any) -> bytes:
    """A request's body as bytes: a store :class:`~s3commit.store.body_policy.Payload`'s buffer, a file object's
    contents (from its start), any buffer, or ``None`` (no body)."""
    data = getattr(body, "data", body)  # a store Payload carries its buffer
    if data is None:
        return b""
    if hasattr(data, "read"):
        if hasattr(data, "seek"):
            data.seek(0)
        return bytes(data.read())
    return data if isinstance(data, bytes) else bytes(memoryview(data).cast("B"))


def _date(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def client_of(store: S3Store) -> MemoryClient:
    """The :class:`MemoryClient` (the process) of a store made by :meth:`MemoryS3.store`: its ``requests``, where it
    ``stopped``, and ``stop_at`` / ``stop`` to set before the requests a test means to cut short."""
    client = store.requests.client
    if not isinstance(client, MemoryClient):
        raise TypeError("not a store of a MemoryS3")
    return client
