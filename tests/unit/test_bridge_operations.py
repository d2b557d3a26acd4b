"""The bridge's operation table (``s3commit/bridge/operations.json``) against both sides: the Python handlers,
the Java sources, the server's checks of requests and replies, and the error families."""

from __future__ import annotations

import inspect
import re
import threading
from pathlib import Path

import pytest

from s3commit import errors
from s3commit.bridge import protocol, registry
from s3commit.bridge.blocks import BlockDirectories, BlockDirectory
from s3commit.bridge.client import BridgeClient
from s3commit.bridge.handlers import BridgeHandlers
from s3commit.bridge.operations import (
    OPERATIONS,
    BadRequest,
    DeclaredFields,
    check_handlers,
    hello_table,
)
from s3commit.bridge.reply import error_header, java_families
from s3commit.bridge.server import SidecarServer

JAVA = Path(__file__).resolve().parents[2] / "jvm-bridge" / "src"
OP_LITERAL = re.compile(r'"((?:fs|job|task|stream|ckpt|conf)\.[a-z_]+|stats|health)"')
FIELD_PUT = re.compile(r'\bargs\.put\("([a-z_]+)"')


def java_sources() -> dict[str, str]:
    return {p.relative_to(JAVA).as_posix(): p.read_text() for p in JAVA.rglob("*.java") if "/test/" not in p.as_posix()}


def test_the_python_side_handles_exactly_the_tables_operations():
    assert set(BridgeHandlers().ops) == set(OPERATIONS)
    with pytest.raises(ValueError, match=r"handled but not in the table \['fs\.teleport'\].*not handled \['stats'\]"):
        check_handlers([*[n for n in OPERATIONS if n != "stats"], "fs.teleport"])


def test_the_java_side_sends_exactly_the_tables_operations():
    sent = {name for text in java_sources().values() for name in OP_LITERAL.findall(text)}
    assert sent - set(OPERATIONS) == set(), "the JVM sends operations the table lacks"
    assert set(OPERATIONS) - sent == set(), "the table has operations the JVM never sends"


def test_every_field_the_java_side_puts_into_a_request_is_in_the_table():
    # Which operation each map goes to is checked at run time: every sidecar refuses a request whose fields
    # differ from its row, and the end-to-end suites run the JVM against it.
    declared = {f for op in OPERATIONS.values() for f in op.required | op.optional}
    put = {field for text in java_sources().values() for field in FIELD_PUT.findall(text)}
    assert put - declared == set()


def test_a_request_with_an_unknown_or_a_missing_field_is_refused_by_name():
    stat = OPERATIONS["fs.stat"]
    stat.check_request({"op": "fs.stat", "conf_id": "c", "path": "s3a://b/k"})
    with pytest.raises(BadRequest, match=r"'fs.stat' does not take the field\(s\) paht"):
        stat.check_request({"op": "fs.stat", "conf_id": "c", "paht": "s3a://b/k"})
    with pytest.raises(BadRequest, match=r"'fs.stat' needs the field\(s\) path"):
        stat.check_request({"op": "fs.stat", "conf_id": "c"})
    assert error_header(BadRequest("x"))["error"]["type"] == "IllegalArgument"


def test_strict_mode_refuses_undeclared_reads_and_reply_fields():
    request = DeclaredFields(OPERATIONS["fs.stat"], {"op": "fs.stat", "conf_id": "c", "path": "p"})
    assert request["path"] == "p" and request.get("conf_id") == "c"
    with pytest.raises(AssertionError, match="reads 'recursive'"):
        request.get("recursive")
    OPERATIONS["fs.stat"].check_reply({"ok": True, "path": "p", "dir": False, "length": 1, "mtime": 0})
    with pytest.raises(AssertionError, match="etag"):
        OPERATIONS["fs.stat"].check_reply({"path": "p", "etag": "x"})


def test_the_hello_carries_the_restartable_operations_and_the_timeouts(tmp_path, monkeypatch):
    monkeypatch.setenv("S3COMMIT_BRIDGE_METADATA_TIMEOUT", "42")
    blocks = BlockDirectories(BlockDirectory.create(str(tmp_path)))
    server = SidecarServer.listen_in(blocks.path, "t", BridgeHandlers(blocks=blocks))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with BridgeClient(server.socket_path, "t") as client:
            table = client.hello["operations"]
            assert "job.commit" in table["restartable"] and "task.commit" not in table["restartable"]
            assert table["timeouts"]["fs.stat"] == 42 and table["timeouts"]["job.commit"] == 0
            header, _ = client.call("fs.stat", conf_id="nope", path="s3a://b/k", extra=1)
            assert header["ok"] is False and "does not take the field(s) extra" in header["error"]["message"]
            assert header["error"]["type"] == "IllegalArgument"
    finally:
        server.stop()
        blocks.remove()
    assert hello_table()["restartable"] == sorted(n for n, op in OPERATIONS.items() if op.restartable)


def error_classes() -> list[type[BaseException]]:
    found = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, BaseException)
             and c.__module__ == errors.__name__]
    found += [protocol.ProtocolError, protocol.FrameTooLarge, protocol.BodyError, registry.UnknownConfiguration,
              BadRequest]
    return found


@pytest.mark.parametrize("cls", error_classes(), ids=lambda c: c.__name__)
def test_every_error_type_maps_to_one_java_family_by_name(cls):
    assert cls in dict(java_families()), f"{cls.__name__} has no Java family in reply.java_families"


def test_an_error_header_carries_the_s3_code_the_object_and_the_upload():
    err = errors.NoSuchUploadError("gone", operation="CompleteMultipartUpload", bucket="b", key="k",
                                   upload_id="u-1", code="NoSuchUpload")
    header = error_header(err)["error"]
    assert header == {"type": "FileNotFound", "message": str(err), "error_class": "NoSuchUploadError",
                      "code": "NoSuchUpload", "bucket": "b", "key": "k", "upload_id": "u-1"}
    denied = error_header(errors.AccessDeniedError("no", bucket="b", key="k", code="AccessDenied"))["error"]
    assert denied["type"] == "AccessDenied" and denied["code"] == "AccessDenied"
    failed = errors.JobCommitError("job failed", failures=[("s3://b/k", err)])
    assert error_header(failed)["error"]["upload_id"] == "u-1"
