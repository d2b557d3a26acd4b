"""Where the simulator sends the requests it lets through: the store behind it.

Two kinds, one interface (:meth:`HttpUpstream.send`, :meth:`WsgiUpstream.send`):

- :class:`HttpUpstream`: a server at ``http://host:port``, one connection per request (werkzeug, which serves moto,
  closes after every response). Any S3 server can stand behind the simulator this way.
- :class:`WsgiUpstream`: moto's WSGI application called in the simulator's own process, with the environment
  moto's server would have built for the same request (its request handler's ``make_environ``), and an exception
  answered as werkzeug's server answers it (500, ``InternalServerError``, logged on the ``werkzeug`` logger). The
  test server uses it: the second HTTP hop (a TCP connection, a thread, request and response parsed twice) cost
  the embedded store about a third of its CPU a request, which a wave of Completes waits on.
"""

from __future__ import annotations

import http.client
import io
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

_TIMEOUT = 300.0

_log = logging.getLogger("werkzeug")  # where werkzeug's server logs a failed request; quiet unless --verbose


class UpstreamAnswer(NamedTuple):
    """An answer of the store behind the simulator."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or ``None``."""
        lowered = name.lower()
        return next((value for key, value in self.headers if key.lower() == lowered), None)


class Upstream(Protocol):
    """The store behind the simulator."""

    def send(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> UpstreamAnswer:
        """Send one request (``path`` as it came on the wire, query included) and return the whole answer.
        Raises ``OSError`` or ``http.client.HTTPException`` when the store cannot be reached."""
        ...


class HttpUpstream:
    """A store at ``http://host:port``."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be an http://host:port URL, got {url!r}")
        self.host, self.port = parts.hostname, parts.port

    def send(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> UpstreamAnswer:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=_TIMEOUT)
        try:
            connection.request(method, path, body=body or None, headers=dict(headers))
            response = connection.getresponse()
            return UpstreamAnswer(response.status, response.getheaders(), response.read())
        finally:
            connection.close()


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WsgiUpstream:
    """The WSGI application of werkzeug's ``server`` (moto's), called in this process: each request's environment
    is the one the server's own request handler class builds (``make_environ``; moto's keeps the underscores of
    ``x-amz-meta-`` names), for the request as http.client would have sent it."""

    def __init__(self, server: Any) -> None:
        self.app: WsgiApp = server.app
        self._server = server
        self._handler_class = server.RequestHandlerClass

    @classmethod
    def of_moto(cls, moto: Any) -> WsgiUpstream:
        """The application of a started ``moto.server.ThreadedMotoServer``."""
        return cls(moto._server)

    def send(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> UpstreamAnswer:
        environ = self.environ(method, path, headers, body)
        try:
            return self._call(self.app, environ)
        except Exception:
            _log.error("Error on request %s %s", method, path, exc_info=True)
            from werkzeug.exceptions import InternalServerError

            return self._call(InternalServerError(), environ)

    def environ(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        """The WSGI environment the server's request handler would build for this request, as http.client sends
        it (``Host`` and ``Accept-Encoding: identity`` unless the request has them)."""
        handler = self._handler_class.__new__(self._handler_class)  # no socket: only make_environ is used
        handler.server, handler.client_address, handler.connection = self._server, ("127.0.0.1", 0), None
        handler.command, handler.path, handler.request_version = method, path, "HTTP/1.1"
        message = http.client.HTTPMessage()
        for name, value in headers.items():
            message[name] = value
        if "Host" not in message:  # http.client's own (the simulator's side requests name no host)
            host, port = self._server.server_address[:2]
            message["Host"] = f"{host}:{port}"
        if "Accept-Encoding" not in message:
            message["Accept-Encoding"] = "identity"
        handler.headers, handler.rfile = message, io.BytesIO(body)
        environ: dict[str, Any] = handler.make_environ()
        return environ

    @staticmethod
    def _call(app: WsgiApp, environ: dict[str, Any]) -> UpstreamAnswer:
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            started[:] = [status, headers]
            return written.append  # WSGI's legacy write callable

        chunks = app(environ, start_response)
        try:
            written.extend(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        status, headers = started
        body = b"".join(written) if environ["REQUEST_METHOD"] != "HEAD" else b""
        return UpstreamAnswer(int(status.split(" ", 1)[0]), list(headers), body)
