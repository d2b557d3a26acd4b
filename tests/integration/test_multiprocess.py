"""Committers across processes: tasks in worker processes (spawned, so nothing is shared but what is
pickled), the job commit in this one; and a task written by one process, committed by another."""

from __future__ import annotations

import multiprocessing
import pickle

import pytest

from s3commit import create_committer
from s3commit.errors import CommitStateError
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.conftest import STAGING_AND_MAGIC

pytestmark = pytest.mark.integration


def run_task(committer_bytes: bytes, task: int) -> bytes:
    committer = pickle.loads(committer_bytes)
    attempt = committer.setup_task(committer.new_task_attempt_id(task))
    for n in range(2):
        with attempt.open(f"day={n}/part-{task:05d}.txt") as f:
            f.write(b"row %d %d\n" % (task, n))
    return pickle.dumps(committer.commit_task(attempt))


def write_only(committer_bytes: bytes, task: int) -> None:
    committer = pickle.loads(committer_bytes)
    attempt = committer.setup_task(committer.new_task_attempt_id(task))
    with attempt.open("written-elsewhere.txt") as f:
        f.write(b"x")


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_tasks_in_worker_processes_commit_through_the_driver(name, store, s3_client, s3_bucket, tmp_path):
    committer = create_committer(name, f"s3://{s3_bucket}/out", store=store, threads=2,
                                 staging_dir=str(tmp_path), unique_filenames=False)
    committer.setup_job()
    payload = pickle.dumps(committer)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        messages = [pickle.loads(m) for m in pool.starmap(run_task, [(payload, t) for t in range(3)])]
    assert list_keys(s3_client, s3_bucket, "out/day=") == []
    committer.commit_job(messages)
    assert sorted(k for k in list_keys(s3_client, s3_bucket, "out/") if "part-" in k) == [
        f"out/day={n}/part-{t:05d}.txt" for n in range(2) for t in range(3)]
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_magic_task_written_in_one_process_commits_in_another(store, s3_client, s3_bucket):
    # Only with per-file manifests: in-memory tracking keeps an attempt in the process that writes it.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, track_commits_in_memory=False)
    committer.setup_job()
    process = multiprocessing.get_context("spawn").Process(target=write_only, args=(pickle.dumps(committer), 0))
    process.start()
    process.join(60)
    assert process.exitcode == 0
    # This process has no memory of the upload: the task commit finds it through its .pending file.
    message = committer.commit_task(committer.setup_task(committer.new_task_attempt_id(0)))
    assert message.files == 1
    committer.commit_job([message])
    assert "out/written-elsewhere.txt" in list_keys(s3_client, s3_bucket, "out/")
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_magic_upload_of_a_killed_writer_is_aborted_at_job_commit(store, s3_client, s3_bucket):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, part_size=5 * 1024 * 1024)
    committer.setup_job()
    # A writer that started its upload (a part was sent) and never closed: its upload marker names it.
    attempt = committer.setup_task(committer.new_task_attempt_id(1))
    writer = attempt.open("never-closed.bin")
    writer.write(b"x" * (5 * 1024 * 1024 + 1))
    assert len(s3_client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])) == 1
    committer.process.tasks.take(committer.job_id, attempt.task_attempt_id)  # forget it, as a killed process would
    committer.commit_job([])
    assert_no_pending_uploads(s3_client, s3_bucket)
    writer._aborted = True  # the upload is gone; keep the writer's finaliser from aborting it again
    writer.abort()


def test_an_attempt_tracked_in_memory_cannot_commit_in_another_process_and_says_why(store, s3_client, s3_bucket):
    # A sidecar or worker that died with the attempt's memory: the task fails (and is retried), clearly.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    committer.setup_job()
    process = multiprocessing.get_context("spawn").Process(target=write_only, args=(pickle.dumps(committer), 0))
    process.start()
    process.join(60)
    assert process.exitcode == 0
    attempt = committer.attach_task(committer.new_task_attempt_id(0))
    with pytest.raises(CommitStateError, match=r"was not set up in this process.*the task must run again"):
        committer.commit_task(attempt)
    committer.abort_job()  # the dead writer's upload carries the job id in its key: the job's sweep aborts it
    assert_no_pending_uploads(s3_client, s3_bucket)
