"""The sidecar server in-process: security, handshake, errors, and the filesystem calls against the test
server, with a Python client standing in for the JVM (it speaks the protocol as ``Sidecar.java`` does)."""

from __future__ import annotations

import os
import stat
import struct
import threading

import pytest

from s3commit import __version__
from s3commit.bridge.blocks import BlockDirectories, BlockDirectory
from s3commit.bridge.client import BridgeClient
from s3commit.bridge.handlers import BridgeHandlers
from s3commit.bridge.protocol import FRAME_LIMIT
from s3commit.bridge.server import SidecarServer


@pytest.fixture
def sidecar(tmp_path):
    blocks = BlockDirectories(BlockDirectory.create(str(tmp_path)))
    server = SidecarServer.listen_in(blocks.path, "secret-token", BridgeHandlers(blocks=blocks))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.stop()
    blocks.remove()


def connect(server, *, token="secret-token", version=__version__) -> BridgeClient:
    return BridgeClient(server.socket_path, token, version=version)


def s3_conf(server) -> dict[str, str]:
    return {"fs.s3a.endpoint": server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.multipart.size": "5M"}


def test_socket_and_block_directory_are_reachable_only_by_their_owner(sidecar):
    assert stat.S_IMODE(os.stat(sidecar.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(sidecar.socket_path)).st_mode) == 0o700
    assert os.path.basename(os.path.dirname(sidecar.socket_path)).startswith(f"s3commit-sidecar-{os.getpid()}-")


def test_a_directory_too_deep_for_a_unix_socket_gets_a_private_socket_directory(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    blocks = BlockDirectories(BlockDirectory.create(str(deep)))
    server = SidecarServer.listen_in(blocks.path, "secret-token", BridgeHandlers(blocks=blocks))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    own = os.path.dirname(server.socket_path)
    try:
        assert len(os.fsencode(os.path.join(blocks.path, "sock"))) > 100
        assert len(os.fsencode(server.socket_path)) <= 100
        assert stat.S_IMODE(os.stat(own).st_mode) == 0o700
        client = connect(server)
        assert client.hello["ok"] is True
        client.close()
    finally:
        server.stop()
        blocks.remove()
    assert not os.path.exists(own)


def test_a_wrong_token_is_refused(sidecar):
    client = connect(sidecar, token="guess")
    assert client.hello["ok"] is False and client.hello["error"]["message"] == "bad token"
    with pytest.raises(EOFError):
        client.channel.read_header()


def test_a_version_mismatch_names_both_versions(sidecar):
    client = connect(sidecar, version="9.9.9")
    assert client.hello["ok"] is False
    assert "9.9.9" in client.hello["error"]["message"] and __version__ in client.hello["error"]["message"]


def test_the_hello_names_the_block_directory(sidecar):
    client = connect(sidecar)
    assert client.hello["ok"] is True and client.hello["blocks_dir"] == sidecar.handlers.blocks.path


def test_unknown_operation_is_an_error_and_the_connection_lives_on(sidecar):
    client = connect(sidecar)
    header, _ = client.call("fs.teleport")
    assert header["ok"] is False and "unknown operation" in header["error"]["message"]
    assert client.call("conf.register", conf={})[0]["ok"] is True


def test_an_unknown_configuration_id_asks_the_jvm_to_register_again(sidecar):
    client = connect(sidecar)
    header, _ = client.call("fs.stat", conf_id="0123456789abcdef", path="s3a://b/k")
    assert header["ok"] is False and header["error"]["type"] == "UnknownConfiguration"


def test_the_same_keys_get_the_same_id_in_any_sidecar(sidecar, tmp_path):
    # The JVM relies on it: after a restart it registers the same keys and keeps using the ids it holds.
    first = connect(sidecar).call("conf.register", conf={"fs.s3a.endpoint": "x", "s3commit.a": "1"})[0]
    other = BridgeHandlers(blocks=BlockDirectories(BlockDirectory.create(str(tmp_path / "other"))))
    again = other.conf_register({"conf": {"s3commit.a": "1", "fs.s3a.endpoint": "x"}}, None).header
    assert first["conf_id"] == again["conf_id"]


def test_an_oversized_frame_is_refused_with_an_error_that_names_the_limit(sidecar):
    client = connect(sidecar)
    client.channel.sock.sendall(struct.pack(">I", FRAME_LIMIT + 1))
    reply = client.channel.read_header()
    assert reply["ok"] is False and reply["error"]["type"] == "FrameTooLarge"
    assert str(FRAME_LIMIT) in reply["error"]["message"]
    with pytest.raises(EOFError):  # the stream cannot be trusted after it: the sidecar hung up
        client.channel.read_header()


def test_filesystem_calls_against_s3(sidecar, s3_server, s3_bucket):
    client = connect(sidecar)
    conf_id = client.call("conf.register", conf=s3_conf(s3_server))[0]["conf_id"]
    path = f"s3a://{s3_bucket}/dir/file #1.txt"
    # a small file is one body at close (one PUT), then a range is read back
    opened = client.call("fs.open_write", conf_id=conf_id, path=path)[0]
    assert opened["part_size"] == 5 * 1024 * 1024 and opened["magic"] is False
    assert client.call("fs.close_write", b"hello world", handle=opened["handle"], length=11)[0]["length"] == 11
    header, data = client.call("fs.read", conf_id=conf_id, path=path, offset=6, length=5)
    assert header["ok"] and data == b"world"
    status = client.call("fs.stat", conf_id=conf_id, path=path)[0]
    assert status["length"] == 11 and status["dir"] is False
    assert client.call("fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/dir")[0]["dir"] is True
    missing = client.call("fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/nope")[0]
    assert missing["ok"] is False and missing["error"]["type"] == "FileNotFound"
    listed = client.call("fs.list", conf_id=conf_id, path=f"s3a://{s3_bucket}/dir")[1]
    assert [line.split(b'"')[3].decode() for line in listed.splitlines()] == [path]
    # rename is copy + delete
    assert client.call("fs.rename", conf_id=conf_id, src=f"s3a://{s3_bucket}/dir",
                       dst=f"s3a://{s3_bucket}/moved")[0]["renamed"] is True
    assert client.call("fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/moved/file #1.txt")[0]["length"] == 11
    assert client.call("fs.delete", conf_id=conf_id, path=f"s3a://{s3_bucket}/moved", recursive=True)[0]["deleted"]
    assert client.call("fs.stat", conf_id=conf_id, path=f"s3a://{s3_bucket}/moved")[0]["ok"] is False
    # and the sidecar counted every request it made, for the JVM to read (Sidecar.countersJson)
    stats = client.call("stats")[0]
    assert stats["requests"]["CopyObject"] == 1 and stats["requests"]["HeadObject"] >= 3
    assert stats["bytes_copied"] == 11 and stats["bytes_uploaded"] == 11


def test_a_read_of_a_missing_object_is_file_not_found_before_any_byte(sidecar, s3_server, s3_bucket):
    client = connect(sidecar)
    conf_id = client.call("conf.register", conf=s3_conf(s3_server))[0]["conf_id"]
    header, data = client.call("fs.read", conf_id=conf_id, path=f"s3a://{s3_bucket}/none", offset=0, length=4)
    assert header["ok"] is False and header["error"]["type"] == "FileNotFound" and data == b""


def test_a_listing_of_an_empty_directory_and_of_a_file(sidecar, s3_server, s3_bucket, s3_client):
    client = connect(sidecar)
    conf_id = client.call("conf.register", conf=s3_conf(s3_server))[0]["conf_id"]
    s3_client.put_object(Bucket=s3_bucket, Key="empty/", Body=b"")
    s3_client.put_object(Bucket=s3_bucket, Key="a-file", Body=b"abc")
    assert client.call("fs.list", conf_id=conf_id, path=f"s3a://{s3_bucket}/empty") == ({"ok": True, "body": True}, b"")
    header, listed = client.call("fs.list", conf_id=conf_id, path=f"s3a://{s3_bucket}/a-file")
    assert b'"length":3' in listed and listed.count(b"\n") == 1
    header, _ = client.call("fs.list", conf_id=conf_id, path=f"s3a://{s3_bucket}/no-such-dir")
    assert header["error"]["type"] == "FileNotFound"


def test_many_threads_call_at_once(sidecar):
    errors = []

    def worker():
        try:
            client = connect(sidecar)
            for _ in range(20):
                assert client.call("conf.register", conf={"s3commit.x": "1"})[0]["ok"]
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
    from s3commit.bridge.protocol import FrameTooLarge
    from s3commit.bridge.registry import UnknownConfiguration
    from s3commit.errors import CommitConflictError, ConfigError, NotFoundError, StoreError

    assert error_type(NotFoundError("x", operation="HeadObject", bucket="b", key="k")) == "FileNotFound"
    assert error_type(CommitConflictError("x")) == "FileAlreadyExists"
    assert error_type(ConfigError("x")) == "IllegalArgument"
    assert error_type(StoreError("x", operation="PutObject", bucket="b")) == "IO"
    assert error_type(UnknownConfiguration("x")) == "UnknownConfiguration"
    assert error_type(FrameTooLarge(1, "x")) == "FrameTooLarge"
    assert {"fs.rename", "fs.write_block", "job.commit", "health"} <= set(BridgeHandlers().ops)


def test_block_files_go_to_s3commit_buffer_dir_else_yarns_container_dirs_else_the_temp_dir(tmp_path, monkeypatch):
    # With Hadoop's core-default.xml no longer taken for a setting, S3A's default buffer directory (YARN's
    # LOCAL_DIRS) is s3commit's default too: a container's big local disks, not a small /tmp.
    import tempfile

    from s3commit.bridge.blocks import default_base

    monkeypatch.delenv("S3COMMIT_BUFFER_DIR", raising=False)
    monkeypatch.setenv("LOCAL_DIRS", f"{tmp_path / 'gone'},{tmp_path}")
    assert default_base() == str(tmp_path)
    monkeypatch.setenv("S3COMMIT_BUFFER_DIR", "/chosen")
    assert default_base() == "/chosen"
    monkeypatch.delenv("S3COMMIT_BUFFER_DIR")
    monkeypatch.delenv("LOCAL_DIRS")
    assert default_base() == tempfile.gettempdir()
