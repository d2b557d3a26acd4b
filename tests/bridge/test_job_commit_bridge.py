"""``job.commit`` through the sidecar: messages streamed as the request's body (a 100,000-task job is no
bigger a frame than a 1-task job), or none at all (Hadoop's committers: every pendingset in the job
directory), against the test server."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from s3commit.bridge.blocks import BlockDirectories, BlockDirectory
from s3commit.bridge.client import BridgeClient
from s3commit.bridge.handlers import BridgeHandlers
from s3commit.bridge.protocol import FRAME_LIMIT, ndjson
from s3commit.bridge.server import SidecarServer
from s3commit.model.lease_record import LeaseState
from s3commit.model.paths import is_scratch_key
from s3commit.model.uri import S3Uri
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys


@pytest.fixture
def served(tmp_path):
    """A sidecar server in this process, and its handlers."""
    blocks = BlockDirectories(BlockDirectory.create(str(tmp_path)))
    handlers = BridgeHandlers(blocks=blocks)
    server = SidecarServer.listen_in(blocks.path, "t", handlers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, handlers
    server.stop()
    blocks.remove()


@pytest.fixture
def client(served):
    with BridgeClient(served[0].socket_path, "t") as connection:
        yield connection


def register(client, server) -> str:
    conf = {"fs.s3a.endpoint": server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.committer.name": "magic"}
    return str(client.call("conf.register", conf=conf)[0]["conf_id"])


def write_task(client, conf_id, dest, job_id, task, *, files=1) -> dict:
    """One task attempt through the sidecar, as the JVM drives it: setup, files, commit."""
    attempt = f"attempt_202611230000_0001_m_{task:06d}_0"
    args = {"conf_id": conf_id, "dest": dest, "job_id": job_id, "task_attempt_id": attempt}
    work_path = client.call("task.setup", **args)[0]["work_path"]
    for n in range(files):
        opened = client.call("fs.open_write", conf_id=conf_id, path=f"{work_path}/part-{task:05d}-{n}")[0]
        data = f"line {task}\n".encode()
        assert client.call("fs.close_write", data, handle=opened["handle"], length=len(data))[0]["ok"]
    header = client.call("task.commit", **args)[0]
    assert header["ok"], header
    return header["message"]


def test_a_job_commit_without_messages_completes_every_committed_task(client, s3_server, s3_bucket, s3_client):
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/rdd", "20261122120000123456789"
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    assert client.call("job.setup", **job)[0]["ok"]
    for task in range(3):
        write_task(client, conf_id, dest, job_id, task)
    assert [k for k in list_keys(s3_client, s3_bucket, "rdd/") if k.startswith("rdd/part-")] == []

    success = client.call("job.commit", **job)[0]["success"]  # no body: Hadoop's commitJob(JobContext)

    assert sorted(success["filenames"]) == [f"/rdd/part-{t:05d}-0" for t in range(3)]
    assert [k for k in list_keys(s3_client, s3_bucket, "rdd/") if not is_scratch_key(k)] == [
        "rdd/_SUCCESS", *(f"rdd/part-{t:05d}-0" for t in range(3))]
    assert s3_client.get_object(Bucket=s3_bucket, Key="rdd/part-00001-0")["Body"].read() == b"line 1\n"
    assert json.loads(s3_client.get_object(Bucket=s3_bucket, Key="rdd/_SUCCESS")["Body"].read())["jobId"] == job_id
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_job_commit_with_an_empty_message_list_commits_nothing(client, s3_server, s3_bucket, s3_client):
    # The SQL protocol always sends its messages: an empty body means no task committed, not "read them all".
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/sql", "20261122120000987654321"
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    client.call("job.setup", **job)
    write_task(client, conf_id, dest, job_id, 0)

    header, _ = client.call("job.commit", b"", **job)
    assert header["success"]["filenames"] == [] and header["messages"] == 0
    assert [k for k in list_keys(s3_client, s3_bucket, "sql/") if "part-" in k and "__magic" not in k] == []


def test_a_task_that_wrote_nothing_saves_no_pendingset(client, s3_server, s3_bucket, s3_client):
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/empty", str(uuid.uuid4())
    client.call("job.setup", conf_id=conf_id, dest=dest, job_id=job_id)
    message = write_task(client, conf_id, dest, job_id, 7, files=0)
    assert message["pendingset_key"] is None and message["files"] == 0
    assert [k for k in list_keys(s3_client, s3_bucket, "empty/") if k.endswith(".pendingset")] == []


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_a_job_of_100000_tasks_commits_through_the_bridge_in_bounded_frames(client, s3_server, s3_bucket,
                                                                            s3_client, monkeypatch):
    # Three tasks wrote files; 99,997 wrote nothing (their messages name no pendingset). Every message goes
    # to the sidecar: as one header they would be ~20 MB, over the 16 MiB frame limit.
    import s3commit.bridge.protocol as protocol

    frames: list[int] = []
    original = protocol.Channel.write_data

    def counting(self, data):
        frames.append(min(memoryview(data).nbytes, protocol.CHUNK))
        return original(self, data)

    monkeypatch.setattr(protocol.Channel, "write_data", counting)
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/wide", str(uuid.uuid4())
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    client.call("job.setup", **job)
    written = [write_task(client, conf_id, dest, job_id, task) for task in range(3)]
    empty = ({"job_id": job_id, "task_id": f"task_202611230000_0001_m_{t:06d}",
              "task_attempt_id": f"attempt_202611230000_0001_m_{t:06d}_0", "pendingset_key": None,
              "files": 0, "bytes": 0, "absolute_dirs": []} for t in range(3, 100_000))
    messages = [*written, *empty]
    assert len(json.dumps(messages)) > FRAME_LIMIT  # what one frame would have had to carry

    started = time.monotonic()
    header, _ = client.call_stream("job.commit", ndjson(messages), **job)
    elapsed = time.monotonic() - started

    assert header["ok"], header
    assert header["messages"] == 100_000
    assert sorted(header["success"]["filenames"]) == [f"/wide/part-{t:05d}-0" for t in range(3)]
    assert max(frames) <= protocol.CHUNK <= FRAME_LIMIT and len(frames) > 1
    assert_no_pending_uploads(s3_client, s3_bucket)
    print(f"100,000 task messages committed through the bridge in {elapsed:.1f} s, {len(frames)} data frames")


def test_a_message_of_another_job_is_refused_before_anything_is_completed(client, s3_server, s3_bucket, s3_client):
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/mixed", str(uuid.uuid4())
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    client.call("job.setup", **job)
    message = write_task(client, conf_id, dest, job_id, 1)
    foreign = {**message, "job_id": str(uuid.uuid4())}
    header, _ = client.call_stream("job.commit", ndjson([message, foreign]), **job)
    assert header["ok"] is False and "not of job" in header["error"]["message"]
    assert [k for k in list_keys(s3_client, s3_bucket, "mixed/") if k.startswith("mixed/part-")] == []
    # The commit lease, taken while the messages were read, is free again (the abort below would wait for it).
    lease = LeaseState.from_json(s3_client.get_object(Bucket=s3_bucket, Key="mixed/__s3commit_lease")["Body"].read(),
                                 source="lease")
    assert lease.holder is None and lease.committed(job_id) is None
    client.call("job.abort", **job)
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_commit_whose_caller_is_interrupted_runs_to_its_end_and_abort_and_resend_get_its_outcome(
        tmp_path, s3_sim, s3_bucket, s3_client):
    """Spark interrupts a query during commitJob (Thrift, Connect): the JVM's wait breaks (its connection drops),
    the sidecar runs the commit to its end. Spark's abortJob then waits for it and refuses (the job committed);
    the JVM's job.commit sent again waits for it and reports success. Before, the abort rolled the live commit
    back under its _SUCCESS."""
    blocks = BlockDirectories(BlockDirectory.create(str(tmp_path)))
    server = SidecarServer.listen_in(blocks.path, "t", BridgeHandlers(blocks=blocks))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with BridgeClient(server.socket_path, "t") as client:
            conf_id = register(client, s3_sim)
            dest, job_id = f"s3://{s3_bucket}/cancelled", str(uuid.uuid4())
            job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
            assert client.call("job.setup", **job)[0]["ok"]
            for task in range(4):
                write_task(client, conf_id, dest, job_id, task, files=2)
            s3_sim.configure(profile="s3-standard")  # ~50 ms a Complete: the commit stays live a while
            interrupted = BridgeClient(server.socket_path, "t")
            interrupted.channel.write_message({"op": "job.commit", **job}, None)
            deadline = time.monotonic() + 60
            while not s3_sim.stats().requests.get("CompleteMultipartUpload"):  # the commit is completing
                assert time.monotonic() < deadline, "the commit never began"
                time.sleep(0.01)
            interrupted.close()  # the interrupt: the JVM stops waiting
            aborted = client.call("job.abort", **job)[0]
            assert not aborted["ok"] and "has committed" in aborted["error"]["message"], aborted
            again = client.call("job.commit", **job)[0]
            assert again["ok"] and again["success"]["jobId"] == job_id, again
    finally:
        server.stop()
    data = [k for k in list_keys(s3_client, s3_bucket, "cancelled/") if not is_scratch_key(k)]
    assert len(data) == 9  # 8 files and _SUCCESS: committed, never rolled back under its _SUCCESS
    assert_no_pending_uploads(s3_client, s3_bucket)



ATTEMPT = "attempt_202611280000_0001_m_000000_0"


@pytest.mark.parametrize(("hadoop", "strings"), [("3.3.4", True), ("3.4.2", False), (None, False)])
def test_a_sidecar_writes_part_etags_in_the_form_of_its_jvms_s3a(tmp_path, s3_server, s3_bucket, s3_client,
                                                                   hadoop, strings):
    # A sidecar as the JVM starts it (python -m s3commit.bridge), told its Hadoop: the .pending file (kept in S3,
    # not in memory) and the task's pendingset it saves carry the part ETags in that S3A's form, and commit.
    import os
    import subprocess
    import sys

    from s3commit.bridge.server import TOKEN_ENV
    from s3commit.model.manifests import HADOOP_VERSION_ENV

    def read(key):
        return json.loads(s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read())

    env = {k: v for k, v in os.environ.items() if k != HADOOP_VERSION_ENV}
    env.update({TOKEN_ENV: "t", "TMPDIR": str(tmp_path), **({HADOOP_VERSION_ENV: hadoop} if hadoop else {})})
    sidecar = subprocess.Popen([sys.executable, "-m", "s3commit.bridge", "--no-stdin-watch"], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        assert sidecar.stdout is not None
        with BridgeClient(json.loads(sidecar.stdout.readline())["socket"], "t") as client:
            conf = {"fs.s3a.endpoint": s3_server.endpoint_url, "fs.s3a.path.style.access": "true",
                    "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing",
                    "fs.s3a.endpoint.region": "us-east-1", "fs.s3a.committer.name": "magic",
                    "fs.s3a.committer.magic.track.commits.in.memory.enabled": "false"}
            job = {"conf_id": str(client.call("conf.register", conf=conf)[0]["conf_id"]),
                   "dest": f"s3://{s3_bucket}/forms", "job_id": "20261128120000123456789"}
            assert client.call("job.setup", **job)[0]["ok"]
            work_path = client.call("task.setup", **job, task_attempt_id=ATTEMPT)[0]["work_path"]
            opened = client.call("fs.open_write", conf_id=job["conf_id"], path=f"{work_path}/p")[0]
            assert client.call("fs.close_write", b"x", handle=opened["handle"], length=1)[0]["ok"]
            pending = [read(k) for k in list_keys(s3_client, s3_bucket, "forms/") if k.endswith(".pending")]
            message = client.call("task.commit", **job, task_attempt_id=ATTEMPT)[0]["message"]
            pendingset = read(message["pendingset_key"])
            etags = [e for p in pending for e in p["etags"]] + [e for c in pendingset["commits"] for e in c["etags"]]
            assert len(etags) == 2 and all(isinstance(e, str) is strings for e in etags), etags
            assert client.call_stream("job.commit", ndjson([message]), **job)[0]["ok"]
        assert s3_client.get_object(Bucket=s3_bucket, Key="forms/p")["Body"].read() == b"x"
    finally:
        sidecar.terminate()
        sidecar.wait(timeout=30)


def test_task_commits_the_driver_reports_are_read_before_its_job_commit(served, client, s3_server, s3_bucket,
                                                                       s3_client):
    """``job.task_committed`` (the JVM's ``onTaskCommit``): answered at once, the pendingset read in the sidecar; the
    job commit then reads none of them again. A message that is not one is refused, naming it."""
    conf_id = register(client, s3_server)
    dest, job_id = f"s3://{s3_bucket}/ahead", str(uuid.uuid4())
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    assert client.call("job.setup", **job)[0]["ok"]
    messages = []
    for task in range(3):
        message = write_task(client, conf_id, dest, job_id, task)
        header = client.call("job.task_committed", **job, message=json.dumps(message))[0]
        assert header["ok"] and header["preloading"], header
        messages.append(message)
    bad = client.call("job.task_committed", **job, message="{not json")[0]
    assert not bad["ok"] and "task commit message reported to job" in bad["error"]["message"], bad
    assert served[1].process.preloads.wait_read(S3Uri.parse(dest), job_id, timeout=30) == 3
    s3_server.reset_stats()
    header, _ = client.call_stream("job.commit", ndjson(messages), **job)
    assert header["ok"], header
    assert header["success"]["metrics"]["committer_pendingsets_preloaded"] == 3
    assert not [r for r in s3_server.request_log()
                if r["operation"] == "GetObject" and str(r.get("key", "")).endswith(".pendingset")]
    assert sorted(header["success"]["filenames"]) == [f"/ahead/part-{t:05d}-0" for t in range(3)]
    assert_no_pending_uploads(s3_client, s3_bucket)
