"""The sidecar process: one per JVM, serving the JVM's S3 and committer requests over a Unix socket.

The JVM (``s3commit.bridge.Sidecar`` in the jar) starts ``python -m s3commit.bridge`` with a random token in
the environment (``S3COMMIT_BRIDGE_TOKEN``, never on the command line). The sidecar makes a private (0700)
directory, listens on a socket inside it, prints one JSON line (socket path, version) and serves until its
stdin closes, which happens when the JVM exits for any reason. Every connection must open with a
``hello`` carrying the token and the jar's version; a mismatch is refused with a message naming both
versions. Each connection is served by its own thread, so many task threads can call at once.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Sequence

from s3commit import __version__
from s3commit.bridge.handlers import BridgeHandlers, error_type
from s3commit.bridge.protocol import ProtocolError, read_message, write_message

log = logging.getLogger("s3commit.bridge")

TOKEN_ENV = "S3COMMIT_BRIDGE_TOKEN"


class SidecarServer:
    """Accepts connections on ``socket_path`` and serves each on a thread."""

    def __init__(self, socket_path: str, token: str, handlers: BridgeHandlers | None = None) -> None:
        self.socket_path = socket_path
        self.token = token
        self.handlers = handlers or BridgeHandlers()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(socket_path)
        os.chmod(socket_path, 0o600)
        self._sock.listen(128)
        self._stopped = threading.Event()

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

    def _hello(self, conn: socket.socket) -> bool:
        header, _ = read_message(conn)
        if header.get("op") != "hello" or not hmac.compare_digest(str(header.get("token", "")), self.token):
            write_message(conn, {"ok": False, "error": {"type": "Security", "message": "bad token"}})
            return False
        jar_version = header.get("version")
        if jar_version != __version__:
            message = (f"s3commit version mismatch: the bridge jar is {jar_version} but the sidecar's Python "
                       f"package is {__version__} ({sys.executable}); install matching versions")
            write_message(conn, {"ok": False, "error": {"type": "IllegalState", "message": message}})
            return False
        write_message(conn, {"ok": True, "version": __version__, "pid": os.getpid()})
        return True

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                if not self._hello(conn):
                    return
                while True:
                    header, payload = read_message(conn)
                    handler = self.handlers.ops.get(str(header.get("op")))
                    if handler is None:
                        write_message(conn, {"ok": False, "error": {
                            "type": "IllegalArgument", "message": f"unknown operation {header.get('op')!r}"}})
                        continue
                    try:
                        result, data = handler(header, payload)
                    except Exception as err:  # every failure goes back to the JVM as an exception
                        log.debug("%s failed", header.get("op"), exc_info=True)
                        write_message(conn, {"ok": False, "error": {"type": error_type(err), "message": str(err)}})
                        continue
                    write_message(conn, {"ok": True, **result}, data)
            except (EOFError, ConnectionError):
                return
            except ProtocolError as err:
                log.warning("dropping a connection: %s", err)


def _watch_stdin(server: SidecarServer) -> None:
    """The JVM holds our stdin: end of file means it is gone, so we go too."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        server.stop()
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
    directory = tempfile.mkdtemp(prefix="s3commit-sidecar-")  # mkdtemp makes it 0700
    server = SidecarServer(os.path.join(directory, "sock"), token)
    print(json.dumps({"socket": server.socket_path, "version": __version__, "pid": os.getpid()}), flush=True)
    if not args.no_stdin_watch:
        threading.Thread(target=_watch_stdin, args=(server,), daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.stop()
        os.rmdir(directory) if os.path.isdir(directory) and not os.listdir(directory) else None
    return 0
