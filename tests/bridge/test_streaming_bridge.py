"""The sidecar's Structured Streaming calls as the JVM drives them: a file sink's batch through ``stream.*``
(always the magic committer), and ``ckpt.exists`` (one LIST for a file or a directory), against the test
server."""

from __future__ import annotations

import json
import threading

import pytest

from s3commit.bridge.blocks import BlockDirectories, BlockDirectory
from s3commit.bridge.client import BridgeClient
from s3commit.bridge.handlers import BridgeHandlers
from s3commit.bridge.protocol import ndjson
from s3commit.bridge.server import SidecarServer
from s3commit.committers.sink_batches import batch_job_id
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, list_pending_uploads


@pytest.fixture
def client(tmp_path):
    blocks = BlockDirectories(BlockDirectory.create(str(tmp_path)))
    server = SidecarServer.listen_in(blocks.path, "t", BridgeHandlers(blocks=blocks))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with BridgeClient(server.socket_path, "t") as connection:
        yield connection
    server.stop()
    blocks.remove()


def register(client, server, **extra) -> str:
    conf = {"fs.s3a.endpoint": server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            **extra}
    return str(client.call("conf.register", conf=conf)[0]["conf_id"])


def sink_task(client, conf_id, dest, job_id, task) -> dict:
    attempt = f"attempt_202611240000_0001_m_{task:06d}_0"
    args = {"conf_id": conf_id, "dest": dest, "job_id": job_id, "task_attempt_id": attempt}
    work_path = client.call("stream.task_setup", **args)[0]["work_path"]
    opened = client.call("fs.open_write", conf_id=conf_id, path=f"{work_path}/part-{task:05d}-{job_id}.json")[0]
    data = json.dumps({"task": task}).encode()
    assert client.call("fs.close_write", data, handle=opened["handle"], length=len(data))[0]["ok"]
    header = client.call("stream.task_commit", **args)[0]
    assert header["ok"], header
    return header["message"]


def test_a_batch_through_the_sidecar_is_magic_whatever_the_committer_setting(client, s3_server, s3_bucket,
                                                                           s3_client):
    # fs.s3a.committer.name names a staging committer: the sink's tasks are magic all the same.
    conf_id = register(client, s3_server, **{"fs.s3a.committer.name": "directory"})
    dest, job_id = f"s3://{s3_bucket}/sink", batch_job_id(0)
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    messages = [sink_task(client, conf_id, dest, job_id, t) for t in range(2)]

    header, body = client.call_stream("stream.prepare", ndjson(messages), **job)
    assert header["ok"], header
    files = [json.loads(line) for line in body.splitlines() if line]
    assert sorted(f["key"] for f in files) == [f"sink/part-0000{t}-{job_id}.json" for t in range(2)]
    assert header["files"] == 2 and header["bytes"] == sum(f["length"] for f in files)
    assert [k for k in list_keys(s3_client, s3_bucket, "sink/") if "__magic_job-" not in k] == []
    assert len(list_pending_uploads(s3_client, s3_bucket)) == 2

    assert client.call("stream.finish", **job)[0]["completed"] == 2
    assert list_keys(s3_client, s3_bucket, "sink/") == sorted(f["key"] for f in files)
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_an_aborted_batch_leaves_nothing(client, s3_server, s3_bucket, s3_client):
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/sink", batch_job_id(3)
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    messages = [sink_task(client, conf_id, dest, job_id, t) for t in range(2)]
    client.call_stream("stream.prepare", ndjson(messages), **job)
    assert client.call("stream.abort", **job)[0]["ok"]
    assert list_keys(s3_client, s3_bucket, "sink/") == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_finish_in_a_new_sidecar_reads_the_journal(client, s3_server, s3_bucket, s3_client, tmp_path):
    # The sidecar that prepared the batch died; its successor finishes from the journal.
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/sink", batch_job_id(1)
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    client.call_stream("stream.prepare", ndjson([sink_task(client, conf_id, dest, job_id, 0)]), **job)
    blocks = BlockDirectories(BlockDirectory.create(str(tmp_path / "second")))
    second = SidecarServer.listen_in(blocks.path, "t", BridgeHandlers(blocks=blocks))
    threading.Thread(target=second.serve_forever, daemon=True).start()
    try:
        with BridgeClient(second.socket_path, "t") as other:
            assert register(other, s3_server) == conf_id
            assert other.call("stream.finish", **job)[0]["completed"] == 1
    finally:
        second.stop()
        blocks.remove()
    assert list_keys(s3_client, s3_bucket, "sink/") == [f"sink/part-00000-{job_id}.json"]


@pytest.mark.parametrize(("path", "expected"), [
    ("ckpt/offsets/1", True),          # a file
    ("ckpt/offsets", True),            # a directory (objects under it)
    ("ckpt/state/0", True),            # a directory holding only an empty marker object
    ("ckpt/offsets/2", False),         # missing, though offsets/20 and offsets/2.crc exist
    ("ckpt/commits", False),
    ("ckpt/offsets/1/", True),
])
def test_exists_answers_for_files_and_directories_with_one_list(client, s3_server, s3_bucket, s3_client,
                                                                path, expected):
    for key in ("ckpt/offsets/1", "ckpt/offsets/20", "ckpt/offsets/2.crc", "ckpt/state/0/"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"x" if not key.endswith("/") else b"")
    conf_id = register(client, s3_server)
    before = s3_server.stats()
    header, _ = client.call("ckpt.exists", conf_id=conf_id, path=f"s3a://{s3_bucket}/{path}")
    assert header["exists"] is expected
    assert dict(s3_server.stats().minus(before).requests) == {"ListObjectsV2": 1}
