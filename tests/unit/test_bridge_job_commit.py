"""The sidecar's ``job.commit`` as Hadoop's committers send it: without task messages, the job commit reads
every pendingset in the job directory (``OutputCommitter.commitJob(JobContext)`` has none to give)."""

from __future__ import annotations

import json

import pytest

from s3commit.bridge.handlers import BridgeHandlers
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys


@pytest.fixture
def handlers(s3_server):
    handlers = BridgeHandlers()
    conf = {"fs.s3a.endpoint": s3_server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.committer.name": "magic"}
    conf_id = handlers.conf_register({"conf": conf}, b"")[0]["conf_id"]
    return handlers, conf_id


def write_task(handlers, conf_id, dest, job_id, task):
    """One task attempt through the sidecar, as a Hadoop output format drives it: setup, a file, commit."""
    attempt = f"attempt_{job_id}_0001_m_{task:06d}_0"
    args = {"conf_id": conf_id, "dest": dest, "job_id": job_id, "task_attempt_id": attempt}
    work_path = handlers.task_setup(args, b"")[0]["work_path"]
    handle = handlers.fs_open_write({"conf_id": conf_id, "path": f"{work_path}/part-{task:05d}"}, b"")[0]["handle"]
    handlers.fs_write({"handle": handle}, f"line {task}\n".encode())
    handlers.fs_close_write({"handle": handle}, b"")
    handlers.task_commit(args, b"")


def test_a_job_commit_without_messages_completes_every_committed_task(handlers, s3_bucket, s3_client):
    handlers, conf_id = handlers
    dest, job_id = f"s3://{s3_bucket}/rdd", "20261122120000123456789"
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    handlers.job_setup(job, b"")
    for task in range(3):
        write_task(handlers, conf_id, dest, job_id, task)
    assert [k for k in list_keys(s3_client, s3_bucket, "rdd/") if k.startswith("rdd/part-")] == []

    success = handlers.job_commit(job, b"")[0]["success"]

    assert sorted(success["filenames"]) == [f"/rdd/part-{t:05d}" for t in range(3)]
    assert list_keys(s3_client, s3_bucket, "rdd/") == ["rdd/_SUCCESS", *(f"rdd/part-{t:05d}" for t in range(3))]
    body = s3_client.get_object(Bucket=s3_bucket, Key="rdd/part-00001")["Body"].read()
    assert body == b"line 1\n"
    assert json.loads(s3_client.get_object(Bucket=s3_bucket, Key="rdd/_SUCCESS")["Body"].read())["jobId"] == job_id
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_job_commit_with_an_empty_message_list_commits_nothing(handlers, s3_bucket, s3_client):
    # The SQL protocol always sends its messages: an empty list means no task committed, not "read them all".
    handlers, conf_id = handlers
    dest, job_id = f"s3://{s3_bucket}/sql", "20261122120000987654321"
    job = {"conf_id": conf_id, "dest": dest, "job_id": job_id}
    handlers.job_setup(job, b"")
    write_task(handlers, conf_id, dest, job_id, 0)

    assert handlers.job_commit({**job, "messages": []}, b"")[0]["success"]["filenames"] == []
    assert [k for k in list_keys(s3_client, s3_bucket, "sql/") if "part-" in k and "__magic" not in k] == []
