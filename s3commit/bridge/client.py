"""A Python client of the sidecar, speaking the protocol exactly as the JVM's ``Sidecar`` class does.

For tests and tools that drive a sidecar without a JVM: :func:`start_sidecar` starts ``python -m
s3commit.bridge`` the way the jar does (token in the environment, the ready line on stdout, stdin held open)
and :class:`BridgeClient` sends requests on one connection. Responses come back as they are (``ok`` false
included), so callers can check errors as well as results.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from s3commit._version import __version__
from s3commit.bridge.protocol import Body, BodyError, Channel


@dataclass
class SidecarProcess:
    """A sidecar started by :func:`start_sidecar`: its process, socket, token and block directory."""

    process: subprocess.Popen[bytes]
    socket_path: str
    token: str
    blocks_dir: str
    pid: int

    def connect(self) -> BridgeClient:
        return BridgeClient(self.socket_path, self.token)

    def stop(self) -> None:
        """Close its stdin (as a JVM's exit does) and wait for it; kill it if it lingers."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(10)


def start_sidecar(*, env: dict[str, str] | None = None, python: str | None = None) -> SidecarProcess:
    """Start a sidecar as the JVM does and wait until it is ready."""
    token = secrets.token_hex(32)
    environment = {**os.environ, **(env or {}), "S3COMMIT_BRIDGE_TOKEN": token}
    process = subprocess.Popen([python or sys.executable, "-m", "s3commit.bridge"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=environment)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(10)
        raise RuntimeError(f"the sidecar exited with code {process.returncode} before it was ready")
    ready = json.loads(line)
    return SidecarProcess(process, ready["socket"], token, ready["blocks_dir"], int(ready["pid"]))


class BridgeClient:
    """One connection to a sidecar (the hello is done on connect)."""

    def __init__(self, socket_path: str, token: str, *, version: str = __version__) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
        self.channel = Channel(sock)
        self.channel.write_header({"op": "hello", "token": token, "version": version})
        self.hello = self.channel.read_header()

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> BridgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reply(self) -> tuple[dict[str, Any], bytes]:
        header, body = self.channel.read_message()
        if body is None:
            return header, b""
        try:
            return header, b"".join(body.chunks())
        except BodyError as err:  # cut short: report the error header, with what arrived before it
            return err.header, b""

    def call(self, op: str, body: bytes | bytearray | None = None, **args: Any) -> tuple[dict[str, Any], bytes]:
        """One request (with an optional body); returns the response header and body bytes."""
        self.channel.write_message({"op": op, **args}, body)
        return self._reply()

    def call_stream(self, op: str, chunks: Iterable[bytes], **args: Any) -> tuple[dict[str, Any], bytes]:
        """One request whose body is sent chunk by chunk (e.g. NDJSON records)."""
        self.channel.write_stream({"op": op, **args}, chunks)
        return self._reply()

    def read_body(self) -> Body | None:
        """For callers that read a streamed response themselves (after ``channel.write_message``)."""
        return self.channel.read_message()[1]
