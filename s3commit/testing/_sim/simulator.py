"""A simulated S3: an HTTP proxy in front of a moto server that adds latency, throttling and faults.

moto answers S3 requests correctly but instantly and never fails.
:class:`SimulatorServer` sits between the client and moto on 127.0.0.1 and, for every request:

1. classifies it into an S3 operation (:mod:`~s3commit.testing._sim.classify`) and counts it
   (:mod:`~s3commit.testing._sim.stats`);
2. refuses it with 503 SlowDown if the per-prefix throttle says so (:mod:`~s3commit.testing._sim.profiles`);
3. injects the fault the :class:`~s3commit.testing._sim.faults.FaultInjector` decides, if any;
4. sleeps the request body's transfer time of the :class:`~s3commit.testing._sim.profiles.LatencyProfile`
   (and for CopyObject / UploadPartCopy the source size over the COPY bandwidth);
5. forwards it to moto so that moto's work would end, at its usual pace for the requests being served, when the
   first-byte latency does (moto's own time is part of it, as S3's work is part of S3's latency, and a slow request's
   effect lands at its end), sleeps what is left of it, maps moto's known gaps to AWS's answers (an unknown upload
   id, the initiation dates of uploads: :mod:`~s3commit.testing._sim.initiated`), and relays the response.

Each client connection has its own thread, so one request's sleep never delays another; the client side speaks
HTTP/1.1 keep-alive; the store behind is reached through :mod:`~s3commit.testing._sim.upstream` (moto called in this
process, or a server over HTTP, a connection per request).
Request and response bodies are buffered in memory one request at a time.

The simulator is controlled over HTTP under ``/__sim/`` (a path no bucket can own: bucket names cannot hold
``_``): ``GET stats``, ``GET requests``, ``POST reset-stats``, ``GET|POST config``, ``POST fail-next``, ``POST advance``
(the store's clock moved on: :mod:`~s3commit.testing._sim.store_clock`), ``POST hold``, ``POST release``, ``GET held``
(requests held until released: :mod:`~s3commit.testing._sim.holds`), ``POST reset``.
Starting moto and the process around it is :mod:`s3commit.testing.server`'s job.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from s3commit.testing._sim import wire
from s3commit.testing._sim.classify import COPY_OPERATIONS, RequestTarget, S3Operation, classify_request
from s3commit.testing._sim.config import SimulatorConfig
from s3commit.testing._sim.faults import Fault, FaultInjector, FaultKind
from s3commit.testing._sim.holds import Holds
from s3commit.testing._sim.initiated import InitiationDates
from s3commit.testing._sim.profiles import Throttle
from s3commit.testing._sim.stats import StatsRecorder, StatsSnapshot
from s3commit.testing._sim.store_clock import StoreClock
from s3commit.testing._sim.upstream import HttpUpstream, Upstream, UpstreamAnswer

_VALIDATED = (S3Operation.PUT_OBJECT, S3Operation.UPLOAD_PART)
"""The operations whose checksum headers S3 checks against the body (with ``validate_checksums``)."""

# moto indexes ``bucket.multiparts[upload_id]`` directly in these operations, so an unknown upload id
# raises KeyError and the server answers HTTP 500, where AWS answers 404 NoSuchUpload.
# That is exactly the answer a committer gets when another job aborted its upload, so we translate it.
_NO_SUCH_UPLOAD_GAP = frozenset(
    {S3Operation.UPLOAD_PART, S3Operation.UPLOAD_PART_COPY, S3Operation.COMPLETE_MULTIPART_UPLOAD}
)

_WRITES = frozenset({S3Operation.PUT_OBJECT, S3Operation.COPY_OBJECT, S3Operation.COMPLETE_MULTIPART_UPLOAD})
"""The operations that write an object (dated on the store's clock: ``store_clock``)."""
_LISTINGS = frozenset({S3Operation.LIST_OBJECTS, S3Operation.LIST_OBJECTS_V2, S3Operation.OTHER})
"""Answers that list objects with their dates (``OTHER``: ListObjectVersions among others)."""


class WorkTimes:
    """The store's usual time for each operation (a moving average of moto's time for the last requests), so that a
    request's work can be started that long before its latency ends. Updated without a lock: a lost update only
    ages the average a request later."""

    WEIGHT = 0.2
    """The weight of the latest request in the average."""

    def __init__(self) -> None:
        self._seconds: dict[S3Operation, float] = {}

    def expected(self, operation: S3Operation) -> float:
        """Seconds the store usually takes for ``operation`` (0 before its first request)."""
        return self._seconds.get(operation, 0.0)

    def observed(self, operation: S3Operation, seconds: float) -> None:
        """The store took ``seconds`` for a request of ``operation``."""
        before = self._seconds.get(operation)
        self._seconds[operation] = seconds if before is None else before + self.WEIGHT * (seconds - before)


class Simulator:
    """The simulator's state: configuration, fault injector, throttle and stats. Thread-safe.

    Handlers read :attr:`config` and :attr:`throttle` once per request, so a reconfiguration applies to
    requests that start after it.
    """

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.initial_config = config or SimulatorConfig()
        self.stats = StatsRecorder()
        self.clock = StoreClock()
        self.holds = Holds()
        self.initiated = InitiationDates()
        self.work = WorkTimes()
        self.injector = FaultInjector(self.initial_config.faults, seed=self.initial_config.seed)
        self._lock = threading.Lock()
        self.config = self.initial_config
        self.throttle = Throttle(self.config.throttle) if self.config.throttle else None

    def configure(self, changes: Mapping[str, Any]) -> SimulatorConfig:
        """Apply JSON-style ``changes`` (see :meth:`SimulatorConfig.updated`) and return the new config.

        Setting ``faults`` or ``seed`` restarts the fault streams; setting ``throttle`` refills its buckets.
        """
        with self._lock:
            config = self.config.updated(changes)
            if "faults" in changes or "seed" in changes:
                self.injector.configure(config.faults, seed=config.seed)
            if "throttle" in changes:
                self.throttle = Throttle(config.throttle) if config.throttle else None
            self.config = config
            return config

    def reset(self) -> None:
        """Back to the initial configuration, with no scripted faults, no held requests and zeroed stats (the
        store's clock stays where it was moved: :mod:`~s3commit.testing._sim.store_clock`)."""
        with self._lock:
            self.config = self.initial_config
            self.injector.configure(self.config.faults, seed=self.config.seed)
            self.injector.clear_script()
            self.throttle = Throttle(self.config.throttle) if self.config.throttle else None
            self.stats.reset()
        self.holds.release()

    def snapshot(self) -> StatsSnapshot:
        """The current stats."""
        return self.stats.snapshot()


class SimulatorServer:
    """The proxy server: serves the simulated S3 on ``host:port`` in front of ``upstream``.

    Args:
        upstream: the store behind: the base URL of a server (``"http://127.0.0.1:5000"``), or an
            :class:`~s3commit.testing._sim.upstream.Upstream` (the test server calls moto in its own process).
        host: address to bind; keep the default loopback.
        port: port to bind; 0 picks a free one (read :attr:`url` after :meth:`start`).
        config: initial configuration (also what ``POST /__sim/reset`` returns to).
    """

    def __init__(
        self, *, upstream: str | Upstream, host: str = "127.0.0.1", port: int = 0,
        config: SimulatorConfig | None = None,
    ) -> None:
        upstream = HttpUpstream(upstream) if isinstance(upstream, str) else upstream
        self.simulator = Simulator(config)
        self._httpd = _ProxyHTTPServer((host, port), _ProxyHandler)
        self._httpd.simulator = self.simulator
        self._httpd.upstream = upstream
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The simulator's base URL, ``http://host:port``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> SimulatorServer:
        """Start serving in a daemon thread; return ``self``."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="s3-simulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _ProxyHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # boto3 opens up to max_pool_connections at once; the default backlog of 5 would make bursts wait
    # for SYN retransmits (a 1 s stall) and show up as fake latency.
    request_queue_size = 256
    simulator: Simulator
    upstream: Upstream


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue handled by BaseHTTPRequestHandler
    server_version = "s3commit-simulator"
    timeout = 120.0  # an idle keep-alive connection frees its thread after this
    # Headers and body go out in two writes: with Nagle on, the body would wait for the client's delayed ACK
    # (40 ms on Linux), 40 ms on every answer with a body (GET, LIST, Complete) that S3 does not add.
    disable_nagle_algorithm = True
    server: _ProxyHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the server's stderr; stats say what happened

    bucket = ""
    """The bucket the request being answered is about ("": none), whose clock its ``Date`` is on."""

    def date_time_string(self, timestamp: float | None = None) -> str:  # the store's clock, clock_offset off ours
        simulator = self.server.simulator
        return super().date_time_string((timestamp or simulator.clock.now(self.bucket))
                                        + simulator.config.clock_offset)

    def do_GET(self) -> None:
        self._dispatch()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def _dispatch(self) -> None:
        self.bucket = ""
        if self.path.startswith("/__sim/"):
            self._control()
        else:
            _Exchange(self).run()

    # -- control API -------------------------------------------------------------------------------

    def _control(self) -> None:
        simulator = self.server.simulator
        action = urlsplit(self.path).path.removeprefix("/__sim/")
        try:
            payload = json.loads(wire.read_body(self.rfile, self.headers.items()) or b"{}")
            if self.command == "GET" and action in ("stats", "requests"):
                answer: Any = simulator.snapshot().to_dict() if action == "stats" else simulator.stats.log()
            elif (self.command, action) == ("POST", "reset-stats"):
                simulator.stats.reset()
                answer = {}
            elif action == "config" and self.command in ("GET", "POST"):
                config = simulator.configure(payload) if self.command == "POST" else simulator.config
                answer = {**config.to_dict(), "scripted": simulator.injector.pending_script()}
            elif (self.command, action) == ("POST", "fail-next"):
                simulator.injector.script(
                    payload["operation"],
                    payload["kind"],
                    int(payload.get("count", 1)),
                    after_forward=bool(payload.get("after_forward", False)),
                )
                answer = {"scripted": simulator.injector.pending_script()}
            elif (self.command, action) == ("POST", "hold"):
                simulator.holds.hold(S3Operation.parse(payload["operation"]), str(payload.get("ending", "")))
                answer = {"held": simulator.holds.waiting()}
            elif (self.command, action) == ("POST", "release"):
                released = payload.get("operation")
                simulator.holds.release(S3Operation.parse(released) if released else None)
                answer = {"held": simulator.holds.waiting()}
            elif (self.command, action) == ("GET", "held"):
                answer = {"held": simulator.holds.waiting()}
            elif (self.command, action) == ("POST", "advance"):
                answer = {"advanced": simulator.clock.advance(str(payload["bucket"]), float(payload["seconds"]))}
            elif (self.command, action) == ("POST", "reset"):
                simulator.reset()
                answer = {}
            else:
                self._reply(404, wire.json_body({"error": f"no control endpoint {self.command} /__sim/{action}"}))
                return
        except (ValueError, KeyError, TypeError) as error:
            self._reply(400, wire.json_body({"error": f"{type(error).__name__}: {error}"}))
            return
        self._reply(200, wire.json_body(answer))

    def _reply(self, status: int, body: bytes, headers: list[tuple[str, str]] | None = None) -> None:
        """Send a complete response; always framed, so the keep-alive connection stays usable."""
        headers = headers or [("Content-Type", "application/json")]
        has_body = status not in (204, 304) and self.command != "HEAD"
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if has_body:
            self.send_header("Content-Length", str(len(body)))
        elif self.command == "HEAD" and not any(name.lower() == "content-length" for name, _ in headers):
            self.send_header("Content-Length", "0")
        self.end_headers()
        if has_body:
            self.wfile.write(body)


class _Exchange:
    """One S3 request through the pipeline described in the module docstring."""

    def __init__(self, handler: _ProxyHandler) -> None:
        self.arrived = time.monotonic()  # the latency's clock starts when the request is read, not when it is served
        self.handler = handler
        self.simulator = handler.server.simulator
        self.config = self.simulator.config  # one consistent view for the whole request
        self.throttle = self.simulator.throttle
        self.split = urlsplit(handler.path)
        self.target: RequestTarget = classify_request(
            handler.command, self.split.path, self.split.query, dict(handler.headers.items())
        )
        self.operation = self.target.operation
        handler.bucket = self.target.bucket

    def run(self) -> None:
        stats = self.simulator.stats
        entry = stats.request(self.operation, self.target, self.handler.headers.get("Range"))
        stats.begin(self.operation)
        try:
            self._run()
        finally:
            stats.end(self.operation)
            stats.answered(entry)

    def _run(self) -> None:
        stats, operation, profile = self.simulator.stats, self.operation, self.config.profile
        try:
            body = wire.read_body(self.handler.rfile, self.handler.headers.items())
        except wire.BadRequestBody:
            self.handler.close_connection = True
            self._drop()  # the stream is out of sync; nothing sensible can be answered on it
            return
        stats.body_in(operation, len(body))
        self.simulator.holds.pass_through(operation, self.target.key)
        cost = body.count(b"<Object>") if operation is S3Operation.DELETE_OBJECTS else 1  # each key a write
        if self.throttle is not None and not self.throttle.admit(operation, self.target.bucket, self.target.key,
                                                                 cost=max(1, cost)):
            stats.throttle(operation)
            self._sleep(profile.first_byte(operation))
            self._send_error("SlowDown")
            return
        fault = self.simulator.injector.decide(operation)
        if fault is not None and fault.kind is FaultKind.CORRUPT:
            stats.fault(operation, fault.kind)
            body, fault = wire.flip_one_bit(body), None
        if fault is not None and not fault.after_forward:
            self._inject(fault)
            return
        first_byte = profile.first_byte(operation)
        ahead = profile.transfer_seconds(len(body))  # before the store's work: the body's way in (it has it only then)
        if self.config.validate_checksums and operation in _VALIDATED \
                and wire.checksum_mismatch(self.handler.headers.items(), body):
            stats.translate("BadDigest")
            self._sleep(first_byte + ahead)
            self._send_error("BadDigest")
            return
        if operation in COPY_OPERATIONS:
            size = self._copy_source_size()
            copy_seconds = profile.copy_seconds(size, bandwidth=self.config.copy_bandwidth)
            stats.copy(size, copy_seconds)
            ahead += copy_seconds  # and the copy, done before the store answers and before it is visible
        self._sleep(ahead, slept=max(0.0, ahead - (time.monotonic() - self.arrived)))  # reading the body is in it
        # The store does its work within the first-byte latency, as S3's own work is part of S3's: the time since the
        # request was read (its body's transfer aside) and moto's (CPU the simulator's threads share under one GIL)
        # are not added on top of it. The work is started so that it would end when the latency does even if every
        # request being served needed the store's usual time for it at once (they share one GIL): a lone slow request's
        # effect lands at the end of its latency, so that a test that makes an operation slow holds it unapplied that
        # long, and a wave of requests is not served one after another past its latency.
        started = self.arrived + ahead
        queue = self.simulator.work.expected(operation) * stats.serving()
        lead = first_byte - (time.monotonic() - started) - queue
        if lead > 0:
            time.sleep(lead)
        forwarded = time.monotonic()
        try:
            status, headers, answer = self._forward(body)
        except (OSError, http.client.HTTPException):
            self._sleep(first_byte)
            self._send_error("BadGateway")
            return
        self.simulator.work.observed(operation, time.monotonic() - forwarded)
        self._sleep(first_byte, slept=max(0.0, first_byte - (time.monotonic() - started)))
        if status == 500 and operation in _NO_SUCH_UPLOAD_GAP and self._upload_is_missing():
            stats.translate("NoSuchUpload")
            status, answer = wire.error_document(
                "NoSuchUpload", resource=self.split.path, upload_id=self._query_value("uploadId")
            )
            headers = self._error_headers()
        if status < 300:
            answer = self._note_initiation(answer)
            self._note_written(body)
        if fault is not None:  # a reset after forwarding: S3 applied the request, the answer is lost
            stats.fault(operation, fault.kind, after_forward=True)
            self._drop()
            return
        if self.handler.command != "HEAD":
            self._sleep(profile.transfer_seconds(len(answer)))
        self._respond(status, answer, headers)

    # -- pipeline steps ----------------------------------------------------------------------------

    def _note_initiation(self, answer: bytes) -> bytes:
        dates, operation = self.simulator.initiated, self.operation
        if operation is S3Operation.CREATE_MULTIPART_UPLOAD:
            dates.created(answer, self.simulator.clock.now(self.target.bucket))
        elif operation in (S3Operation.COMPLETE_MULTIPART_UPLOAD, S3Operation.ABORT_MULTIPART_UPLOAD):
            dates.ended(self._query_value("uploadId"))
        elif operation is S3Operation.LIST_MULTIPART_UPLOADS:
            return dates.rewrite_listing(answer)
        return answer

    def _note_written(self, body: bytes) -> None:
        """Objects written or deleted: dated on the store's clock as it is now (``store_clock``)."""
        clock, operation, bucket = self.simulator.clock, self.operation, self.target.bucket
        if operation in _WRITES:
            clock.written(bucket, self.target.key)
        elif operation is S3Operation.DELETE_OBJECT:
            clock.deleted(bucket, self.target.key)
        elif operation is S3Operation.DELETE_OBJECTS and clock.advanced(bucket):
            for key in wire.listed_keys(body):
                clock.deleted(bucket, key)

    def _sleep(self, seconds: float, *, slept: float | None = None) -> None:
        """The latency ``seconds`` (counted as the request's delay), of which ``slept`` (default: all of it) is
        still to wait: the rest passed while the store did its work."""
        if seconds > 0:
            self.simulator.stats.delay(self.operation, seconds)
            slept = seconds if slept is None else slept
            if slept > 0:
                time.sleep(slept)

    def _inject(self, fault: Fault) -> None:
        self.simulator.stats.fault(self.operation, fault.kind)
        self._sleep(self.config.profile.first_byte(self.operation))
        if fault.kind is FaultKind.SLOW_DOWN:
            self._send_error("SlowDown")
        elif fault.kind is FaultKind.INTERNAL_ERROR:
            self._send_error("InternalError")
        elif fault.kind is FaultKind.ERROR_200:
            # S3 may send 200 OK, then fail while assembling the object, and put the error in the body
            #. Clients must parse the body to notice.
            _, document = wire.error_document("InternalError", resource=self.split.path)
            self._respond(200, document, self._error_headers())
        else:
            self._drop()

    def _drop(self) -> None:
        self.handler.close_connection = True
        wire.reset_connection(self.handler.connection)

    def _send_error(self, code: str) -> None:
        status, document = wire.error_document(code, resource=self.split.path)
        self._respond(status, document, self._error_headers())

    def _respond(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        if self.handler.command != "HEAD":
            self.simulator.stats.body_out(self.operation, len(body))
        self.handler._reply(status, body, headers)

    @staticmethod
    def _error_headers() -> list[tuple[str, str]]:
        return [("Content-Type", "application/xml"), ("x-amz-request-id", wire.request_id())]

    def _send_upstream(self, method: str, path: str, headers: Mapping[str, str], body: bytes = b"") -> UpstreamAnswer:
        return self.handler.server.upstream.send(method, path, headers, body)

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = dict(wire.forwardable(self.handler.headers.items()))
        if self.operation is S3Operation.DELETE_OBJECT and not self.config.conditional_deletes:
            headers = {name: value for name, value in headers.items() if name.lower() != "if-match"}
        headers["Content-Length"] = str(len(body))
        if self.handler.command in ("GET", "HEAD", "DELETE") and not body:
            del headers["Content-Length"]
        response = self._send_upstream(self.handler.command, self.handler.path, headers, body)
        answer = response.body
        # Our server writes its own Server and Date headers; moto's would be duplicates.
        offset, clock = self.config.clock_offset, self.simulator.clock
        moved = offset + (clock.shift(self.target.bucket, self.target.key) if self.target.key else 0.0)
        keep = [(name, wire.shifted_http_date(value, moved) if moved and name.lower() == "last-modified"
                 else value) for name, value in wire.forwardable(response.headers)
                if name.lower() not in ("server", "date")]
        if self.operation in _LISTINGS and clock.advanced(self.target.bucket):
            answer = wire.shifted_entries(answer, lambda key: clock.shift(self.target.bucket, key),
                                          url_encoded=self._query_value("encoding-type") == "url")
        answer = wire.shifted_listing(answer, offset) if offset and self.handler.command == "GET" else answer
        if self.handler.command == "HEAD":
            # A HEAD answer's Content-Length is the object's size; it must reach the client intact.
            length = response.header("Content-Length")
            keep += [("Content-Length", length)] if length is not None else []
        return response.status, keep, answer

    def _internal_headers(self) -> dict[str, str]:
        """Credentials for our own side requests to moto: it reads the access key from the client's
        Authorization header to pick the account (it does not verify signatures); without it, 403."""
        names = ("authorization", "x-amz-security-token")
        return {name: value for name, value in self.handler.headers.items() if name.lower() in names}

    def _copy_source_size(self) -> int:
        """Bytes the copy will move: the source range, else the source object's size (a HEAD upstream)."""
        ranged = wire.copy_range_length(self.handler.headers.get("x-amz-copy-source-range"))
        if ranged is not None:
            return ranged
        source = (self.handler.headers.get("x-amz-copy-source") or "").lstrip("/")
        path, _, query = source.partition("?")
        version = parse_qs(query).get("versionId")
        head_path = "/" + quote(unquote(path), safe="/~") + (f"?versionId={version[0]}" if version else "")
        try:
            response = self._send_upstream("HEAD", head_path, self._internal_headers())
        except (OSError, http.client.HTTPException):
            return 0
        length = response.header("Content-Length")
        return int(length) if response.status == 200 and length and length.isdigit() else 0

    def _upload_is_missing(self) -> bool:
        """Ask moto whether the request's upload id exists; ListParts answers NoSuchUpload correctly."""
        upload_id = self._query_value("uploadId")
        if not upload_id:
            return False
        path = f"/{quote(self.target.bucket)}/{quote(self.target.key, safe='/~')}"
        query = f"uploadId={quote(upload_id, safe='')}&max-parts=1"
        try:
            return self._send_upstream("GET", f"{path}?{query}", self._internal_headers()).status == 404
        except (OSError, http.client.HTTPException):
            return False

    def _query_value(self, name: str) -> str | None:
        values = parse_qs(self.split.query, keep_blank_values=True).get(name)
        return values[0] if values else None
