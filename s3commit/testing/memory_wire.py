"""S3 in memory behind botocore's own wire: a test store that answers far faster than the client under test sends.

:class:`S3Wire` gives a real botocore S3 client (built by the store's own factory, :mod:`s3commit.store.client`) whose
requests a :class:`~s3commit.testing.memory.MemoryS3` answers in this process. botocore does all it does for S3 -
parameter validation, serialization, endpoint rules, SigV4 signing, then parsing the XML or headers that come back
and raising its ``ClientError`` - and only the socket is missing: botocore's ``before-send`` event hands the prepared
request (method, URL, headers, body) to :meth:`S3Wire.answer`, which routes it by method, path, query and headers
(:func:`~s3commit.testing._sim.classify.classify_request`) to the model's operation, with the parameters boto3 would
have given it, and renders the model's answer as S3 renders it (XML documents, ``ETag``, ``Last-Modified``,
``Content-Length``, ``Date`` from the model's clock; errors as S3's ``<Error>`` document with its status). The data
path's ranged GETs, which go around botocore's send through the client's HTTP session
(:mod:`s3commit.store.ranged_gets`), reach the same :meth:`S3Wire.answer` through a session standing in for it.

On top, as the HTTP simulator does (one definition each, :mod:`s3commit.testing._sim.profiles`):

- a :class:`~s3commit.testing._sim.profiles.LatencyProfile` (``profile="s3-standard"``): each request waits its
  operation's first-byte latency and its bodies' transfer time (and a copy's), in the calling thread and outside the
  model's lock, so N threads have N requests in flight; ``sleep`` is injectable;
- a :class:`~s3commit.testing._sim.profiles.ThrottleSpec`: S3's per-partition request rates (3,500 writes and 5,500
  reads a second), 503 SlowDown above them, and a partition that throttles for a sustained period splitting; the
  clock is injectable.

:meth:`S3Wire.listen` puts the same answers on a loopback socket as well (:class:`WireListener`, one event loop,
each answer written when its latency has passed), for what a client sends on connections of its own
(:mod:`s3commit.store.lean_http`) and for a store in another process (``benchmarks/scale_bench.py --lean``).

One :class:`S3Wire` is one process of the model (:class:`~s3commit.testing.memory.MemoryClient`: ``stop_at``,
``fail``, its request log), and its store is not picklable into another process. Not modelled: checksum validation,
``aws-chunked`` bodies, encryption, versions, operations the commit path does not send (ListParts, UploadPartCopy,
tagging...: answered 501 NotImplemented).
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from email.utils import format_datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from s3commit.config.options import RetryPolicy, StoreOptions
from s3commit.store.s3store import S3Store
from s3commit.testing._sim import wire
from s3commit.testing._sim.classify import COPY_OPERATIONS, S3Operation, classify_request
from s3commit.testing._sim.classify import S3Operation as Op
from s3commit.testing._sim.profiles import LatencyProfile, Throttle, ThrottleSpec, get_profile
from s3commit.testing.memory import MemoryClient, MemoryS3, Request, Stop, aws_capabilities, body_bytes

ENDPOINT_URL = "http://memory-s3.invalid"
"""The endpoint an :class:`S3Wire`'s clients name (``.invalid``: nothing on the network answers it)."""
WIRE_HANDLER_ID = "s3commit-memory-wire"
"""The unique id of the ``before-send`` handler :meth:`S3Wire.client` registers."""
_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
_Answer = tuple[int, dict[str, str], bytes]
"""An HTTP answer: status, headers (lower-case names), body."""

_METHODS: dict[S3Operation, str] = {
    Op.HEAD_BUCKET: "head_bucket", Op.PUT_OBJECT: "put_object", Op.GET_OBJECT: "get_object",
    Op.HEAD_OBJECT: "head_object", Op.DELETE_OBJECT: "delete_object", Op.DELETE_OBJECTS: "delete_objects",
    Op.COPY_OBJECT: "copy_object", Op.LIST_OBJECTS_V2: "list_objects_v2",
    Op.CREATE_MULTIPART_UPLOAD: "create_multipart_upload", Op.UPLOAD_PART: "upload_part",
    Op.COMPLETE_MULTIPART_UPLOAD: "complete_multipart_upload", Op.ABORT_MULTIPART_UPLOAD: "abort_multipart_upload",
    Op.LIST_MULTIPART_UPLOADS: "list_multipart_uploads",
}  # fmt: skip
"""The operations answered: S3's name -> the model's (boto3's method name)."""


class S3Wire:
    """A :class:`MemoryS3` reached through real botocore clients (see the module).

    Args:
        s3: the model: contents and clock.
        profile: S3's latency (a profile or its name, ``"s3-standard"``); None: no wait.
        throttle: per-partition request rates (a spec, or a :class:`Throttle` to share); None: no limit.
        sleep: how a latency is waited (tests record it instead).
        clock: the throttle's clock (seconds, monotonic), when ``throttle`` is a spec.
        stop_at, stop, fail: the process's death and injected errors, as :meth:`MemoryS3.store` takes them.
    """

    def __init__(self, s3: MemoryS3, *, profile: str | LatencyProfile | None = None,
                 throttle: ThrottleSpec | Throttle | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, stop_at: int | None = None, stop: Stop = "before",
                 fail: Callable[[Request], Exception | None] | None = None) -> None:
        self.s3 = s3
        #: The process this wire's clients are (its ``requests``, where it ``stopped``).
        self.process = MemoryClient(s3, stop_at=stop_at, stop=stop, fail=fail)
        self.profile = get_profile(profile) if profile is not None else None
        self.throttle = Throttle(throttle, clock=clock) if isinstance(throttle, ThrottleSpec) else throttle
        self.sleep = sleep
        #: Requests answered 503 SlowDown by the throttle, by operation (S3's name).
        self.throttled: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self._client: Any = None
        #: The endpoint its clients name: :data:`ENDPOINT_URL`, or its socket's once it listens (:meth:`listen`).
        self.endpoint_url = ENDPOINT_URL
        self._listener: WireListener | None = None

    # --- clients and stores ------------------------------------------------------------------------------------

    def options(self, *, retry: RetryPolicy | None = None, lean_requests: bool = False) -> StoreOptions:
        """The options of a store over this wire (path-style addressing, fixed credentials, one region);
        ``lean_requests``: ``s3commit.store.lean-requests``."""
        return StoreOptions(endpoint_url=self.endpoint_url, region="us-east-1", path_style=True, access_key="memory",
                            secret_key="memory-secret", use_ssl=False, lean_requests=lean_requests,
                            retry=retry or RetryPolicy(initial_delay=0, max_delay=0))

    def client(self) -> Any:
        """The wire's botocore S3 client, built (once: botocore clients are thread-safe, and building one loads the
        service's model) as the store builds its own; this wire answers its requests."""
        with self._count_lock:
            if self._client is None:
                self._client = self._build_client()
            return self._client

    def _build_client(self) -> Any:
        from s3commit.store.client import build_s3_client

        client = build_s3_client(self.options())  # (a store's retry policy is its own: the client makes one attempt)
        client.meta.events.register("before-send.s3", self._before_send, unique_id=WIRE_HANDLER_ID)
        endpoint = getattr(client, "_endpoint", None)
        if endpoint is not None and hasattr(endpoint, "http_session"):  # what RangedGets sends its GETs through
            endpoint.http_session = _Session(self)
        _WIRES[client] = self
        return client

    def store(self, *, retry: RetryPolicy | None = None, sleep: Callable[[float], None] | None = None,
              conditional: bool | None = None, buckets: tuple[str, ...] | None = None,
              lean_requests: bool = False) -> S3Store:
        """A real :class:`S3Store` over this wire's :meth:`client` (each store its own counters and retries).
        ``sleep``: its retries' backoff (default: the wire's ``sleep``); ``retry`` default: retries without backoff.
        The capabilities it knows are AWS's (:func:`aws_capabilities`) for ``buckets`` (default: every bucket now),
        so no probe runs. ``lean_requests``: its Completes sent by :mod:`s3commit.store.lean_complete`."""
        options = self.options(retry=retry, lean_requests=lean_requests)
        store = S3Store(options, client=self.client(), sleep=sleep or self.sleep)
        honours = self.s3.conditional if conditional is None else conditional
        for bucket in self.s3.buckets() if buckets is None else buckets:
            store.capabilities[bucket] = aws_capabilities(bucket, endpoint=ENDPOINT_URL, conditional=honours)
        return store

    def listen(self) -> str:
        """Answer on a loopback socket too (HTTP/1.1, keep-alive; :class:`WireListener`), and return its endpoint URL,
        which the clients this wire builds from now on name. botocore's requests are still answered in this
        process, before they are sent; what a client sends on connections of its own
        (:mod:`s3commit.store.lean_http`) reaches the model over the socket. Idempotent."""
        if self._listener is None:
            if self._client is not None:
                raise RuntimeError("listen() before the wire's client is built: the client names the endpoint")
            self._listener = WireListener(self)
            self.endpoint_url = self._listener.url
        return self.endpoint_url

    def close(self) -> None:
        """Stop answering on the socket (where it listens, :meth:`listen`)."""
        if self._listener is not None:
            self._listener.close()

    # --- answering a request -----------------------------------------------------------------------------------

    def _before_send(self, request: Any, **_: Any) -> Any:
        return self.answer(request)

    def answer(self, request: Any) -> Any:
        """The answer S3 would send to ``request`` (botocore's ``AWSPreparedRequest``), as an ``AWSResponse``."""
        from botocore.awsrequest import AWSResponse

        status, headers, body = self.respond(request.method, request.url, request.headers, request.body)
        return AWSResponse(request.url, status, headers, _Raw(body))

    def respond(self, method: str, url: str, headers: Mapping[str, Any], body: Any, *,
                wait: Callable[[float], None] | None = None) -> _Answer:
        """``(status, headers, body)`` of S3's answer to one HTTP request (the latency waited, the throttle asked).
        ``wait``: how each part of the latency is waited (default: slept, in this thread)."""
        wait = wait or self._wait
        split = urlsplit(url)
        query = parse_qs(split.query, keep_blank_values=True)
        heads = {name.lower(): _text(value) for name, value in headers.items()}
        target = classify_request(method, split.path, query, heads)
        operation, name = target.operation, _METHODS.get(target.operation)
        resource = unquote(split.path)
        profile = self.profile
        if name is None or "aws-chunked" in heads.get("content-encoding", ""):
            return self._error("NotImplemented", 501, "A header or operation you provided is not implemented.",
                               resource, method)
        data = body_bytes(body)
        cost = data.count(b"<Object>") if operation is S3Operation.DELETE_OBJECTS else 1  # each key a write
        if self.throttle is not None and not self.throttle.admit(operation, target.bucket, target.key,
                                                                 cost=max(1, cost)):
            with self._count_lock:
                self.throttled[operation.value] += 1
            if profile is not None:
                wait(profile.first_byte(operation))
            status, message = wire.S3_ERRORS["SlowDown"]
            return self._error("SlowDown", status, message, resource, method)
        params = _PARAMS[operation](target.bucket, target.key, query, heads, data)
        if profile is not None:
            copied = (self.s3.size(*_copy_source(heads)) or 0) if operation in COPY_OPERATIONS else 0
            wait(profile.first_byte(operation) + profile.transfer_seconds(len(data))
                       + profile.copy_seconds(copied))
        from botocore.exceptions import ClientError

        try:
            answer = self.process.send(name, params)
        except ClientError as err:
            error = err.response.get("Error", {})
            status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500))
            return self._error(str(error.get("Code", status)), status, str(error.get("Message", "")), resource,
                               method, upload_id=params.get("UploadId"))
        status, extra, payload = _RENDER[operation](answer, params)
        if profile is not None and method != "HEAD":
            wait(profile.transfer_seconds(len(payload)))
        answered = {"date": answer["ResponseMetadata"]["HTTPHeaders"]["date"], "x-amz-request-id": wire.request_id(),
                    "server": "AmazonS3", **extra}
        answered.setdefault("content-length", str(len(payload)))
        return status, answered, b"" if method == "HEAD" else payload

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self.sleep(seconds)

    def _error(self, code: str, status: int, message: str, resource: str, method: str, *,
               upload_id: str | None = None) -> _Answer:
        body = b"" if method == "HEAD" else wire.error_xml(code, message, resource=resource, upload_id=upload_id)
        headers = {"date": _http_date(self.s3.now()), "x-amz-request-id": wire.request_id(), "server": "AmazonS3",
                   "content-type": "application/xml", "content-length": str(len(body))}
        return status, headers, body


class WireListener:
    """An :class:`S3Wire` on a loopback socket: one event loop in a thread of its own answers every connection, so
    thousands of requests can be in flight with no thread each. A request is answered at once by the model (its
    effect applies when it arrives) and its answer written when the latency the wire's profile gives it has passed
    (first byte, transfers, copy: the same waits :meth:`S3Wire.respond` sleeps, summed). One request at a time
    per connection, as HTTP/1.1 clients send them; a body by ``Content-Length`` only (``Expect: 100-continue``
    answered)."""

    def __init__(self, wire_: S3Wire) -> None:
        self._wire = wire_
        self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(started,), name="s3wire-listener", daemon=True)
        self._thread.start()
        started.wait()
        self.url = f"http://127.0.0.1:{self.port}"

    def _serve(self, started: threading.Event) -> None:
        loop = self._loop
        server = loop.run_until_complete(loop.create_server(lambda: _WireProtocol(self._wire, loop), "127.0.0.1", 0))
        self.port = int(server.sockets[0].getsockname()[1])
        started.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            loop.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)


class _WireProtocol(asyncio.Protocol):
    """One connection to a :class:`WireListener`."""

    def __init__(self, wire_: S3Wire, loop: Any) -> None:
        self._wire, self._loop = wire_, loop
        self._buffer = b""
        self._busy = False
        self._continued = False
        self._transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self._transport = transport

    def connection_lost(self, exc: BaseException | None) -> None:
        self._transport = None

    def eof_received(self) -> bool:
        return False  # (the transport then closes)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._next()

    def _next(self) -> None:
        if self._busy or self._transport is None:
            return
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = self._buffer[:end].decode("latin-1").split("\r\n")
        heads: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            heads[name.strip()] = value.strip()
        lower = {k.lower(): v for k, v in heads.items()}
        length = int(lower.get("content-length", "0"))
        if len(self._buffer) < end + 4 + length:
            if lower.get("expect", "").lower() == "100-continue" and not self._continued:
                self._continued = True
                self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        self._continued = False
        body = self._buffer[end + 4:end + 4 + length]
        self._buffer = self._buffer[end + 4 + length:]
        method, target, _ = lines[0].split(" ", 2)
        delays: list[float] = []
        status, answered, payload = self._wire.respond(method, f"{self._wire.endpoint_url}{target}", heads, body,
                                                       wait=delays.append)
        reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Unknown"
        head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in answered.items()) + "\r\n"
        self._busy = True
        self._loop.call_later(sum(delays), self._answer, head.encode("latin-1") + payload)

    def _answer(self, data: bytes) -> None:
        self._busy = False
        if self._transport is not None:
            self._transport.write(data)
            self._next()


def wire_of(store: S3Store) -> S3Wire:
    """The :class:`S3Wire` whose client a store made by :meth:`S3Wire.store` sends through."""
    found = _WIRES.get(store.requests.client)
    if found is None:
        raise TypeError("not a store of an S3Wire")
    return found


_WIRES: weakref.WeakKeyDictionary[Any, S3Wire] = weakref.WeakKeyDictionary()
"""Each client :meth:`S3Wire.client` made -> its wire."""


class _Raw(io.BytesIO):
    """An answer's body as botocore reads one off a connection (urllib3's ``stream``, ``read``, ``release_conn``)."""

    def stream(self, amt: int = 65536, decode_content: bool | None = None) -> Iterator[bytes]:
        while chunk := self.read(amt):
            yield chunk

    def release_conn(self) -> None:
        pass


class _Session:
    """Stands in for the client's HTTP session (``client._endpoint.http_session``): what it sends, the wire answers."""

    def __init__(self, wire_: S3Wire) -> None:
        self._wire = wire_
        self._verify = True  # as botocore's session keeps them (s3commit.store.lean_http.settings_of reads them)
        self._proxy_config = self

    def proxy_url_for(self, url: str) -> None:
        return None

    def send(self, request: Any) -> Any:
        return self._wire.answer(request)

    def close(self) -> None:
        pass


# --- HTTP -> the model's parameters --------------------------------------------------------------------------------

_Params = Callable[[str, str, dict[str, list[str]], dict[str, str], bytes], dict[str, Any]]


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _conditions(heads: dict[str, str]) -> dict[str, str]:
    found = {}
    if "if-none-match" in heads:
        found["IfNoneMatch"] = heads["if-none-match"]
    if "if-match" in heads:
        found["IfMatch"] = heads["if-match"]
    return found


def _object(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    return {"Bucket": bucket, "Key": key}


def _put(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    params = {"Bucket": bucket, "Key": key, "Body": body, **_conditions(heads)}
    if "content-type" in heads:
        params["ContentType"] = heads["content-type"]
    return params


def _ranged_get(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    params = {"Bucket": bucket, "Key": key}
    if "range" in heads:
        params["Range"] = heads["range"]
    return params


def _delete(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    return {"Bucket": bucket, "Key": key, **_conditions(heads)}


def _children(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [child for child in element if child.tag.rpartition("}")[2] == name]


def _child_text(element: ElementTree.Element, name: str) -> str | None:
    found = _children(element, name)
    return found[0].text or "" if found else None


def _delete_objects(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    root = ElementTree.fromstring(body)
    objects = []
    for item in _children(root, "Object"):
        entry = {"Key": _child_text(item, "Key") or ""}
        etag = _child_text(item, "ETag")
        if etag is not None:
            entry["ETag"] = etag
        objects.append(entry)
    quiet = (_child_text(root, "Quiet") or "").lower() == "true"
    return {"Bucket": bucket, "Delete": {"Objects": objects, "Quiet": quiet}}


def _copy_source(heads: dict[str, str]) -> tuple[str, str]:
    source = unquote(heads.get("x-amz-copy-source", "").partition("?")[0]).lstrip("/")
    bucket, _, key = source.partition("/")
    return bucket, key


def _copy(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    source_bucket, source_key = _copy_source(heads)
    return {"Bucket": bucket, "Key": key, "CopySource": {"Bucket": source_bucket, "Key": source_key}}


def _list_objects(bucket: str, key: str, query: dict[str, list[str]], heads: Any, body: bytes) -> dict[str, Any]:
    params: dict[str, Any] = {"Bucket": bucket, "Prefix": _one(query, "prefix") or ""}
    for name, field in (("delimiter", "Delimiter"), ("continuation-token", "ContinuationToken"),
                        ("start-after", "StartAfter")):
        value = _one(query, name)
        if value:
            params[field] = value
    if _one(query, "max-keys"):
        params["MaxKeys"] = int(_one(query, "max-keys") or 0)
    return params


def _create(bucket: str, key: str, query: Any, heads: dict[str, str], body: bytes) -> dict[str, Any]:
    return {"Bucket": bucket, "Key": key}


def _upload(bucket: str, key: str, query: dict[str, list[str]], heads: Any, body: bytes) -> dict[str, Any]:
    return {"Bucket": bucket, "Key": key, "UploadId": _one(query, "uploadId")}


def _upload_part(bucket: str, key: str, query: dict[str, list[str]], heads: Any, body: bytes) -> dict[str, Any]:
    return {**_upload(bucket, key, query, heads, body), "PartNumber": int(_one(query, "partNumber") or 0),
            "Body": body}


def _complete(bucket: str, key: str, query: dict[str, list[str]], heads: dict[str, str], body: bytes) -> dict[str, Any]:
    parts = [{"ETag": _child_text(part, "ETag") or "", "PartNumber": int(_child_text(part, "PartNumber") or 0)}
             for part in _children(ElementTree.fromstring(body), "Part")] if body else []
    return {**_upload(bucket, key, query, heads, body), "MultipartUpload": {"Parts": parts}, **_conditions(heads)}


def _list_uploads(bucket: str, key: str, query: dict[str, list[str]], heads: Any, body: bytes) -> dict[str, Any]:
    params: dict[str, Any] = {"Bucket": bucket, "Prefix": _one(query, "prefix") or ""}
    if _one(query, "key-marker") is not None:
        params["KeyMarker"] = _one(query, "key-marker")
        params["UploadIdMarker"] = _one(query, "upload-id-marker") or ""
    if _one(query, "max-uploads"):
        params["MaxUploads"] = int(_one(query, "max-uploads") or 0)
    params["EncodingType"] = _one(query, "encoding-type")
    return params


_PARAMS: dict[S3Operation, _Params] = {
    Op.HEAD_BUCKET: lambda bucket, *_: {"Bucket": bucket}, Op.PUT_OBJECT: _put, Op.GET_OBJECT: _ranged_get,
    Op.HEAD_OBJECT: _object, Op.DELETE_OBJECT: _delete, Op.DELETE_OBJECTS: _delete_objects, Op.COPY_OBJECT: _copy,
    Op.LIST_OBJECTS_V2: _list_objects, Op.CREATE_MULTIPART_UPLOAD: _create, Op.UPLOAD_PART: _upload_part,
    Op.COMPLETE_MULTIPART_UPLOAD: _complete, Op.ABORT_MULTIPART_UPLOAD: _upload,
    Op.LIST_MULTIPART_UPLOADS: _list_uploads,
}  # fmt: skip


# --- the model's answers -> S3's HTTP answers ----------------------------------------------------------------------

def _xml(root: str, inner: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{_XMLNS}">{inner}</{root}>'.encode()


def _tag(name: str, value: object) -> str:
    return f"<{name}>{escape(str(value))}</{name}>"


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _http_date(seconds: float) -> str:
    return format_datetime(datetime.fromtimestamp(seconds, timezone.utc), usegmt=True)


def _etag(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    return 200, {"etag": answer["ETag"]}, b""


def _no_content(status: int) -> Callable[[dict[str, Any], dict[str, Any]], _Answer]:
    return lambda answer, params: (status, {}, b"")


def _object_headers(answer: dict[str, Any]) -> dict[str, str]:
    return {"etag": answer["ETag"], "last-modified": format_datetime(answer["LastModified"], usegmt=True),
            "content-type": answer.get("ContentType", "binary/octet-stream"), "accept-ranges": "bytes",
            "content-length": str(answer["ContentLength"])}


def _got(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    headers = _object_headers(answer)
    if "ContentRange" in answer:
        headers["content-range"] = answer["ContentRange"]
    return (206 if "ContentRange" in answer else 200), headers, answer["Body"].getvalue()


def _headed(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    return 200, _object_headers(answer), b""


def _deleted(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    errors = answer.get("Errors") or []
    failed = {error["Key"] for error in errors}
    inner = "" if params["Delete"]["Quiet"] else "".join(
        f"<Deleted>{_tag('Key', item['Key'])}</Deleted>" for item in params["Delete"]["Objects"]
        if item["Key"] not in failed)
    inner += "".join(f"<Error>{_tag('Key', e['Key'])}{_tag('Code', e['Code'])}{_tag('Message', e['Message'])}</Error>"
                     for e in errors)
    return 200, {"content-type": "application/xml"}, _xml("DeleteResult", inner)


def _copied(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    result = answer["CopyObjectResult"]
    inner = _tag("LastModified", _iso(result["LastModified"])) + _tag("ETag", result["ETag"])
    return 200, {"content-type": "application/xml"}, _xml("CopyObjectResult", inner)


def _listed(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    # botocore asks for url-encoded keys (encoding-type=url) and decodes them; the model's token is a key, opaque here
    def name(text: str) -> str:
        return quote(text, safe="/")

    inner = [_tag("Name", params["Bucket"]), _tag("Prefix", name(params["Prefix"])),
             _tag("KeyCount", answer["KeyCount"]),
             _tag("MaxKeys", params.get("MaxKeys", 1000)), _tag("IsTruncated", str(answer["IsTruncated"]).lower()),
             _tag("EncodingType", "url")]
    if "Delimiter" in params:
        inner.append(_tag("Delimiter", name(params["Delimiter"])))
    if "ContinuationToken" in params:
        inner.append(_tag("ContinuationToken", params["ContinuationToken"]))
    if "NextContinuationToken" in answer:
        inner.append(_tag("NextContinuationToken", answer["NextContinuationToken"]))
    inner.extend(f"<Contents>{_tag('Key', name(o['Key']))}{_tag('LastModified', _iso(o['LastModified']))}"
                 f"{_tag('ETag', o['ETag'])}{_tag('Size', o['Size'])}<StorageClass>STANDARD</StorageClass></Contents>"
                 for o in answer["Contents"])
    inner.extend(f"<CommonPrefixes>{_tag('Prefix', name(p['Prefix']))}</CommonPrefixes>"
                 for p in answer["CommonPrefixes"])
    return 200, {"content-type": "application/xml"}, _xml("ListBucketResult", "".join(inner))


def _created(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    inner = _tag("Bucket", answer["Bucket"]) + _tag("Key", answer["Key"]) + _tag("UploadId", answer["UploadId"])
    return 200, {"content-type": "application/xml"}, _xml("InitiateMultipartUploadResult", inner)


def _completed(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    location = f"{ENDPOINT_URL}/{quote(answer['Bucket'])}/{quote(answer['Key'])}"
    inner = (_tag("Location", location) + _tag("Bucket", answer["Bucket"]) + _tag("Key", answer["Key"])
             + _tag("ETag", answer["ETag"]))
    return 200, {"content-type": "application/xml"}, _xml("CompleteMultipartUploadResult", inner)


def _uploads_listed(answer: dict[str, Any], params: dict[str, Any]) -> _Answer:
    encoded = params.get("EncodingType") == "url"

    def name(text: str) -> str:
        return quote(text, safe="/") if encoded else text

    inner = [_tag("Bucket", params["Bucket"]), _tag("KeyMarker", name(params.get("KeyMarker") or "")),
             _tag("UploadIdMarker", params.get("UploadIdMarker") or ""), _tag("Prefix", name(params["Prefix"])),
             _tag("MaxUploads", params.get("MaxUploads", 1000)),
             _tag("IsTruncated", str(answer["IsTruncated"]).lower())]
    if encoded:
        inner.append(_tag("EncodingType", "url"))
    if "NextKeyMarker" in answer:
        inner.append(_tag("NextKeyMarker", name(answer["NextKeyMarker"])))
        inner.append(_tag("NextUploadIdMarker", answer["NextUploadIdMarker"]))
    inner.extend(f"<Upload>{_tag('Key', name(u['Key']))}{_tag('UploadId', u['UploadId'])}"
                 f"{_tag('Initiated', _iso(u['Initiated']))}<StorageClass>STANDARD</StorageClass></Upload>"
                 for u in answer["Uploads"])
    return 200, {"content-type": "application/xml"}, _xml("ListMultipartUploadsResult", "".join(inner))


_RENDER: dict[S3Operation, Callable[[dict[str, Any], dict[str, Any]], _Answer]] = {
    Op.HEAD_BUCKET: lambda answer, params: (200, {"x-amz-bucket-region": "us-east-1"}, b""),
    Op.PUT_OBJECT: _etag, Op.GET_OBJECT: _got, Op.HEAD_OBJECT: _headed, Op.DELETE_OBJECT: _no_content(204),
    Op.DELETE_OBJECTS: _deleted, Op.COPY_OBJECT: _copied, Op.LIST_OBJECTS_V2: _listed,
    Op.CREATE_MULTIPART_UPLOAD: _created, Op.UPLOAD_PART: _etag, Op.COMPLETE_MULTIPART_UPLOAD: _completed,
    Op.ABORT_MULTIPART_UPLOAD: _no_content(204), Op.LIST_MULTIPART_UPLOADS: _uploads_listed,
}  # fmt: skip


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)
