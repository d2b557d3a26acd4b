"""The sidecar's wire protocol and security: framing, token, version handshake, error mapping, and the
filesystem calls against the test server (a Python client stands in for the JVM)."""

from __future__ import annotations

import os
import socket
import stat
import threading

import pytest

from s3commit import __version__
from s3commit.bridge.handlers import BridgeHandlers
from s3commit.bridge.protocol import ProtocolError, read_message, write_message
from s3commit.bridge.server import SidecarServer


@pytest.fixture
def sidecar(tmp_path):
    directory = tmp_path / "sidecar"
    directory.mkdir(mode=0o700)
    server = SidecarServer(str(directory / "sock"), "secret-token")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.stop()


def connect(server, *, token="secret-token", version=__version__):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(server.socket_path)
    write_message(sock, {"op": "hello", "token": token, "version": version})
    return sock, read_message(sock)[0]


def call(sock, op, payload=b"", **args):
    write_message(sock, {"op": op, **args}, payload)
    return read_message(sock)


def test_messages_round_trip_with_binary_payload():
    a, b = socket.socketpair()
    write_message(a, {"op": "x", "n": 1}, b"\x00\x01part data")
    header, payload = read_message(b)
    assert header == {"op": "x", "n": 1, "payload": 11} and payload == b"\x00\x01part data"


def test_a_truncated_or_foreign_message_is_a_protocol_error():
    a, b = socket.socketpair()
    a.sendall(b"\x00\x00\x00\x05[1,2]")
    with pytest.raises(ProtocolError):
        read_message(b)
    a.sendall(b"\x00\x00\x00\x03")
    a.close()
    with pytest.raises(EOFError):
        read_message(b)


def test_socket_is_reachable_only_by_its_owner(sidecar):
    assert stat.S_IMODE(os.stat(sidecar.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(sidecar.socket_path)).st_mode) == 0o700


def test_a_wrong_token_is_refused(sidecar):
    sock, reply = connect(sidecar, token="guess")
    assert reply["ok"] is False and reply["error"]["message"] == "bad token"
    with pytest.raises(EOFError):
        read_message(sock)


def test_a_version_mismatch_names_both_versions(sidecar):
    _, reply = connect(sidecar, version="9.9.9")
    assert reply["ok"] is False
    assert "9.9.9" in reply["error"]["message"] and __version__ in reply["error"]["message"]


def test_unknown_operation_is_an_error_and_the_connection_lives_on(sidecar):
    sock, reply = connect(sidecar)
    assert reply["ok"] is True
    header, _ = call(sock, "fs.teleport")
    assert header["ok"] is False and "unknown operation" in header["error"]["message"]
    header, _ = call(sock, "conf.register", conf={})
    assert header["ok"] is True


def test_filesystem_calls_against_s3(sidecar, s3_server, s3_bucket):
    sock, _ = connect(sidecar)
    conf = {"fs.s3a.endpoint": s3_server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.multipart.size": "5M"}
    conf_id = call(sock, "conf.register", conf=conf)[0]["conf_id"]
    path = f"s3a://{s3_bucket}/dir/file #1.txt"
    # write in two chunks, then read a range back
    handle = call(sock, "fs.open_write", conf_id=conf_id, path=path)[0]["handle"]
    call(sock, "fs.write", b"hello ", handle=handle)
    call(sock, "fs.write", b"world", handle=handle)
    assert call(sock, "fs.close_write", handle=handle)[0]["length"] == 11
    assert call(sock, "fs.read", conf_id=conf_id, path=path, offset=6, length=5)[1] == b"world"
    status = call(sock, "fs.stat", conf_id=conf_id, path=path)[0]
    assert status["length"] == 11 and status["dir"] is False
    assert call(sock, "fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/dir")[0]["dir"] is True
    missing = call(sock, "fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/nope")[0]
    assert missing["ok"] is False and missing["error"]["type"] == "FileNotFound"
    entries = call(sock, "fs.list", conf_id=conf_id, path=f"s3a://{s3_bucket}/dir")[0]["entries"]
    assert [e["path"] for e in entries] == [path]
    # rename is copy + delete
    assert call(sock, "fs.rename", conf_id=conf_id, src=f"s3a://{s3_bucket}/dir",
                dst=f"s3a://{s3_bucket}/moved")[0]["renamed"] is True
    assert call(sock, "fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/moved/file #1.txt")[0]["length"] == 11
    assert call(sock, "fs.delete", conf_id=conf_id, path=f"s3a://{s3_bucket}/moved", recursive=True)[0]["deleted"]
    assert call(sock, "fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/moved")[0]["ok"] is False
    # and the sidecar counted every request it made, for the JVM to read (Sidecar.countersJson)
    stats = call(sock, "stats")[0]
    assert stats["requests"]["CopyObject"] == 1 and stats["requests"]["HeadObject"] >= 3
    assert stats["bytes_copied"] == 11 and stats["bytes_uploaded"] == 11


def test_many_threads_call_at_once(sidecar):
    errors = []

    def worker():
        try:
            sock, _ = connect(sidecar)
            for _ in range(20):
                assert call(sock, "conf.register", conf={"s3commit.x": "1"})[0]["ok"]
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_handlers_map_errors_to_java_exception_families():
    from s3commit.bridge.handlers import error_type
    from s3commit.errors import CommitConflictError, ConfigError, NotFoundError, StoreError

    assert error_type(NotFoundError("x", operation="HeadObject", bucket="b", key="k")) == "FileNotFound"
    assert error_type(CommitConflictError("x")) == "FileAlreadyExists"
    assert error_type(ConfigError("x")) == "IllegalArgument"
    assert error_type(StoreError("x", operation="PutObject", bucket="b")) == "IO"
    assert "fs.rename" in BridgeHandlers().ops
