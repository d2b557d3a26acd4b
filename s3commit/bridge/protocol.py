"""The sidecar's wire format: bounded frames; a message is a JSON header and, optionally, a streamed body.

Every message, either way, is::

    header frame   u32 length N (1 .. FRAME_LIMIT), then N bytes of UTF-8 JSON (an object)
    body           only if the header says "body": true: data frames, then a terminator
      data frame   u32 length M (1 .. FRAME_LIMIT), then M bytes
      terminator   u32 0            the body is complete
                   u32 0xFFFFFFFF   the body was cut short: an error header frame follows

Requests carry ``"op"`` and their arguments; responses carry ``"ok": true`` and results, or ``"ok": false``
and ``"error": {"type": ..., "message": ...}``. No frame is ever larger than :data:`FRAME_LIMIT`, whatever
the size of the data: part data, object ranges, a listing of a large directory and the commit messages of a
100,000-task job all travel as bodies of many frames. A frame over the limit is refused by the sender
(:class:`FrameTooLarge`) and by the receiver, which answers with an error that names the limit.

Pure framing: no S3 and no committer logic. Reads go straight into caller buffers (``readinto``) and writes
hand the kernel the caller's buffers (``sendmsg``), so a byte is not copied in Python on its way through.
"""

from __future__ import annotations

import json
import mmap
import socket
import struct
from collections.abc import Iterable, Iterator
from typing import Any

FRAME_LIMIT = 16 * 1024 * 1024
"""Largest frame (header or data) either side sends or accepts."""
CHUNK = 4 * 1024 * 1024
"""Data frame size a sender uses for large bodies."""
END = 0
ABORT = 0xFFFFFFFF
_U32 = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer sent something that is not a valid message (or went away mid-message)."""


class FrameTooLarge(ProtocolError):
    """A frame over :data:`FRAME_LIMIT` (sent or received)."""

    def __init__(self, size: int, what: str) -> None:
        super().__init__(f"{what} of {size} bytes exceeds the s3commit bridge's frame limit of "
                         f"{FRAME_LIMIT} bytes")
        self.size = size


class BodyError(Exception):
    """The peer cut a body short and sent this error instead of the rest."""

    def __init__(self, header: dict[str, Any]) -> None:
        error = header.get("error") or {}
        super().__init__(str(error.get("message", "the body was cut short")))
        self.header = header


class Channel:
    """One end of a connection: reads and writes frames on a stream socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._rfile: Any = sock.makefile("rb", buffering=64 * 1024)  # a BufferedReader: readinto()

    # --- reading -----------------------------------------------------------------------------------

    def _read_exact(self, size: int) -> bytes:
        data = self._rfile.read(size)
        if len(data) != size:
            raise EOFError("connection closed")
        return data

    def _read_length(self) -> int:
        return int(_U32.unpack(self._read_exact(4))[0])

    def read_header(self) -> dict[str, Any]:
        """The next header frame. Raises EOFError at a clean end of stream."""
        first = self._rfile.read(4)
        if not first:
            raise EOFError("connection closed")
        if len(first) != 4:
            raise EOFError("connection closed mid-frame")
        (length,) = _U32.unpack(first)
        if length > FRAME_LIMIT:
            raise FrameTooLarge(length, "a header frame")
        if length == 0:
            raise ProtocolError("empty header frame")
        try:
            header = json.loads(self._read_exact(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ProtocolError(f"header is not JSON: {err}") from err
        if not isinstance(header, dict):
            raise ProtocolError("header is not a JSON object")
        return header

    def read_message(self) -> tuple[dict[str, Any], Body | None]:
        """A header and, if it announces one, its body (which must be consumed before the next message)."""
        header = self.read_header()
        return header, (Body(self) if header.get("body") else None)

    # --- writing -----------------------------------------------------------------------------------

    def write_header(self, header: dict[str, Any]) -> None:
        data = json.dumps(header, separators=(",", ":")).encode("utf-8")
        if len(data) > FRAME_LIMIT:
            raise FrameTooLarge(len(data), f"the header of {header.get('op') or 'a response'}")
        self.sock.sendall(_U32.pack(len(data)) + data)

    def write_data(self, data: bytes | bytearray | memoryview) -> None:
        """Send ``data`` as one or more data frames (the kernel copies straight from ``data``)."""
        view = memoryview(data).cast("B")
        for start in range(0, view.nbytes, CHUNK):
            chunk = view[start:start + CHUNK]
            _sendmsg_all(self.sock, [_U32.pack(chunk.nbytes), chunk])

    def end_body(self) -> None:
        self.sock.sendall(_U32.pack(END))

    def abort_body(self, error_header: dict[str, Any]) -> None:
        self.sock.sendall(_U32.pack(ABORT))
        self.write_header(error_header)

    def write_message(self, header: dict[str, Any], body: bytes | bytearray | memoryview | None = None) -> None:
        """A whole message; a body (even empty) is sent as data frames."""
        if body is None:
            self.write_header(header)
            return
        self.write_header({**header, "body": True})
        self.write_data(body)
        self.end_body()

    def write_stream(self, header: dict[str, Any], chunks: Iterable[bytes | bytearray | memoryview],
                     error_header: Any = None) -> None:
        """A header and a body produced chunk by chunk. If producing fails part way, the body is cut short
        with an error header made by ``error_header(exc)``; the exception is not re-raised."""
        self.write_header({**header, "body": True})
        try:
            for chunk in chunks:
                if len(chunk):
                    self.write_data(chunk)
        except Exception as err:
            if error_header is None:
                raise
            self.abort_body(error_header(err))
            return
        self.end_body()

    def close(self) -> None:
        try:
            self._rfile.close()
        finally:
            self.sock.close()


class Body:
    """A body being received: read it into caller buffers, or iterate its frames. Consume it all."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._left = 0  # bytes left in the current data frame
        self.done = False
        self.received = 0

    def _next_frame(self) -> bool:
        """Advance to the next data frame; False at the end of the body."""
        if self.done:
            return False
        length = self._channel._read_length()
        if length == END:
            self.done = True
            return False
        if length == ABORT:
            self.done = True
            raise BodyError(self._channel.read_header())
        if length > FRAME_LIMIT:
            raise FrameTooLarge(length, "a data frame")
        self._left = length
        return True

    def readinto(self, buffer: bytearray | memoryview | mmap.mmap) -> int:
        """Fill as much of ``buffer`` as the body has left; returns the bytes read (0 at the end)."""
        view = memoryview(buffer).cast("B")
        filled = 0
        while filled < view.nbytes:
            if self._left == 0 and not self._next_frame():
                break
            want = min(self._left, view.nbytes - filled)
            got = self._channel._rfile.readinto(view[filled:filled + want])
            if not got:
                raise EOFError("connection closed mid-body")
            filled += got
            self._left -= got
        self.received += filled
        return filled

    def chunks(self) -> Iterator[bytes]:
        """The body frame by frame."""
        while True:
            if self._left == 0 and not self._next_frame():
                return
            data = self._channel._read_exact(self._left)
            self._left = 0
            self.received += len(data)
            yield data

    def lines(self) -> Iterator[bytes]:
        """The body as newline-separated records (NDJSON), each at most one frame long."""
        rest = b""
        for chunk in self.chunks():
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            if len(rest) > FRAME_LIMIT:
                raise FrameTooLarge(len(rest), "a record")
            yield from (p for p in parts if p)
        if rest:
            yield rest

    def drain(self) -> None:
        """Skip whatever is left (so the connection can carry the next message)."""
        for _ in self.chunks():
            pass


def _sendmsg_all(sock: socket.socket, buffers: list[Any]) -> None:
    """``sendmsg`` until every buffer is sent (the kernel may take part of them)."""
    views = [memoryview(b).cast("B") for b in buffers]
    while views:
        sent = sock.sendmsg(views)
        while sent and views:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0
        views = [v for v in views if v.nbytes]


def ndjson(records: Iterable[Any]) -> Iterator[bytes]:
    """Encode records as NDJSON, batched into chunks of about :data:`CHUNK` bytes."""
    batch: list[bytes] = []
    size = 0
    for record in records:
        line = json.dumps(record, separators=(",", ":")).encode("utf-8") + b"\n"
        batch.append(line)
        size += len(line)
        if size >= CHUNK:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)
