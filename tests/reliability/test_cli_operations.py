"""The operator's CLI against the test server: find and abort orphan uploads, inspect manifests, recover.

(moto gives every upload the same initiation date, 2010-11-10, so ``--older-than`` filtering by real ages
is tested against a fake store in ``tests/unit/test_cli.py``; here every upload is "old".)
"""

from __future__ import annotations

import json
import uuid

import pytest

from s3commit import create_committer
from s3commit.testing.assertions import list_pending_uploads
from tests.reliability.helpers import JobSpec, assert_clean, make_store, run_tasks

pytestmark = pytest.mark.integration


def start_uploads(raw, bucket, keys):
    return {key: raw.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"] for key in keys}


def test_uploads_list_shows_the_uploads_under_the_prefix_only(s3_bucket, s3_client, run_cli):
    start_uploads(s3_client, s3_bucket, ["out/a.txt", "out/deep/b.txt", "out-2/c.txt", "outside.txt"])
    result = run_cli("uploads", "list", f"s3://{s3_bucket}/out")
    assert result.code == 0
    assert f"s3://{s3_bucket}/out/a.txt" in result.out and f"s3://{s3_bucket}/out/deep/b.txt" in result.out
    assert "out-2/c.txt" not in result.out and "outside.txt" not in result.out
    assert f"2 pending uploads under s3://{s3_bucket}/out (oldest started" in result.out


def test_uploads_list_by_job_finds_uploads_recorded_in_the_job_directory(s3_server, s3_bucket, s3_client, run_cli):
    # Given: a magic job whose file names do not carry its id, its task not committed yet (the uploads are
    # known only from the task attempt's upload markers and .pending files), and a stranger's upload.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=make_store(s3_server), threads=2,
                                 track_commits_in_memory=False)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for name in ("a.txt", "b.txt"):
        with attempt.open(name) as out:
            out.write(b"x")
    start_uploads(s3_client, s3_bucket, ["out/stranger.txt"])
    # When: the operator lists the job's uploads.
    result = run_cli("uploads", "list", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--json")
    # Then: exactly the job's two.
    keys = sorted(u["key"] for u in json.loads(result.out)["uploads"])
    assert result.code == 0 and keys == ["out/a.txt", "out/b.txt"]
    committer.abort_job()
    run_cli("uploads", "abort", f"s3://{s3_bucket}/out", "--yes")
    assert_clean(s3_client, s3_bucket)


def test_uploads_abort_aborts_under_the_prefix_then_has_nothing_left_to_do(s3_bucket, s3_client, run_cli):
    started = start_uploads(s3_client, s3_bucket, ["out/a.txt", "out/b.txt", "out-2/keep.txt"])
    result = run_cli("uploads", "abort", f"s3://{s3_bucket}/out", "--yes", "--json")
    assert result.code == 0
    data = json.loads(result.out)
    assert data["aborted"] == 2 and data["failed"] == 0
    assert [u.upload_id for u in list_pending_uploads(s3_client, s3_bucket)] == [started["out-2/keep.txt"]]
    again = run_cli("uploads", "abort", f"s3://{s3_bucket}/out", "--yes")
    assert again.code == 3 and "nothing to abort" in again.out
    s3_client.abort_multipart_upload(Bucket=s3_bucket, Key="out-2/keep.txt", UploadId=started["out-2/keep.txt"])


def test_uploads_abort_reports_progress_on_long_runs(s3_bucket, s3_client, run_cli):
    start_uploads(s3_client, s3_bucket, [f"many/part-{i:04d}" for i in range(120)])
    result = run_cli("uploads", "abort", f"s3://{s3_bucket}/many", "--yes")
    assert result.code == 0
    assert "aborted 100/120 uploads ..." in result.err
    assert f"aborted 120 pending uploads under s3://{s3_bucket}/many" in result.out
    assert list_pending_uploads(s3_client, s3_bucket) == []


def test_uploads_abort_of_a_whole_bucket_needs_yes(s3_bucket, s3_client, run_cli):
    start_uploads(s3_client, s3_bucket, ["a.txt", "dir/b.txt"])
    refused = run_cli("uploads", "abort", f"s3://{s3_bucket}")
    assert refused.code == 2 and "whole bucket" in refused.err
    assert len(list_pending_uploads(s3_client, s3_bucket)) == 2
    assert run_cli("uploads", "abort", f"s3://{s3_bucket}", "--yes").code == 0
    assert list_pending_uploads(s3_client, s3_bucket) == []


def test_uploads_in_a_missing_bucket_is_not_found(run_cli):
    result = run_cli("uploads", "list", f"s3://missing-{uuid.uuid4().hex[:8]}/out")
    assert result.code == 3
    assert "does not exist" in result.err


def test_show_reads_manifests_from_s3_at_each_stage_of_a_job(s3_server, s3_bucket, s3_client, run_cli):
    # A magic job, inspected as it goes: a .pending file, a pendingset, then _SUCCESS.
    # Per-file manifests (the in-memory default writes none until the task commits).
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=make_store(s3_server), threads=2,
                                 track_commits_in_memory=False)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("year=2026/part-0.txt") as out:
        out.write(b"hello")
    pending = run_cli("show", f"s3://{s3_bucket}/{attempt.base_key}/year=2026/part-0.txt.pending")
    assert pending.code == 0
    assert f"destination  s3://{s3_bucket}/out/year=2026/part-0.txt" in pending.out
    assert "length       5 B in 1 parts" in pending.out
    message = committer.commit_task(attempt)
    pendingset = run_cli("show", f"s3://{s3_bucket}/{message.pendingset_key}", "--json")
    data = json.loads(pendingset.out)
    assert pendingset.code == 0 and data["kind"] == "pendingset"
    assert data["manifest"]["jobId"] == committer.job_id
    committer.commit_job([message])
    success = run_cli("show", f"s3://{s3_bucket}/out/_SUCCESS")
    assert success.code == 0
    assert f"job id      {committer.job_id}" in success.out
    assert "files       1" in success.out and "/out/year=2026/part-0.txt" in success.out
    missing = run_cli("show", f"s3://{s3_bucket}/out/nope/_SUCCESS")
    assert missing.code == 3 and "GetObject failed" in missing.err
    assert_clean(s3_client, s3_bucket)


def test_recover_of_a_committed_job_has_nothing_to_do(s3_server, s3_bucket, s3_client, run_cli):
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=make_store(s3_server))
    committer.commit_job(run_tasks(committer, JobSpec(tasks=1, files=1)))
    for extra in ([], ["--abort"]):
        result = run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id, *extra)
        assert result.code == 3
        assert f"job {committer.job_id} has committed" in result.out
    result = run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--json")
    assert json.loads(result.out)["changed"] is False


def test_recover_discards_a_job_whose_commit_never_started(s3_server, s3_bucket, s3_client, run_cli):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=make_store(s3_server), threads=2)
    run_tasks(committer, JobSpec(tasks=2, files=2))
    forward = run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id)
    assert forward.code == 3
    assert "its commit never started" in forward.out and "4 pending uploads of the job found" in forward.out
    result = run_cli("recover", f"s3://{s3_bucket}/out", "--job", committer.job_id, "--abort", "--json")
    data = json.loads(result.out)
    assert result.code == 0
    assert data["action"] == "aborted" and data["aborted"] == 4
    assert_clean(s3_client, s3_bucket)
