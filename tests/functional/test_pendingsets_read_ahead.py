"""Pendingsets read as their tasks commit (``Committer.task_committed``, Spark's ``onTaskCommit``): the job commit
takes what was read and reads none of it again, validates it as what it reads, and reads again what another attempt
rewrote since. Against the moto server behind the simulator, counting the requests."""

from __future__ import annotations

import uuid

import pytest

from s3commit import S3Store, create_committer
from s3commit.commit.process_state import ProcessState
from s3commit.errors import ConfigError
from s3commit.model.uri import S3Uri
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.conftest import store_options_for


def driver(s3_server, dest: str, staging_dir: str, process: ProcessState, job_id: str | None = None):
    committer = create_committer("magic", dest, job_id=job_id or str(uuid.uuid4()), process=process,
                                 store=S3Store(store_options_for(s3_server)), staging_dir=staging_dir)
    return committer


def run_task(committer, task: int, attempt: int = 0, files: int = 2, tag: str = ""):
    attempt_ctx = committer.setup_task(committer.new_task_attempt_id(task, attempt))
    for n in range(files):
        with attempt_ctx.open(f"part-{task:05d}-{n}{tag}.txt") as out:
            out.write(f"task {task} file {n}{tag}\n".encode())
    return committer.commit_task(attempt_ctx)


def pendingset_gets(s3_server) -> int:
    return sum(1 for r in s3_server.request_log()
               if r["operation"] == "GetObject" and str(r.get("key", "")).endswith(".pendingset"))


def test_a_job_commit_reads_no_pendingset_its_driver_was_told_of(s3_server, s3_bucket, staging_dir):
    dest = f"s3://{s3_bucket}/t"
    process = ProcessState()
    job = driver(s3_server, dest, staging_dir, process)
    job.setup_job()
    messages = []
    for task in range(4):
        message = run_task(job, task)
        assert job.task_committed(message)  # as each task's message arrives on the driver
        messages.append(message)
    assert process.preloads.wait_read(S3Uri.parse(dest), job.job_id, timeout=30) == 4
    s3_server.reset_stats()
    success = job.commit_job(messages)
    assert pendingset_gets(s3_server) == 0
    assert success.metrics["committer_pendingsets_preloaded"] == 4
    assert success.metrics["committer_pendingsets"] == 4
    assert sorted(k for k in list_keys(s3_server.client(), s3_bucket, "t/") if "part-" in k) == sorted(
        f"t/part-{task:05d}-{n}.txt" for task in range(4) for n in range(2))
    assert_no_pending_uploads(s3_server.client(), s3_bucket)
    # A report that comes after the job committed holds nothing.
    assert not job.task_committed(messages[0])
    assert process.preloads.held(S3Uri.parse(dest), job.job_id) == 0


def test_a_pendingset_another_attempt_rewrote_since_it_was_read_is_read_again(s3_server, s3_bucket, staging_dir):
    dest = f"s3://{s3_bucket}/t"
    process = ProcessState()
    job = driver(s3_server, dest, staging_dir, process)
    job.setup_job()
    first = run_task(job, 0, attempt=0, tag="-a")
    job.task_committed(first)
    process.preloads.wait_read(S3Uri.parse(dest), job.job_id, timeout=30)
    # A second attempt of the task commits after the first was read (its pendingset replaces the first's, whose
    # uploads it aborts), and the caller accepts only it: what was read is the first's, so it is read again.
    second = run_task(job, 0, attempt=1, tag="-b")
    other = run_task(job, 1)
    job.task_committed(other)
    process.preloads.wait_read(S3Uri.parse(dest), job.job_id, timeout=30)
    s3_server.reset_stats()
    success = job.commit_job([second, other])
    assert success.metrics["committer_pendingsets_preloaded"] == 1
    assert pendingset_gets(s3_server) == 1
    data = sorted(k for k in list_keys(s3_server.client(), s3_bucket, "t/") if "part-" in k)
    assert data == ["t/part-00000-0-b.txt", "t/part-00000-1-b.txt", "t/part-00001-0.txt", "t/part-00001-1.txt"]
    assert_no_pending_uploads(s3_server.client(), s3_bucket)


def test_what_was_read_is_validated_as_what_the_commit_reads(s3_server, s3_bucket, staging_dir):
    """A preloaded pendingset of two attempts both accepted is read again; one of another job is refused by the
    report itself."""
    dest = f"s3://{s3_bucket}/t"
    process = ProcessState()
    job = driver(s3_server, dest, staging_dir, process)
    job.setup_job()
    message = run_task(job, 0)
    elsewhere = driver(s3_server, dest, staging_dir, ProcessState())
    with pytest.raises(ConfigError, match=f"of job {elsewhere.job_id}, got {job.job_id}"):
        elsewhere.task_committed(message)
    job.task_committed(message)
    process.preloads.wait_read(S3Uri.parse(dest), job.job_id, timeout=30)
    twice = [message, message.__class__(**{**message.__dict__, "task_attempt_id": "attempt_x_0000_m_000000_9"})]
    s3_server.reset_stats()
    success = job.commit_job(twice)  # (two attempts accepted for one pendingset: the last writer's is read)
    assert success.metrics["committer_pendingsets_preloaded"] == 0
    assert pendingset_gets(s3_server) == 1


def test_an_aborted_job_drops_what_was_read_for_it(s3_server, s3_bucket, staging_dir):
    dest = f"s3://{s3_bucket}/t"
    process = ProcessState()
    job = driver(s3_server, dest, staging_dir, process)
    job.setup_job()
    job.task_committed(run_task(job, 0))
    late = run_task(job, 1)
    assert process.preloads.held(S3Uri.parse(dest), job.job_id) == 1
    job.abort_job()
    assert process.preloads.held(S3Uri.parse(dest), job.job_id) == 0
    assert not job.task_committed(late)  # (a report that comes after the abort holds nothing)
    assert_no_pending_uploads(s3_server.client(), s3_bucket)
