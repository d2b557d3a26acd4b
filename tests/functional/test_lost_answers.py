"""Each store method's declared retry semantics, against the simulated S3 with scripted faults.

``fail_next(op, "reset", after_forward=True)`` is the hard case: S3 applied the request and the answer was
lost. For CreateMultipartUpload that leaves an upload nobody was told about (RECORDED: retried, the Create's
window recorded with the upload, the orphan aborted by whoever consumes the record); for a conditional PUT or
Complete the retry meets the first attempt's own effect (VERIFIED: read back, and ours).
"""

from __future__ import annotations

import json
import time

import pytest

from s3commit import create_committer
from s3commit.commit.manifest_store import load_pendingset
from s3commit.errors import PreconditionFailedError
from s3commit.model.object_info import CREATE_WINDOW_KEY
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, list_pending_uploads
from s3commit.transfer.writer import MultipartWriter
from tests.conftest import store_options_for

PART = 5 * 1024 * 1024


@pytest.fixture
def store(s3_sim):
    from s3commit import S3Store

    return S3Store(store_options_for(s3_sim))


def test_the_simulator_reports_when_an_upload_was_initiated(s3_sim, s3_bucket, s3_client):
    before = time.time()
    s3_client.create_multipart_upload(Bucket=s3_bucket, Key="k")
    [upload] = s3_client.list_multipart_uploads(Bucket=s3_bucket)["Uploads"]
    assert before - 1 <= upload["Initiated"].timestamp() <= time.time() + 1


@pytest.mark.parametrize("fault", ["reset-after-forward", "500"])
def test_a_magic_create_that_lost_its_answer_leaves_no_orphan_even_without_the_job_id_in_the_key(
        fault, s3_sim, store, s3_bucket, s3_client):
    # Given: a file whose name does not carry the job id, and a Create whose first attempt S3 applies
    # (or may have applied: a 500) without the client hearing of it.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    if fault == "500":
        s3_sim.fail_next("CreateMultipartUpload", "500")
    else:
        s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)
    with attempt.open("data/part-0.txt") as out:
        out.write(b"hello")
    if fault != "500":  # the orphan exists, next to the upload the retry made
        assert len(list_pending_uploads(s3_client, s3_bucket)) == 2
    # Then: the Create's window travels with the upload into the pendingset...
    message = committer.commit_task(attempt)
    [commit] = load_pendingset(store, s3_bucket, message.pendingset_key).commits
    assert CREATE_WINDOW_KEY in commit.extra_data
    # ... and the job's clean-up aborts the orphan: exact output, nothing pending.
    committer.commit_job([message])
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/data/part-0.txt")["Body"].read() == b"hello"
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_another_writers_upload_of_the_same_key_outside_the_window_is_kept(s3_sim, store, s3_bucket, s3_client):
    # Given: another writer started an upload of the very key a few seconds before our Create lost an answer.
    other = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="out/data/part-0.txt")["UploadId"]
    s3_sim.advance_clock(s3_bucket, 3.5)  # beyond the window's slack (the Date header has a one-second resolution)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)
    with attempt.open("data/part-0.txt") as out:
        out.write(b"ours")
    committer.commit_job([committer.commit_task(attempt)])
    # Then: our orphan is gone; the other writer's upload of the same key is untouched.
    assert [u.upload_id for u in list_pending_uploads(s3_client, s3_bucket)] == [other]
    s3_client.abort_multipart_upload(Bucket=s3_bucket, Key="out/data/part-0.txt", UploadId=other)


def test_the_orphan_of_an_ambiguous_create_is_the_jobs_to_abort_not_the_task_attempts(
        s3_sim, store, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1, part_size=PART)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)
    out = attempt.open("data/part-0.txt")
    out.write(b"x" * PART)  # a whole part: the upload is created (and its part sent) while the task runs
    # The upload marker keeps the window (the attempt directory is all the task leaves behind).
    [marker] = [k for k in list_keys(s3_client, s3_bucket) if k.endswith(".upload")]
    assert CREATE_WINDOW_KEY in json.loads(s3_client.get_object(Bucket=s3_bucket, Key=marker)["Body"].read())
    assert len(list_pending_uploads(s3_client, s3_bucket)) == 2  # the upload and the Create's orphan
    committer.abort_task(attempt)
    # Another attempt of the task may have an upload of this key in the window: the task leaves the orphan, and
    # the record of its window, to the job (whose clean-up keeps what it committed).
    assert len(list_pending_uploads(s3_client, s3_bucket)) == 1
    assert [k for k in list_keys(s3_client, s3_bucket) if k.endswith(".upload")] == [marker]
    committer.abort_job()
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_staging_create_that_lost_its_answer_leaves_no_orphan(s3_sim, store, s3_bucket, s3_client, tmp_path):
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=store, threads=1,
                                 staging_dir=str(tmp_path), unique_filenames=False)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-0.txt") as out:
        out.write(b"staged")
    s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)
    committer.commit_job([committer.commit_task(attempt)])
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/part-0.txt")["Body"].read() == b"staged"
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_plain_write_aborts_its_creates_orphan_itself(s3_sim, store, s3_bucket, s3_client):
    # A file completed on close records nothing anywhere: the writer aborts the orphan once it is done.
    s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)
    with MultipartWriter(store, s3_bucket, "plain/big.bin", part_size=PART, single_put_below=False) as out:
        out.write(b"p" * 10)
    assert s3_client.get_object(Bucket=s3_bucket, Key="plain/big.bin")["Body"].read() == b"p" * 10
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_throttled_create_is_retried_and_records_no_window(s3_sim, store, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    s3_sim.fail_next("CreateMultipartUpload", "503", 2)
    with attempt.open("part-0.txt") as out:
        out.write(b"x")
    message = committer.commit_task(attempt)
    [commit] = load_pendingset(store, s3_bucket, message.pendingset_key).commits
    assert CREATE_WINDOW_KEY not in commit.extra_data
    assert store.counters.snapshot()["retries"]["CreateMultipartUpload"] == 2
    committer.commit_job([message])
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_conditional_put_whose_answer_was_lost_reads_back_its_own_object(s3_sim, store, s3_bucket, s3_client):
    s3_sim.fail_next("PutObject", "reset", after_forward=True)
    store.objects.put_object(s3_bucket, "marker.json", b"ours", if_none_match=True)
    assert s3_client.get_object(Bucket=s3_bucket, Key="marker.json")["Body"].read() == b"ours"
    assert s3_sim.stats().resets_after_forward.get("PutObject") == 1
    assert store.counters.snapshot()["requests"]["GetObject"] == 1  # the read-back


def test_a_conditional_put_meeting_another_object_fails_without_reading_it(s3_sim, store, s3_bucket, s3_client):
    s3_client.put_object(Bucket=s3_bucket, Key="marker.json", Body=b"theirs")
    s3_sim.fail_next("PutObject", "503")
    with pytest.raises(PreconditionFailedError):
        store.objects.put_object(s3_bucket, "marker.json", b"ours", if_none_match=True)
    assert "GetObject" not in store.counters.snapshot()["requests"]
    assert s3_client.get_object(Bucket=s3_bucket, Key="marker.json")["Body"].read() == b"theirs"


def test_a_conditional_complete_whose_answer_was_lost_counts_as_done(s3_sim, store, s3_bucket, s3_client):
    s3_sim.fail_next("CompleteMultipartUpload", "reset", after_forward=True)
    with MultipartWriter(store, s3_bucket, "once.bin", part_size=PART, single_put_below=False,
                         if_none_match=True) as out:
        out.write(b"first")
    assert s3_client.get_object(Bucket=s3_bucket, Key="once.bin")["Body"].read() == b"first"
    assert s3_sim.stats().resets_after_forward.get("CompleteMultipartUpload") == 1
    second = MultipartWriter(store, s3_bucket, "once.bin", part_size=PART, single_put_below=False, if_none_match=True)
    second.write(b"second")
    with pytest.raises(PreconditionFailedError):  # a second writer still loses
        second.close()
    assert s3_client.get_object(Bucket=s3_bucket, Key="once.bin")["Body"].read() == b"first"
    assert_no_pending_uploads(s3_client, s3_bucket)
