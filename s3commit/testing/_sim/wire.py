"""HTTP and S3 wire details the simulator needs: bodies, hop-by-hop headers, error documents, resets.

Small, stateless helpers so that :mod:`s3commit.testing._sim.simulator` reads as the request pipeline it is:
reading a request body whatever its framing, choosing which headers cross a proxy, writing the S3
``<Error>`` XML document AWS answers with, and dropping a connection the way a crashed server does.
"""

from __future__ import annotations

import contextlib
import email.utils
import html
import io
import json
import re
import secrets
import socket
import struct
import urllib.parse
from collections.abc import Callable, Iterable
from xml.sax.saxutils import escape

# Headers that describe one hop of an HTTP connection, never the message (RFC 9110 §7.6.1), plus the
# framing headers we recompute. ``Expect`` is answered by our own server (100 Continue) and must not be
# repeated upstream, where http.client would not wait for the interim response anyway.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",
    }
)

_MAX_LINE = 65536

#: What S3 says for each error we synthesize: (HTTP status, message).
S3_ERRORS: dict[str, tuple[int, str]] = {
    "SlowDown": (503, "Please reduce your request rate."),
    "InternalError": (500, "We encountered an internal error. Please try again."),
    "NoSuchUpload": (
        404,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been "
        "aborted or completed.",
    ),
    "BadGateway": (502, "The simulator could not reach the upstream S3 server."),
    "BadDigest": (400, "The checksum you specified did not match the calculated checksum."),
}

CHECKSUM_HEADERS = {"x-amz-checksum-crc32": "CRC32", "x-amz-checksum-crc32c": "CRC32C",
                    "x-amz-checksum-crc64nvme": "CRC64NVME", "x-amz-checksum-sha256": "SHA256"}
"""The checksum headers S3 validates against the bytes it received, and their algorithms."""


def checksum_mismatch(headers: Iterable[tuple[str, str]], body: bytes) -> str | None:
    """The algorithm whose ``x-amz-checksum-*`` header does not match ``body``, as S3 finds at PutObject and
    UploadPart (BadDigest), else None. A body sent ``aws-chunked`` carries its checksum in a trailer, which the
    upstream reads: left to it."""
    import base64

    from s3commit.model.checksums import digest

    lowered = {name.lower(): value for name, value in headers}
    if "aws-chunked" in lowered.get("content-encoding", "").lower():
        return None
    for header, algorithm in CHECKSUM_HEADERS.items():
        value = lowered.get(header)
        if value is not None and base64.b64encode(digest(algorithm, body)).decode("ascii") != value.strip():
            return algorithm
    return None


class BadRequestBody(ValueError):
    """The client's request body framing is malformed (bad chunk size, truncated body)."""


def read_body(rfile: io.BufferedIOBase, headers: Iterable[tuple[str, str]]) -> bytes:
    """Read a whole request body from ``rfile``.

    Handles ``Content-Length`` bodies and ``Transfer-Encoding: chunked`` bodies (de-chunked here; HTTP
    trailers are dropped). A ``Content-Encoding: aws-chunked`` body is *not* decoded: its bytes pass through
    to the upstream, which decodes it (moto does) together with ``x-amz-decoded-content-length``.

    Raises:
        BadRequestBody: the framing is malformed or the body is shorter than announced.
    """
    lowered = {name.lower(): value for name, value in headers}
    if "chunked" in lowered.get("transfer-encoding", "").lower():
        return _read_chunked(rfile)
    length_text = lowered.get("content-length", "0").strip() or "0"
    if not length_text.isdigit():
        raise BadRequestBody(f"bad Content-Length {length_text!r}")
    body = _read_exact(rfile, int(length_text))
    return body


def _read_exact(rfile: io.BufferedIOBase, length: int) -> bytes:
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = rfile.read(min(remaining, 1 << 20))
        if not chunk:
            raise BadRequestBody(f"request body ended {remaining} bytes short of {length}")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_chunked(rfile: io.BufferedIOBase) -> bytes:
    chunks: list[bytes] = []
    while True:
        line = rfile.readline(_MAX_LINE)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadRequestBody(f"bad chunk size line {line[:40]!r}") from None
        if size == 0:
            while rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass  # skip HTTP trailers
            return b"".join(chunks)
        chunks.append(_read_exact(rfile, size))
        rfile.readline(_MAX_LINE)  # the CRLF that ends the chunk


def flip_one_bit(body: bytes) -> bytes:
    """``body`` with the lowest bit of its middle byte flipped (same length: only a checksum can tell)."""
    if not body:
        return body
    damaged = bytearray(body)
    damaged[len(damaged) // 2] ^= 1
    return bytes(damaged)


def forwardable(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers that cross the proxy: all but hop-by-hop and framing headers."""
    return [(name, value) for name, value in headers if name.lower() not in HOP_BY_HOP]


def request_id() -> str:
    """A fresh request id in the shape S3 uses (16 upper-case hex characters)."""
    return secrets.token_hex(8).upper()


def error_document(code: str, *, resource: str = "", upload_id: str | None = None) -> tuple[int, bytes]:
    """Return ``(status, body)`` of the S3 ``<Error>`` document for ``code`` (a key of :data:`S3_ERRORS`)."""
    status, message = S3_ERRORS[code]
    return status, error_xml(code, message, resource=resource, upload_id=upload_id)


def error_xml(code: str, message: str, *, resource: str = "", upload_id: str | None = None) -> bytes:
    """The S3 ``<Error>`` document of any error ``code`` with its ``message``."""
    extra = f"<UploadId>{escape(upload_id)}</UploadId>" if upload_id else ""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource>{extra}"
        f"<RequestId>{request_id()}</RequestId><HostId>s3commit-simulator</HostId></Error>"
    )
    return body.encode()


_RANGE = re.compile(r"^\s*bytes=(\d+)-(\d+)\s*$")


def copy_range_length(value: str | None) -> int | None:
    """Length of an ``x-amz-copy-source-range`` (``bytes=first-last``), or ``None`` if absent/invalid."""
    match = _RANGE.match(value or "")
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2))
    return last - first + 1 if last >= first else None


def reset_connection(sock: socket.socket) -> None:
    """Drop ``sock`` with a TCP RST, as a crashed server does, instead of an orderly FIN.

    ``SO_LINGER`` with a zero timeout turns close() into an abortive close. The descriptor really closes
    once the handler's buffered reader and writer on it are closed too (socketserver does that right
    after the handler returns); the caller must not write to it any more.
    """
    with contextlib.suppress(OSError):  # already gone: the client sees the connection drop either way
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


_LISTED_DATE = re.compile(rb"<(LastModified|Initiated)>([^<]+)</(?:LastModified|Initiated)>")


def shifted_http_date(value: str, offset: float) -> str:
    """An HTTP date (``Last-Modified``) moved by ``offset`` seconds (a store whose clock is off)."""
    when = email.utils.parsedate_to_datetime(value)
    return email.utils.format_datetime(when.fromtimestamp(when.timestamp() + offset, when.tzinfo), usegmt=True)


def shifted_listing(body: bytes, offset: float) -> bytes:
    """A listing's ``LastModified``/``Initiated`` dates (ISO 8601) moved by ``offset`` seconds."""
    from datetime import datetime, timedelta

    def shift(match: re.Match[bytes]) -> bytes:
        when = datetime.fromisoformat(match.group(2).decode().replace("Z", "+00:00")) + timedelta(seconds=offset)
        text = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
        return b"<%s>%s</%s>" % (match.group(1), text.encode(), match.group(1))

    return _LISTED_DATE.sub(shift, body)


_LISTED_OBJECT = re.compile(rb"<(Contents|Version)>.*?</\1>", re.DOTALL)
_LISTED_KEY = re.compile(rb"<Key>([^<]*)</Key>")


def listed_keys(body: bytes) -> list[str]:
    """The keys an XML document names (a DeleteObjects request's)."""
    return [html.unescape(match.group(1).decode()) for match in _LISTED_KEY.finditer(body)]


def shifted_entries(body: bytes, shift_of: Callable[[str], float], *, url_encoded: bool) -> bytes:
    """A listing's objects each dated ``shift_of(key)`` seconds later (objects dated on a moved clock:
    :mod:`s3commit.testing._sim.store_clock`). ``url_encoded``: the listing's keys are (``encoding-type=url``)."""

    def shift(entry: re.Match[bytes]) -> bytes:
        block = entry.group(0)
        found = _LISTED_KEY.search(block)
        if found is None:
            return block
        key = html.unescape(found.group(1).decode())
        seconds = shift_of(urllib.parse.unquote(key) if url_encoded else key)
        return shifted_listing(block, seconds) if seconds else block

    return _LISTED_OBJECT.sub(shift, body)


def json_body(value: object) -> bytes:
    """The control endpoint's answers."""
    return json.dumps(value, sort_keys=True).encode()
