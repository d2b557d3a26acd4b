"""Retries under injected faults, through the simulated S3 (one retry owner: the store's tenacity policy)."""

from __future__ import annotations

import pytest

from s3commit import create_committer
from s3commit.testing import FaultSpec
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.conftest import STAGING_AND_MAGIC


@pytest.fixture
def faulty(s3_server):
    """The shared server with faults switched on for one test, and off again afterwards."""
    yield s3_server
    s3_server.reset_simulator()


def job(committer, tasks=3, files=3):
    committer.setup_job()
    messages = []
    for t in range(tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(t))
        for f in range(files):
            with attempt.open(f"part-{t:05d}-{committer.job_id}-c{f:03d}") as out:
                out.write(b"payload-%d-%d" % (t, f))
        messages.append(committer.commit_task(attempt))
    return committer.commit_job(messages)


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_job_succeeds_through_throttling_and_server_errors(name, faulty, store, s3_client, s3_bucket, tmp_path):
    faulty.configure(faults=FaultSpec(rates={"503": 0.08, "500": 0.04}), seed=7)
    success = job(create_committer(name, f"s3://{s3_bucket}/out", store=store, threads=4, staging_dir=str(tmp_path)))
    faulty.configure(faults=None)
    assert len(success.filenames) == 9
    assert len([k for k in list_keys(s3_client, s3_bucket, "out/") if "part-" in k]) == 9
    injected = sum(sum(kinds.values()) for kinds in faulty.stats().faults.values())
    assert injected > 0
    assert sum(store.counters.snapshot()["retries"].values()) == injected
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_complete_whose_response_is_lost_is_not_done_twice(faulty, store, s3_client, s3_bucket):
    # The first Complete reaches S3 and completes the upload, then the connection drops. The retry finds the
    # upload gone (NoSuchUpload); the store checks the object's multipart ETag and counts it as done.
    faulty.fail_next("CompleteMultipartUpload", "reset", 1, after_forward=True)
    success = job(create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1), tasks=1, files=2)
    assert len(success.filenames) == 2
    assert faulty.stats().resets_after_forward.get("CompleteMultipartUpload") == 1
    assert store.counters.snapshot()["retries"]["CompleteMultipartUpload"] == 1
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_complete_answered_200_with_an_error_body_is_retried(faulty, store, s3_client, s3_bucket):
    faulty.fail_next("CompleteMultipartUpload", "200-error", 2)
    success = job(create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1), tasks=1, files=1)
    assert len(success.filenames) == 1
    assert store.counters.snapshot()["retries"]["CompleteMultipartUpload"] == 2


def test_create_retried_after_a_lost_response_leaves_no_orphan(faulty, store, s3_client, s3_bucket):
    # S3 creates the upload but the response is lost: the retry creates a second one. The first is an orphan
    # of this job's key; the job commit's sweep aborts it.
    faulty.fail_next("CreateMultipartUpload", "reset", 1, after_forward=True)
    job(create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1), tasks=1, files=1)
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_part_upload_connection_reset_is_retried_with_the_same_bytes(faulty, store, s3_client, s3_bucket):
    faulty.fail_next("UploadPart", "reset", 2)
    job(create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1), tasks=1, files=1)
    keys = [k for k in list_keys(s3_client, s3_bucket, "out/") if "part-" in k]
    assert s3_client.get_object(Bucket=s3_bucket, Key=keys[0])["Body"].read() == b"payload-0-0"
