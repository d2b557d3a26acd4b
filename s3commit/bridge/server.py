"""The sidecar process: one per JVM, serving the JVM's S3 and committer requests over a Unix socket.

The JVM (``s3commit.bridge.Sidecar`` in the jar) starts ``python -m s3commit.bridge`` with a random token in
the environment (``S3COMMIT_BRIDGE_TOKEN``, never on the command line). The sidecar makes a private (0700)
directory (``s3commit-sidecar-<pid>-*``), listens on a socket inside it (or, when that path is too long for a
Unix socket, in a private directory of its own under the temp directory), prints one JSON line (socket path,
block directory, version, pid) and serves until its stdin closes, which happens when the JVM exits for any
reason. Block files the JVM hands over live in that directory too; a starting sidecar deletes the
directories of sidecars that are gone (:mod:`s3commit.bridge.blocks`). Every connection must open with a
``hello`` carrying the token and the jar's version; a mismatch is refused with a message naming both
versions. Each connection is served by its own thread, so many task threads can call at once.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

from s3commit._version import __version__
from s3commit.bridge.blocks import PREFIX, BlockDirectories, BlockDirectory, claim_directory
from s3commit.bridge.failpoints import Failpoints
from s3commit.bridge.handlers import BridgeHandlers, Reply, error_header
from s3commit.bridge.operations import OPERATIONS, DeclaredFields, hello_table, strict
from s3commit.bridge.protocol import Body, BodyError, Channel, FrameTooLarge, ProtocolError
from s3commit.errors import S3CommitError
from s3commit.model import manifests

log = logging.getLogger("s3commit.bridge")

TOKEN_ENV = "S3COMMIT_BRIDGE_TOKEN"
MAX_SOCKET_PATH = 100
"""The longest socket path used as is: a Unix socket's address holds 108 bytes on Linux (104 on macOS), its
terminating NUL included. A longer one (a deep ``fs.s3a.buffer.dir``, a container's work directory) moves the
socket into a private directory of its own under the system's temp directory (or ``/tmp``)."""


class SidecarServer:
    """Accepts connections on ``socket_path`` and serves each on a thread."""

    def __init__(self, socket_path: str, token: str, handlers: BridgeHandlers | None = None, *,
                 own_directory: str | None = None) -> None:
        self.socket_path = socket_path
        self._own_directory = own_directory
        self.token = token
        self.handlers = handlers or BridgeHandlers()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(socket_path)
        os.chmod(socket_path, 0o600)
        self._sock.listen(128)
        self._stopped = threading.Event()
        self.failpoints = Failpoints()
        self.strict = strict()
        self.operations = hello_table()

    @classmethod
    def listen_in(cls, directory: str, token: str, handlers: BridgeHandlers | None = None) -> SidecarServer:
        """A server on ``<directory>/sock``, or, if that path is too long for a Unix socket, on a socket in a
        private (0700) directory of its own (named like a block directory, so it is swept the same way if the
        sidecar dies), removed when the server stops."""
        path = os.path.join(directory, "sock")
        if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
            return cls(path, token, handlers)
        base = tempfile.gettempdir()
        if len(os.fsencode(base)) > MAX_SOCKET_PATH // 2:
            base = "/tmp"
        own = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base)
        try:
            claim_directory(own)  # held for the sidecar's life: a sweep never takes a live sidecar's socket
            return cls(os.path.join(own, "sock"), token, handlers, own_directory=own)
        except BaseException:
            shutil.rmtree(own, ignore_errors=True)
            raise

    def serve_forever(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                break
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="s3commit-sidecar-conn").start()

    def stop(self) -> None:
        self._stopped.set()
        try:
            self._sock.close()
        finally:
            if os.path.exists(self.socket_path):
                os.unlink(self.socket_path)
            if self._own_directory is not None:
                shutil.rmtree(self._own_directory, ignore_errors=True)
        self.handlers.close()

    def _hello(self, channel: Channel) -> bool:
        header = channel.read_header()
        if header.get("op") != "hello" or not hmac.compare_digest(str(header.get("token", "")), self.token):
            channel.write_header({"ok": False, "error": {"type": "Security", "message": "bad token"}})
            return False
        jar_version = header.get("version")
        if jar_version != __version__:
            message = (f"s3commit version mismatch: the bridge jar is {jar_version} but the sidecar's Python "
                       f"package is {__version__} ({sys.executable}); install matching versions")
            channel.write_header({"ok": False, "error": {"type": "IllegalState", "message": message}})
            return False
        channel.write_header({"ok": True, "version": __version__, "pid": os.getpid(),
                              "blocks_dir": self.handlers.blocks.path, "operations": self.operations})
        return True

    def _serve(self, conn: socket.socket) -> None:
        channel = Channel(conn)
        try:
            if not self._hello(channel):
                return
            while True:
                header, body = channel.read_message()
                self._answer(channel, header, body)
        except (EOFError, ConnectionError):
            return
        except FrameTooLarge as err:
            # The stream cannot be trusted past an oversized frame: say why, then hang up.
            log.warning("refusing a request: %s", err)
            with contextlib.suppress(OSError, ProtocolError):
                channel.write_header(error_header(err))
        except ProtocolError as err:
            log.warning("dropping a connection: %s", err)
        finally:
            channel.close()

    def _answer(self, channel: Channel, header: dict[str, Any], body: Body | None) -> None:
        op = str(header.get("op"))
        handler, operation = self.handlers.ops.get(op), OPERATIONS.get(op)
        self.failpoints.reach("before", op)
        try:
            if handler is None or operation is None:
                raise _UnknownOperation(f"unknown operation {op!r}")
            operation.check_request(header)
            reply = handler(DeclaredFields(operation, header) if self.strict else header, body)
            if self.strict:
                operation.check_reply(reply.header)
        except S3CommitError as err:  # S3 or committer trouble (an unreachable endpoint included): an answer
            self._refuse(channel, op, body, err)
            return
        except (EOFError, ConnectionError, FrameTooLarge):
            raise  # the connection itself broke while the request's body was read
        except BodyError as err:  # the JVM cut its own request short: it knows why
            log.debug("%s: the request body was cut short: %s", op, err)
            channel.write_header(error_header(err))
            return
        except Exception as err:  # every other failure goes back to the JVM as an exception
            self._refuse(channel, op, body, err)
            return
        if body is not None and not body.done:
            body.drain()
        self.failpoints.reach("after", op)
        self._send(channel, op, reply)

    @staticmethod
    def _refuse(channel: Channel, op: str, body: Body | None, err: BaseException) -> None:
        log.debug("%s failed", op, exc_info=True)
        if body is not None and not body.done:
            body.drain()
        channel.write_header(error_header(err))

    @staticmethod
    def _send(channel: Channel, op: str, reply: Reply) -> None:
        header = {"ok": True, **reply.header}
        try:
            if reply.stream is not None:
                channel.write_stream(header, reply.stream, error_header=error_header)
            else:
                channel.write_message(header, reply.body)
        except FrameTooLarge as err:  # nothing was sent yet: answer with the reason instead
            log.warning("%s: %s", op, err)
            channel.write_header(error_header(err))


class _UnknownOperation(ValueError):
    pass


def _watch_stdin(server: SidecarServer, blocks: BlockDirectories) -> None:
    """The JVM holds our stdin: end of file means it is gone, so we go too (and our block files with us)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        server.stop()
        blocks.remove()
        os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m s3commit.bridge", description="s3commit sidecar for the JVM")
    parser.add_argument("--no-stdin-watch", action="store_true", help="keep serving when stdin closes (tests)")
    args = parser.parse_args(argv)
    token = os.environ.pop(TOKEN_ENV, "")
    if not token:
        print(json.dumps({"error": f"{TOKEN_ENV} is not set"}), flush=True)
        return 2
    logging.basicConfig(level=os.environ.get("S3COMMIT_BRIDGE_LOG", "WARNING"), stream=sys.stderr,
                        format="s3commit-sidecar %(levelname)s %(name)s: %(message)s")
    etag_form = manifests.EtagForm.of_hadoop(os.environ.get(manifests.HADOOP_VERSION_ENV))  # what the JVM's S3A reads
    blocks = BlockDirectories(BlockDirectory.create())  # 0700; sweeps the directories of sidecars that are gone
    server = SidecarServer.listen_in(blocks.path, token, BridgeHandlers(blocks=blocks, etag_form=etag_form))
    print(json.dumps({"socket": server.socket_path, "blocks_dir": blocks.path, "version": __version__,
                      "pid": os.getpid()}), flush=True)
    if not args.no_stdin_watch:
        threading.Thread(target=_watch_stdin, args=(server, blocks), daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.stop()
        blocks.remove()
    return 0
