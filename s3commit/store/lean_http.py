"""HTTP/1.1 on connections of s3commit's own, many requests in flight from one thread (asyncio): how a job commit
sends its Completes without a thread for each one in flight.

A commit of 100,000 files sends 100,000 Completes of ~50 ms each; S3 takes 3,500 writes a second per prefix, so
~175 must be in flight. Sent from that many threads, each Complete costs its thread a wake-up, a wait for the GIL
and a hand-over of it several times over (measured on the 2-core reference machine: ~18 context switches and
0.6-0.9 ms of CPU a Complete at 256 in flight, against 0.38 ms with no latency to wait), and urllib3's and
``http.client``'s work per request comes on top over a real socket. Here one event loop keeps every connection:
a request is written, its answer read when it arrives, and nothing waits in a thread.

What is sent is what :mod:`s3commit.store.lean_complete` built and signed; what is spoken is the HTTP/1.1 a client
of S3 needs: ``Host`` and the request's headers, a body of known length, keep-alive connections reused, an answer
of ``Content-Length``, ``chunked`` or read to the connection's end, ``Connection: close`` honoured, interim 1xx
answers skipped. TLS as the store's client has it (its ``verify``: a CA bundle, on or off). Where the client goes
through a proxy or presents a client certificate, this does not apply (:func:`settings_of` says None) and the
client's own session sends instead.

A request that fails on the way (the connection refused, reset or timed out, an answer cut short) raises
:class:`Unanswered`, which says whether the request may have reached the server: the caller decides what is safe
to do again (:meth:`s3commit.store.uploads.UploadRequests.complete_many` hands it to the store's retry loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections import deque
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

Ran = TypeVar("Ran")
Fed = TypeVar("Fed")

_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+
MAX_HEAD = 64 * 1024
"""The largest answer head (status line and headers) read."""
CLOSE_SECONDS = 30.0
"""Longest wait, when a :class:`LeanLoop` closes, for what still runs on it to be cancelled."""


class Unanswered(Exception):
    """A request got no whole answer. ``sent``: its bytes were written, so the server may have acted on it."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status, headers (names lower-cased; a repeated header's values joined by ``,``), body."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Settings:
    """How connections are made: TLS verification (``verify``: True, False or a CA bundle's path) and timeouts in
    seconds (None: none)."""

    verify: bool | str = True
    connect_timeout: float | None = 60.0
    read_timeout: float | None = 60.0

    def ssl_context(self) -> ssl.SSLContext:
        if self.verify is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        return ssl.create_default_context(cafile=self.verify if isinstance(self.verify, str) else None)


def settings_of(client: Any, url: str) -> Settings | None:
    """The :class:`Settings` of botocore ``client``'s connections to ``url``, or None where they are not plain
    (a proxy for ``url``, a client certificate, an HTTP session of another kind): the client's session then."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    proxies = getattr(session, "_proxy_config", None)
    if session is None or proxies is None or getattr(session, "_cert_file", None):
        return None
    try:
        if proxies.proxy_url_for(url):
            return None
    except Exception:
        return None
    verify = getattr(session, "_verify", True)
    config = client.meta.config
    return Settings(verify=verify if isinstance(verify, (bool, str)) else True,
                    connect_timeout=getattr(config, "connect_timeout", 60) or None,
                    read_timeout=getattr(config, "read_timeout", 60) or None)


@dataclass(frozen=True)
class Origin:
    """Where connections go: ``scheme`` (http, https), ``host`` and ``port``."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        split = urlsplit(url)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        return cls(split.scheme, split.hostname, split.port or (443 if split.scheme == "https" else 80))


class _Connection(asyncio.Protocol):
    """One keep-alive connection: its transport, and the answer to its request in flight, parsed as its bytes arrive
    (no reader task, no wait per line: one callback per segment received)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.ended = False  # the server closed it (or it was lost): never used again
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[Answer, bool]] | None = None
        self._method = ""
        self._head: tuple[int, dict[str, str], bool] | None = None  # status, headers, keep-alive
        self._length = -1  # the body's (Content-Length), or -1: chunked (_chunks) or to the end (_to_end)
        self._chunks: list[bytes] | None = None
        self._to_end = False
        self._at = 0  # where the next chunk's size line starts

    # --- asyncio's callbacks -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._answer is None:  # bytes while idle: not an answer to anything of ours
            self.ended = True
            return
        self._read()

    def eof_received(self) -> bool:
        self.ended = True
        if self._answer is not None:
            self._read(end=True)
        return False  # (the transport closes itself)

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if self._answer is not None:
            self._read(end=True, lost=exc)

    # --- one request -------------------------------------------------------------------------------------------

    def request(self, method: str, data: bytes) -> asyncio.Future[tuple[Answer, bool]]:
        """Write ``data`` (a whole request) and return the future of its answer and whether the connection may carry
        another request. Raises what the transport raises if it cannot be written."""
        assert self.transport is not None and self._answer is None
        self._answer = answer = asyncio.get_running_loop().create_future()
        self._method, self._head, self._length, self._chunks, self._to_end, self._at = method, None, -1, None, False, 0
        self.transport.write(data)
        return answer

    def _read(self, *, end: bool = False, lost: Exception | None = None) -> None:
        """Parse what has arrived; settle the answer once it is whole (or cannot be any more)."""
        try:
            done = self._parse(end)
        except Exception as err:  # a malformed answer
            self._fail(err)
            return
        if done is not None:
            answer, self._answer = self._answer, None
            if answer is not None and not answer.done():
                answer.set_result(done)
        elif end:
            self._fail(lost or ConnectionError("the connection ended before the whole answer"))

    def _fail(self, err: BaseException) -> None:
        answer, self._answer = self._answer, None
        self.ended = True
        if answer is not None and not answer.done():
            answer.set_exception(err)

    def _parse(self, end: bool) -> tuple[Answer, bool] | None:
        buffer = self._buffer
        while self._head is None:
            at = buffer.find(b"\r\n\r\n")
            if at < 0:
                if len(buffer) > MAX_HEAD:
                    raise ValueError(f"an answer's head longer than {MAX_HEAD} bytes")
                return None
            lines = buffer[:at].decode("latin-1").split("\r\n")
            del buffer[:at + 4]
            version, _, rest = lines[0].partition(" ")
            status = int(rest[:3])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    name, value = name.strip().lower(), value.strip()
                    headers[name] = f"{headers[name]},{value}" if name in headers else value
            if 100 <= status < 200:  # an interim answer (100 Continue, 102 Processing) is followed by the real one
                continue
            keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
            self._head = (status, headers, keep)
            if self._method == "HEAD" or status in (204, 304):
                self._length = 0
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                self._chunks = []
            elif (length := headers.get("content-length")) is not None:
                self._length = int(length)
            else:
                self._to_end = True
        status, headers, keep = self._head
        if self._to_end:
            if not end:
                return None
            body = bytes(buffer)
            buffer.clear()
            return Answer(status, headers, body), False
        if self._chunks is not None:
            body_or_none = self._chunked()
            if body_or_none is None:
                return None
            body = body_or_none
        else:
            if len(buffer) < self._length:
                return None
            body = bytes(buffer[:self._length])
            del buffer[:self._length]
        if buffer:  # more than the answer: a connection in a state nothing of ours expects
            buffer.clear()
            keep = False
        return Answer(status, headers, body), keep

    def _chunked(self) -> bytes | None:
        """The chunked body, once whole (its trailers read past), else None; ``_at`` keeps where it got to."""
        buffer, chunks = self._buffer, self._chunks
        assert chunks is not None
        while True:
            line_end = buffer.find(b"\r\n", self._at)
            if line_end < 0:
                return None
            size = int(bytes(buffer[self._at:line_end]).split(b";", 1)[0].strip(), 16)
            if size == 0:
                trailers_end = buffer.find(b"\r\n\r\n", line_end)  # trailers, then the blank line
                if trailers_end < 0:
                    return None
                del buffer[:trailers_end + 4]
                self._at = 0
                return b"".join(chunks)
            start = line_end + 2
            if len(buffer) < start + size + 2:
                return None
            chunks.append(bytes(buffer[start:start + size]))
            self._at = start + size + 2

    def close(self) -> None:
        self.ended = True
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.close()


class Connections:
    """Keep-alive connections per :class:`Origin`, used from one event loop (the one its coroutines run on)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._idle: dict[Origin, list[_Connection]] = {}
        self._alive: dict[Origin, int] = {}  # open, in use or idle, or being opened
        self._warming: set[asyncio.Task[None]] = set()
        self._opening: dict[Origin, int] = {}  # opened ahead (warm), not yet open
        # Requests that found no idle connection while some were being opened ahead: each is handed the next one
        # opened (None: that one failed, the request opens its own).
        self._waiting: dict[Origin, deque[asyncio.Future[_Connection | None]]] = {}
        self._ssl: ssl.SSLContext | None = None
        #: Connections opened (a reused one is not counted again).
        self.opened = 0

    def alive(self, origin: Origin) -> int:
        """The connections to ``origin`` open (idle or in use) or being opened."""
        return self._alive.get(origin, 0)

    def warm(self, origin: Origin, total: int) -> None:
        """Open connections to ``origin`` (kept idle) until ``total`` are open or being opened: the requests
        that follow find them ready (or, sent before they are, wait for them: :meth:`_connection`) instead of each
        opening its own (a TCP, and with TLS a handshake's, round trip and CPU, at once for the first wave of a job's
        Completes). A connection that cannot be opened is left to
        the request that needs it (which says why). Call on the loop's thread."""
        for _ in range(total - self.alive(origin)):
            self._alive[origin] = self.alive(origin) + 1  # (counted now: the next call sees it)
            self._opening[origin] = self._opening.get(origin, 0) + 1
            task = asyncio.ensure_future(self._open_idle(origin))
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    async def _open_idle(self, origin: Origin) -> None:
        connection: _Connection | None = None
        try:
            connection = await self._connect(origin)
        except Unanswered as err:
            log.debug("a connection opened ahead of its requests failed: %s", err)
        finally:  # (cancelled too: a request waiting for it then opens its own)
            self._opening[origin] -= 1
            self._hand_over(origin, connection)

    def _hand_over(self, origin: Origin, connection: _Connection | None) -> None:
        """A connection opened ahead (None: it could not be) to the first request waiting for one, else idle."""
        waiting = self._waiting.get(origin)
        while waiting:
            request = waiting.popleft()
            if not request.done():  # (a request cancelled meanwhile is passed over)
                request.set_result(connection)
                return
        if connection is not None:
            self._idle.setdefault(origin, []).append(connection)

    async def _connection(self, origin: Origin) -> _Connection:
        """An idle connection to ``origin``; else, while more are being opened ahead than requests wait for, the next
        of them (a request of the first wave that ran before they were open waits for one rather than opening one
        more: a loaded machine's commit opened 2 x 256); else a new one."""
        connection = self._reusable(origin)
        if connection is not None:
            return connection
        waiting = self._waiting.setdefault(origin, deque())
        if self._opening.get(origin, 0) > len(waiting):
            handed: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
            waiting.append(handed)
            try:
                connection = await handed
            except asyncio.CancelledError:
                late = handed.result() if handed.done() and not handed.cancelled() else None
                if late is not None:  # (handed over as this request was cancelled)
                    self._idle.setdefault(origin, []).append(late)
                raise
            if connection is not None:
                return connection
        return await self._open(origin)

    def _reusable(self, origin: Origin) -> _Connection | None:
        """An idle connection to ``origin`` that its server has not closed meanwhile, or None."""
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            transport = connection.transport
            if not connection.ended and transport is not None and not transport.is_closing():
                return connection
            self._discard(origin, connection)
        return None

    def _discard(self, origin: Origin, connection: _Connection) -> None:
        connection.close()
        self._alive[origin] -= 1

    async def send(self, origin: Origin, host: str, method: str, path_query: str, headers: list[tuple[str, str]],
                   body: bytes) -> Answer:
        """Send one request on an idle connection to ``origin`` (or a new one) and read its answer. ``host``: the
        ``Host`` header (as signed). Raises :class:`Unanswered`."""
        head = "".join((f"{method} {path_query} HTTP/1.1\r\nHost: {host}\r\n",
                        "".join(f"{name}: {value}\r\n" for name, value in headers), "\r\n")).encode("latin-1")
        connection = await self._connection(origin)
        try:
            answering = connection.request(method, head + body if body else head)
        except Exception as err:
            self._discard(origin, connection)
            raise Unanswered(f"{origin.host}:{origin.port}: the request could not be written: {err!r}",
                             sent=False) from err
        try:
            timeout = self.settings.read_timeout
            if timeout is None:
                answer, keep = await answering
            elif _timeout is not None:  # (a timer, where wait_for makes a task and a timer of each answer)
                async with _timeout(timeout):
                    answer, keep = await answering
            else:
                answer, keep = await asyncio.wait_for(answering, timeout)
        except BaseException as err:
            self._discard(origin, connection)
            if isinstance(err, (asyncio.CancelledError, KeyboardInterrupt, SystemExit)):
                raise
            raise Unanswered(f"{origin.host}:{origin.port}: no whole answer: {err!r}", sent=True) from err
        if keep and not connection.ended:
            self._idle.setdefault(origin, []).append(connection)
        else:
            self._discard(origin, connection)
        return answer

    async def _open(self, origin: Origin) -> _Connection:
        self._alive[origin] = self.alive(origin) + 1
        return await self._connect(origin)

    async def _connect(self, origin: Origin) -> _Connection:
        """A new connection to ``origin``, counted in :meth:`alive` already (no longer if it fails)."""
        context = None
        if origin.scheme == "https":
            context = self._ssl = self._ssl or self.settings.ssl_context()
        try:
            _, connection = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(_Connection, origin.host, origin.port, ssl=context),
                self.settings.connect_timeout)
        except BaseException as err:
            self._alive[origin] -= 1
            if not isinstance(err, Exception):
                raise
            raise Unanswered(f"could not connect to {origin.host}:{origin.port}: {err!r}", sent=False) from err
        self.opened += 1
        return connection

    def close(self) -> None:
        """Close every idle connection (and stop opening more)."""
        for task in list(self._warming):
            task.cancel()
        for origin, idle in self._idle.items():
            for connection in idle:
                self._discard(origin, connection)
        self._idle.clear()


class Feed(Generic[Fed]):
    """Items a thread hands to a coroutine on an event loop, in order. The loop is woken (``call_soon_threadsafe``:
    a write to its self-pipe, a wake-up of its thread) only when it waits for an item, not for each one: a reader
    that runs ahead hands over thousands without one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[Fed] = deque()
        self._waiting = False
        self._arrived = asyncio.Event()

    def put(self, item: Fed) -> None:
        """From any thread."""
        self._items.append(item)
        if self._waiting:  # (set before the loop looks at the items one last time: an item is never missed)
            self._waiting = False
            self._loop.call_soon_threadsafe(self._arrived.set)

    async def get(self) -> Fed:
        """On the loop: the next item, once there is one."""
        while not self._items:
            self._arrived.clear()
            self._waiting = True
            if self._items:
                self._waiting = False
                break
            await self._arrived.wait()
        return self._items.popleft()


class LeanLoop:
    """An event loop on a thread of its own and the keep-alive connections it keeps: where a run of requests on
    connections of s3commit's own is sent from, one after another (a job commit's pendingset GETs, then its Completes)
    on the same connections, and where they are opened ahead of the requests that will need them (:meth:`warm`).
    ``settings``: how its connections are made (None: by the first caller of :meth:`connections_for`); ``origin``:
    where :meth:`warm` opens them. Close it (or use it as a context manager): its thread and connections end then."""

    def __init__(self, settings: Settings | None = None, *, origin: Origin | None = None,
                 name: str = "s3commit-lean") -> None:
        self.connections = Connections(settings) if settings is not None else None
        self.origin = origin
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed = False
        self._warmed = 0

    def connections_for(self, settings: Settings) -> Connections:
        """The loop's connections (made with ``settings`` if it has none yet). Call on the loop's thread."""
        if self.connections is None:
            self.connections = Connections(settings)
        return self.connections

    def submit(self, coroutine: Coroutine[Any, Any, Ran]) -> Future[Ran]:
        """Run ``coroutine`` on the loop; cancelling the future cancels it."""
        if self._closed:
            coroutine.close()
            raise RuntimeError("this LeanLoop is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, Ran]) -> Ran:
        """Run ``coroutine`` on the loop and wait for its outcome (from any thread but the loop's)."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("LeanLoop.run was called from its own loop's thread")
        return self.submit(coroutine).result()

    def warm(self, total: int) -> None:
        """Have ``total`` connections to :attr:`origin` open, or being opened, ahead of the requests that will use
        them (:meth:`Connections.warm`); asks only when ``total`` is more than asked before. From any thread."""
        if self._closed or self.origin is None or self.connections is None or total <= self._warmed:
            return
        self._warmed = total
        self.loop.call_soon_threadsafe(self.connections.warm, self.origin, total)

    def close(self) -> None:
        """Cancel what still runs on the loop, close its connections, end its thread (idempotent)."""
        if self._closed:
            return
        self._closed = True

        async def end() -> None:
            mine = asyncio.current_task()
            tasks = [task for task in asyncio.all_tasks() if task is not mine]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.connections is not None:
                self.connections.close()

        try:
            asyncio.run_coroutine_threadsafe(end(), self.loop).result(CLOSE_SECONDS)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CLOSE_SECONDS)
            if not self._thread.is_alive():
                self.loop.close()

    def __enter__(self) -> LeanLoop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
