"""The sidecar's wire format: length-prefixed JSON headers with an optional binary payload.

Every message, either way, is::

    4 bytes   big-endian length N of the header
    N bytes   UTF-8 JSON object; "payload": M (optional) says M raw bytes follow
    M bytes   payload (part data, file ranges)

Requests carry ``"op"`` and their arguments; responses carry ``"ok": true`` and results, or ``"ok": false``
and ``"error": {"type": ..., "message": ...}``. Pure framing: no S3 and no committer logic.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAX_HEADER = 16 * 1024 * 1024
"""Largest header accepted: commit messages of very large jobs are the biggest headers."""
MAX_PAYLOAD = 1024 * 1024 * 1024
"""Largest payload accepted (a part is at most ``fs.s3a.multipart.size``)."""


class ProtocolError(Exception):
    """The peer sent something that is not a valid message (or went away mid-message)."""


def _read_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 4 * 1024 * 1024))
        if not chunk:
            raise EOFError("connection closed")
        chunks += chunk
    return bytes(chunks)


def read_message(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    """One message: (header, payload). Raises EOFError at a clean end of stream."""
    (length,) = struct.unpack(">I", _read_exact(sock, 4))
    if length > MAX_HEADER:
        raise ProtocolError(f"header of {length} bytes exceeds {MAX_HEADER}")
    try:
        header = json.loads(_read_exact(sock, length))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProtocolError(f"header is not JSON: {err}") from err
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    size = int(header.get("payload", 0) or 0)
    if not 0 <= size <= MAX_PAYLOAD:
        raise ProtocolError(f"payload of {size} bytes is out of range")
    return header, _read_exact(sock, size) if size else b""


def write_message(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> None:
    if payload:
        header = {**header, "payload": len(payload)}
    body = json.dumps(header, separators=(",", ":")).encode("utf-8")
    sock.sendall(struct.pack(">I", len(body)) + body + payload)
