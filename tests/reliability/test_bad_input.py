"""Bad input: every case gets a clear error that names its cause, loses no data and leaves no orphan upload.

Each test asserts the exception type *and* the key words of its message, then that the old data in the
bucket is intact and nothing is left pending (:func:`assert_nothing_lost`). Inputs come from three places:
the caller (names, options, paths), the store (missing bucket, denied access, unreachable endpoint), and the
manifests other processes wrote (corrupt, truncated, foreign, tampered pendingsets) -- the last are checked
before anything is completed or deleted.
"""

from __future__ import annotations

import json
import os
import re
import socket
import uuid

import pytest

from s3commit import (
    AccessDeniedError,
    CommitConflictError,
    CommitStateError,
    ConfigError,
    EndpointUnreachableError,
    JobCommitError,
    ManifestError,
    NoSuchBucketError,
    S3Store,
    create_committer,
)
from s3commit.config.options import MIB, MIN_PART_SIZE, CommitterOptions, RetryPolicy, StoreOptions
from s3commit.model.task_message import TaskCommitMessage
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import count_requests, list_keys, list_pending_uploads
from s3commit.transfer.writer import TooManyPartsError
from tests.conftest import MAGIC_IN_DEFAULT_TIER
from tests.reliability.helpers import (
    JobSpec,
    assert_clean,
    expected_objects,
    make_store,
    read,
    run_tasks,
    store_options,
    success_json,
    user_keys,
)

pytestmark = pytest.mark.integration

OLD = "out/keep/old.txt"


@pytest.fixture
def bucket(s3_sim):
    """A bucket whose destination ``out/`` already holds data that no failure may touch."""
    name = s3_sim.create_bucket(f"bad-{uuid.uuid4().hex[:12]}")
    s3_sim.client(raw=True).put_object(Bucket=name, Key=OLD, Body=b"old data")
    return name


@pytest.fixture
def raw(s3_sim):
    return s3_sim.client(raw=True)


def assert_nothing_lost(raw, bucket, *, committed=()) -> None:
    """The old data is intact, only ``committed`` keys were added, and nothing is pending or left over."""
    assert read(raw, bucket, OLD) == b"old data"
    assert user_keys(raw, bucket) == sorted([OLD, *committed])
    assert_clean(raw, bucket)


def committer_for(s3_sim, bucket, name="magic", tmp_path=None, **options):
    staging = {"staging_dir": str(tmp_path / "staging")} if tmp_path is not None else {}
    options = {"threads": 2, **staging, **options}
    return create_committer(name, f"s3://{bucket}/out", store=make_store(s3_sim), **options)


def pendingset_keys(raw, bucket):
    return [k for k in list_keys(raw, bucket, "out/") if k.endswith(".pendingset")]


def rewrite(raw, bucket, key, change):
    """Replace the JSON of ``key`` with ``change(json)`` (or raw bytes if ``change`` returns bytes)."""
    data = json.loads(read(raw, bucket, key))
    new = change(data)
    raw.put_object(Bucket=bucket, Key=key, Body=new if isinstance(new, bytes) else json.dumps(new).encode())


def commit_fails(s3_sim, committer, messages, error, *words):
    """commit_job raises ``error`` naming ``words``, having completed nothing."""
    with count_requests(s3_sim) as requests, pytest.raises(error) as caught:
        committer.commit_job(messages)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    assert requests["CompleteMultipartUpload"] == 0, "something was completed before validation failed"
    return caught.value


# --- the store: bucket, access, endpoint -------------------------------------------------------------


def test_missing_bucket_is_named_at_job_setup(s3_sim):
    committer = create_committer("magic", "s3://no-such-bucket-s3commit/out", store=make_store(s3_sim))
    with pytest.raises(NoSuchBucketError, match="bucket 'no-such-bucket-s3commit' does not exist"):
        committer.setup_job()


def deny_writes_under_out(raw, bucket):
    policy = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": f"arn:aws:s3:::{bucket}/out/new/*"}]}
    raw.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))


def test_access_denied_by_a_bucket_policy_names_the_operation_and_object(s3_sim, bucket, raw):
    # moto server enforces an explicit Deny in a bucket policy on object requests (403, empty body).
    deny_writes_under_out(raw, bucket)
    committer = create_committer("magic", f"s3://{bucket}/out/new", store=make_store(s3_sim))
    with pytest.raises(AccessDeniedError) as caught:
        committer.setup_job()  # its first write: the job's owner record, in its own scratch directory
    assert "PutObject failed for s3://" in str(caught.value)
    assert f"{bucket}/out/new/__magic_job-{committer.job_id}/" in str(caught.value)
    assert "403" in str(caught.value)
    raw.delete_bucket_policy(Bucket=bucket)
    assert_nothing_lost(raw, bucket)


def test_access_denied_on_the_first_upload_fails_the_write_and_leaves_no_upload(s3_sim, bucket, raw):
    committer = create_committer("magic", f"s3://{bucket}/out/new", store=make_store(s3_sim), success_marker=False)
    committer.setup_job()
    deny_writes_under_out(raw, bucket)  # from here on
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    # The Create runs in the background as the file opens: its failure surfaces at the close if it is known by
    # then, else at the task commit, which names the file.
    with pytest.raises((AccessDeniedError, CommitStateError),
                       match=r"CreateMultipartUpload failed for s3://.*/out/new/f.txt.*403"):
        with attempt.open("f.txt") as out:
            out.write(b"data")
        committer.commit_task(attempt)
    raw.delete_bucket_policy(Bucket=bucket)
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


class NoUploadListing(UploadRequests):
    """A role without s3:ListBucketMultipartUploads (moto does not enforce IAM, so the store refuses)."""

    def list_multipart_uploads(self, bucket, prefix):
        raise AccessDeniedError("Access Denied", operation="ListMultipartUploads", bucket=bucket, key=prefix,
                                code="AccessDenied")


class NoUploadListingStore(S3Store):
    """A store whose role may not list multipart uploads (:class:`NoUploadListing`)."""

    uploads_class = NoUploadListing


def test_a_role_that_may_not_list_uploads_still_commits_and_says_why_it_skipped_the_sweep(
        s3_sim, bucket, raw, caplog):
    # S3A's HADOOP-17547: the orphan sweep at the end of the commit needs s3:ListBucketMultipartUploads. The
    # output is committed and _SUCCESS written before the sweep, so the sweep's failure must not fail the job.
    store = NoUploadListingStore(store_options(s3_sim))
    committer = create_committer("magic", f"s3://{bucket}/out", store=store, threads=2)
    spec = JobSpec(tasks=2, files=1, job_id_in_names=True)
    committer.commit_job(run_tasks(committer, spec))
    assert "could not sweep orphan uploads" in caplog.text
    assert "s3commit.abort.orphans=false" in caplog.text
    assert "ListMultipartUploads failed" in caplog.text and "AccessDenied" in caplog.text
    assert_nothing_lost(raw, bucket, committed=expected_objects(committer, spec))


def test_unreachable_endpoint_is_reported_with_the_attempts_made():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = S3Store(StoreOptions(endpoint_url=f"http://127.0.0.1:{port}", region="us-east-1", path_style=True,
                                 access_key="a", secret_key="b",
                                 retry=RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01)))
    committer = create_committer("magic", "s3://bucket/out", store=store)
    with pytest.raises(EndpointUnreachableError) as caught:
        committer.setup_job()
    assert "Could not connect to the endpoint URL" in str(caught.value)
    assert "after 2 attempts" in str(caught.value)


# --- the caller: names, options, paths -----------------------------------------------------------------


def test_unknown_committer_name_lists_the_valid_ones(bucket, raw):
    with pytest.raises(ConfigError, match=re.escape("'magical' is not a valid committer name. Valid "
                                                    "values are: magic, directory, partitioned")):
        create_committer("magical", f"s3://{bucket}/out")
    assert_nothing_lost(raw, bucket)


def test_unknown_conflict_mode_lists_the_valid_ones(bucket, raw):
    with pytest.raises(ConfigError, match=re.escape("'merge' is not a valid conflict mode. Valid values "
                                                    "are: fail, append, replace")):
        create_committer("directory", f"s3://{bucket}/out", conflict_mode="merge")
    assert_nothing_lost(raw, bucket)


def test_unknown_conflict_mode_in_hadoop_configuration_names_the_key():
    with pytest.raises(ConfigError, match=re.escape("fs.s3a.committer.staging.conflict-mode")):
        CommitterOptions.from_hadoop_conf({"fs.s3a.committer.staging.conflict-mode": "MERGE"})


def test_unknown_committer_option_lists_the_valid_ones(bucket):
    with pytest.raises(ConfigError, match=r"unknown committer option.*threadz.*Valid options are"):
        create_committer("magic", f"s3://{bucket}/out", threadz=4)


def test_part_size_under_5_mib_is_refused(bucket):
    with pytest.raises(ConfigError, match=r"part_size 4194304 is below S3's minimum part size .*5 MiB"):
        create_committer("magic", f"s3://{bucket}/out", part_size=4 * MIB)


def test_part_size_under_5_mib_in_hadoop_configuration_is_refused():
    with pytest.raises(ConfigError, match="below S3's minimum part size"):
        CommitterOptions.from_hadoop_conf({"fs.s3a.multipart.size": "4M"})


def test_part_size_that_is_not_a_size_names_the_key():
    with pytest.raises(ConfigError, match=re.escape("fs.s3a.multipart.size: 'lots' is not a size")):
        CommitterOptions.from_hadoop_conf({"fs.s3a.multipart.size": "lots"})


def test_destination_with_another_scheme_is_refused():
    with pytest.raises(ConfigError, match="scheme 'hdfs'; valid schemes are: s3, s3a"):
        create_committer("magic", "hdfs://namenode/out")


def test_destination_without_a_bucket_is_refused():
    with pytest.raises(ConfigError, match="names no bucket"):
        create_committer("magic", "s3:///out")


def test_job_id_that_could_escape_the_job_directory_is_refused(bucket):
    with pytest.raises(ConfigError, match=re.escape("job id '../evil' must be 1-128 characters")):
        create_committer("magic", f"s3://{bucket}/out", job_id="../evil")


def test_malformed_task_attempt_id_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    committer.setup_job()
    with pytest.raises(ConfigError, match="task attempt id 'task-3' is not of the form attempt_"):
        committer.setup_task("task-3")
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


@pytest.mark.parametrize(("path", "words"), [
    ("year=2026/../../etc/passwd", "has an empty, '.' or '..' element"),
    ("/etc/passwd", "must be relative to the destination"),
    ("a/\x07bell.txt", "contains a control character"),
    ("__magic_job-123/x.txt", "uses a name reserved by s3commit"),
    ("d/" + "x" * 1100, "longer than S3's 1,024-byte key limit"),
], ids=["dot-dot", "absolute", "control-character", "reserved-name", "too-long"])
def test_bad_file_path_is_refused_before_any_upload(path, words, s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with count_requests(s3_sim) as requests, pytest.raises(ConfigError) as caught:
        attempt.open(path)
    assert words in str(caught.value)
    assert requests["CreateMultipartUpload"] == 0
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


def test_sse_algorithm_that_s3_does_not_know_is_refused():
    message = "sse_algorithm 'DES' is not valid. Valid values are: AES256, aws:kms"
    with pytest.raises(ConfigError, match=re.escape(message)):
        StoreOptions(sse_algorithm="DES")


# --- the manifests -------------------------------------------------------------------------------------


def test_corrupt_pendingset_fails_the_commit_before_anything_is_completed(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    spec = JobSpec(tasks=2, files=2, job_id_in_names=True)
    messages = run_tasks(committer, spec)
    key = pendingset_keys(raw, bucket)[1]
    raw.put_object(Bucket=bucket, Key=key, Body=b"\x00\xffgarbage{")
    commit_fails(s3_sim, committer, messages, ManifestError, key, "not valid JSON")
    assert_nothing_lost(raw, bucket)


def test_truncated_pendingset_fails_the_commit_naming_the_file(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=2, files=2, job_id_in_names=True))
    key = pendingset_keys(raw, bucket)[0]
    whole = read(raw, bucket, key)
    raw.put_object(Bucket=bucket, Key=key, Body=whole[: len(whole) // 2])
    commit_fails(s3_sim, committer, messages, ManifestError, key, "not valid JSON")
    assert_nothing_lost(raw, bucket)


def test_pendingset_of_a_foreign_version_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=2, files=2, job_id_in_names=True))
    key = pendingset_keys(raw, bucket)[0]
    rewrite(raw, bucket, key, lambda d: {**d, "version": 99})
    commit_fails(s3_sim, committer, messages, ManifestError, key, "Wrong version: 99",
                 "must have version 3")
    assert_nothing_lost(raw, bucket)


def test_pendingset_pointing_outside_the_destination_is_refused_and_the_foreign_upload_untouched(
        s3_sim, bucket, raw):
    # Given: a tampered pendingset naming an upload of s3://b/elsewhere/, outside the destination.
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=1, files=2, job_id_in_names=True))
    foreign = raw.create_multipart_upload(Bucket=bucket, Key="elsewhere/evil.txt")["UploadId"]
    etag = raw.upload_part(Bucket=bucket, Key="elsewhere/evil.txt", UploadId=foreign, PartNumber=1,
                           Body=b"evil")["ETag"]
    key = pendingset_keys(raw, bucket)[0]

    def point_elsewhere(data):
        data["commits"][0].update(destinationKey="elsewhere/evil.txt", uploadId=foreign, etags=[etag])
        return data

    rewrite(raw, bucket, key, point_elsewhere)
    # Then: refused, nothing completed, and the upload outside the destination neither completed nor aborted.
    commit_fails(s3_sim, committer, messages, ManifestError, "s3://", "elsewhere/evil.txt",
                 "points outside the destination")
    assert [u.upload_id for u in list_pending_uploads(raw, bucket, "elsewhere/")] == [foreign]
    raw.abort_multipart_upload(Bucket=bucket, Key="elsewhere/evil.txt", UploadId=foreign)
    assert_nothing_lost(raw, bucket)


def test_pendingset_pointing_to_another_bucket_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=1, files=2, job_id_in_names=True))
    key = pendingset_keys(raw, bucket)[0]
    rewrite(raw, bucket, key, lambda d: {**d, "commits": [{**d["commits"][0], "bucket": "victim-bucket"},
                                                          *d["commits"][1:]]})
    commit_fails(s3_sim, committer, messages, ManifestError, "s3://victim-bucket/", "another bucket")
    assert_nothing_lost(raw, bucket)


def test_pendingset_key_climbing_out_with_dot_dot_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=1, files=2, job_id_in_names=True))
    key = pendingset_keys(raw, bucket)[0]
    rewrite(raw, bucket, key, lambda d: {**d, "commits": [{**d["commits"][0], "destinationKey": "out/../etc/x"},
                                                          *d["commits"][1:]]})
    commit_fails(s3_sim, committer, messages, ManifestError, "'out/../etc/x'", "'..' element")
    assert_nothing_lost(raw, bucket)


def test_two_tasks_writing_the_same_destination_key_are_refused(s3_sim, bucket, raw):
    # Given: two tasks that each write "part-0.txt" (a buggy engine, or a job without unique names).
    committer = committer_for(s3_sim, bucket)
    committer.setup_job()
    messages = []
    for task in range(2):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        with attempt.open("part-0.txt") as out:
            out.write(b"task %d" % task)
        messages.append(committer.commit_task(attempt))
    commit_fails(s3_sim, committer, messages, ManifestError, "out/part-0.txt", "written by more than one task")
    assert_nothing_lost(raw, bucket)


def test_one_pendingset_writing_a_key_twice_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=1, files=2, job_id_in_names=True))
    key = pendingset_keys(raw, bucket)[0]
    rewrite(raw, bucket, key, lambda d: {**d, "commits": [d["commits"][0], {**d["commits"][1], "destinationKey":
                                                                              d["commits"][0]["destinationKey"]}]})
    commit_fails(s3_sim, committer, messages, ManifestError, "is written to by more than one pending commit")
    assert_nothing_lost(raw, bucket)


def test_an_invalid_pendingset_is_never_trusted_even_to_abort_its_uploads(s3_sim, bucket, raw, run_cli):
    # Given: a job whose file names do not carry its id, and one of its pendingsets of a foreign version.
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=2, files=2, job_id_in_names=False))
    key = pendingset_keys(raw, bucket)[0]
    rewrite(raw, bucket, key, lambda d: {**d, "version": 99})
    # When: the commit fails validation and the job is aborted.
    commit_fails(s3_sim, committer, messages, ManifestError, "Wrong version: 99")
    # Then: the uploads of the valid pendingset were aborted; those named only by the invalid one were not
    # (an invalid manifest could name anybody's upload), and their keys give no job to attribute them to.
    left = list_pending_uploads(raw, bucket, "out/")
    assert [u.key for u in left] == ["out/part=0/part-00000-0.txt", "out/part=0/part-00000-1.txt"]
    # The operator's way out (docs/operations.md): find and abort them by age or prefix.
    listed = run_cli("uploads", "list", f"s3://{bucket}/out", "--json")
    assert json.loads(listed.out)["count"] == 2
    assert run_cli("uploads", "abort", f"s3://{bucket}/out", "--yes").code == 0
    assert_nothing_lost(raw, bucket)


def test_pendingset_of_another_job_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=2, files=1))
    key = pendingset_keys(raw, bucket)[0]
    rewrite(raw, bucket, key, lambda d: {**d, "jobId": "another-job"})
    commit_fails(s3_sim, committer, messages, ManifestError, f"Mismatch in Job ID ({committer.job_id}) and "
                 "commit job ID (another-job)")
    assert_nothing_lost(raw, bucket)


def test_task_commit_message_of_another_job_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=1, files=1))
    stranger = TaskCommitMessage(job_id="other-job", task_id="t", task_attempt_id="a", pendingset_key="k",
                                 files=1, bytes=1)
    with pytest.raises(ConfigError, match=f"task commit message of job other-job given to job {committer.job_id}"):
        committer.commit_job([*messages, stranger])
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


def test_corrupt_pending_file_from_another_process_fails_the_task_commit_and_aborts_its_uploads(
        s3_sim, bucket, raw):
    # Given: a task attempt whose directory holds a .pending file another process wrote, corrupted.
    committer = committer_for(s3_sim, bucket)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("good.txt") as out:
        out.write(b"good")
    bad_key = f"{attempt.base_key}/other.txt.pending"
    raw.put_object(Bucket=bucket, Key=bad_key, Body=b'{"version": 2, "etags": "nope"}')
    # When: the task commits; then: refused naming the file, and its good upload aborted too.
    with pytest.raises(ManifestError, match=f"s3://{bucket}/{bad_key}: etags is not a list"):
        committer.commit_task(attempt)
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


def test_upload_aborted_by_someone_else_fails_the_commit_and_rolls_back(s3_sim, bucket, raw):
    # Given: one of the job's uploads aborted behind its back (another tool, a lifecycle rule).
    committer = committer_for(s3_sim, bucket, threads=1)
    messages = run_tasks(committer, JobSpec(tasks=2, files=2))
    victim = list_pending_uploads(raw, bucket, "out/")[-1]
    raw.abort_multipart_upload(Bucket=bucket, Key=victim.key, UploadId=victim.upload_id)
    # When/then: the commit fails naming NoSuchUpload, and everything it had completed is deleted again.
    with pytest.raises(JobCommitError, match="NoSuchUpload") as caught:
        committer.commit_job(messages)
    assert victim.key in str(caught.value)
    assert_nothing_lost(raw, bucket)


# --- lifecycle misuse -----------------------------------------------------------------------------------


def test_second_commit_job_is_refused_and_the_output_unchanged(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    spec = JobSpec(tasks=2, files=1)
    messages = run_tasks(committer, spec)
    committer.commit_job(messages)
    with pytest.raises(CommitStateError, match=f"job {committer.job_id} is already committed; a job commits once"):
        committer.commit_job(messages)
    assert_nothing_lost(raw, bucket, committed=expected_objects(committer, spec))


def test_second_commit_of_a_job_from_another_process_returns_the_committed_success_marker(s3_sim, bucket, raw):
    # A commit re-sent after the first one finished (its sidecar died before answering): the same messages,
    # their pendingsets gone; _SUCCESS names the job and counts their files, so the commit is done.
    committer = committer_for(s3_sim, bucket)
    spec = JobSpec(tasks=2, files=1)
    messages = run_tasks(committer, spec)
    first = committer.commit_job(messages)
    again = create_committer("magic", f"s3://{bucket}/out", job_id=committer.job_id, store=make_store(s3_sim))
    assert again.commit_job(messages) == first
    assert_nothing_lost(raw, bucket, committed=expected_objects(committer, spec))


def test_commit_of_other_messages_of_a_committed_job_finds_its_pendingsets_gone(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    spec = JobSpec(tasks=2, files=1)
    messages = run_tasks(committer, spec)
    committer.commit_job(messages[:1])
    again = create_committer("magic", f"s3://{bucket}/out", job_id=committer.job_id, store=make_store(s3_sim))
    with pytest.raises(CommitStateError, match="is missing: was the job already committed or aborted"):
        again.commit_job(messages)


def test_write_to_a_committed_task_attempt_is_refused(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    committer.commit_task(attempt)
    with pytest.raises(CommitStateError, match=f"task attempt {attempt.task_attempt_id} is already committed"):
        attempt.open("late.txt")
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


@pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)
def test_commit_job_with_no_tasks_writes_a_success_marker_listing_no_files(name, s3_sim, bucket, raw, tmp_path):
    # Hadoop's behaviour, kept: a job with no output still commits, and _SUCCESS says it wrote nothing.
    committer = committer_for(s3_sim, bucket, name, tmp_path)
    committer.setup_job()
    success = committer.commit_job([])
    marker = success_json(raw, bucket)
    assert marker["jobId"] == committer.job_id and marker["filenames"] == []
    assert marker["metrics"]["committer_files"] == 0
    assert success.filenames == ()
    assert_nothing_lost(raw, bucket)


def test_directory_committer_refuses_a_destination_that_is_a_file(s3_sim, bucket, raw, tmp_path):
    raw.put_object(Bucket=bucket, Key="out/keep/file", Body=b"a file")
    committer = create_committer("directory", f"s3://{bucket}/out/keep/file", store=make_store(s3_sim),
                                 staging_dir=str(tmp_path))
    with pytest.raises(CommitConflictError, match=f"output path s3://{bucket}/out/keep/file is a file"):
        committer.setup_job()
    raw.delete_object(Bucket=bucket, Key="out/keep/file")
    assert_nothing_lost(raw, bucket)


def test_conflict_mode_fail_refuses_a_destination_with_data(s3_sim, bucket, raw, tmp_path):
    committer = committer_for(s3_sim, bucket, "directory", tmp_path, conflict_mode="fail")
    with pytest.raises(CommitConflictError, match="has data and the conflict mode is 'fail'"):
        committer.setup_job()
    assert_nothing_lost(raw, bucket)


# --- awkward but valid data ----------------------------------------------------------------------------


ODD_NAMES = [
    "año=2026/naïve café – 文件 🎉.txt",
    "nfc/\u00e9.txt",            # é, composed
    "nfd/e\u0301.txt",           # e + combining acute: a different key, kept apart
    "rtl/\u200fשלום\u200f.txt",  # right-to-left marks
    "zwj/👩\u200d💻 file.txt",    # zero-width joiner
    "space and +plus& amp?.txt",
    "ｆｕｌｌｗｉｄｔｈ.txt",
]


@pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)
def test_odd_unicode_in_file_names_commits_byte_exact_keys(name, s3_sim, bucket, raw, tmp_path):
    committer = committer_for(s3_sim, bucket, name, tmp_path)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for relative in ODD_NAMES:
        with attempt.open(relative) as out:
            out.write(relative.encode())
    committer.commit_job([committer.commit_task(attempt)])
    from tests.reliability.helpers import final_key

    expected = {final_key(name, "out", r, committer.job_id): r.encode() for r in ODD_NAMES}
    assert all(read(raw, bucket, k) == v for k, v in expected.items())
    assert_nothing_lost(raw, bucket, committed=expected)


@pytest.mark.parametrize("name", MAGIC_IN_DEFAULT_TIER)
def test_zero_byte_files_commit_as_empty_objects(name, s3_sim, bucket, raw, tmp_path):
    committer = committer_for(s3_sim, bucket, name, tmp_path)
    spec = JobSpec(tasks=2, files=2, payload=b"")
    spec.body = lambda task, index: b""  # type: ignore[method-assign]
    committer.commit_job(run_tasks(committer, spec))
    expected = expected_objects(committer, spec)
    for key in expected:
        assert raw.head_object(Bucket=bucket, Key=key)["ContentLength"] == 0
    assert_nothing_lost(raw, bucket, committed=expected)


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_staged_file_needing_more_than_10000_parts_fails_before_any_upload(name, s3_sim, bucket, raw, tmp_path):
    # A sparse local file of 50 GiB + 1 byte: at 5 MiB per part it needs 10,001 parts. It costs no disk.
    committer = committer_for(s3_sim, bucket, name, tmp_path, part_size=MIN_PART_SIZE)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("huge.bin") as out:
        out.truncate(10_000 * MIN_PART_SIZE + 1)
    assert os.path.getsize(os.path.join(attempt.work_path, "huge.bin")) == 10_000 * MIN_PART_SIZE + 1
    with count_requests(s3_sim) as requests, pytest.raises(TooManyPartsError) as caught:
        committer.commit_task(attempt)
    assert "needs 10001 parts at part size 5242880; S3 allows 10000: raise fs.s3a.multipart.size" in str(caught.value)
    assert requests["CreateMultipartUpload"] == 0
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


def test_streamed_file_outgrowing_the_part_limit_is_aborted_before_it_is_published(
        s3_sim, bucket, raw, monkeypatch):
    # The writer's check runs on the part that crosses the limit; to reach it without streaming 50 GB, the
    # limit is lowered to 2 parts (the code path is the one a 10,001st part takes).
    monkeypatch.setattr("s3commit.transfer.writer.MAX_PARTS", 2)
    committer = committer_for(s3_sim, bucket, part_size=MIN_PART_SIZE)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with pytest.raises(TooManyPartsError) as caught, attempt.open("huge.bin") as out:
        for _ in range(3):
            out.write(b"\0" * MIN_PART_SIZE)
    assert "needs more than 2 parts at part size 5242880" in str(caught.value)
    assert "The upload was aborted; nothing was published" in str(caught.value)
    assert list_pending_uploads(raw, bucket) == []
    committer.abort_job()
    assert_nothing_lost(raw, bucket)


# --- recovery input -------------------------------------------------------------------------------------


def test_recover_refuses_a_corrupt_journal_with_exit_code_2(s3_sim, bucket, raw, run_cli):
    job_id = str(uuid.uuid4())
    key = f"out/__magic_job-{job_id}/job-{job_id}/00/_commit-journal.json"
    raw.put_object(Bucket=bucket, Key=key, Body=b'{"name": "something else"}')
    result = run_cli("recover", f"s3://{bucket}/out", "--job", job_id)
    assert result.code == 2
    assert f"s3://{bucket}/{key}: not a commit journal" in result.err
    assert read(raw, bucket, key)  # left for the operator to inspect
    raw.delete_object(Bucket=bucket, Key=key)
    assert_nothing_lost(raw, bucket)


def test_recover_refuses_a_journal_naming_another_destination(s3_sim, bucket, raw, run_cli):
    job_id = str(uuid.uuid4())
    key = f"out/__magic_job-{job_id}/job-{job_id}/00/_commit-journal.json"
    journal = {"name": "s3commit.CommitJournal/1", "jobId": job_id, "committer": "magic", "bucket": bucket,
               "destKey": "somewhere-else", "pendingsets": []}
    raw.put_object(Bucket=bucket, Key=key, Body=json.dumps(journal).encode())
    result = run_cli("recover", f"s3://{bucket}/out", "--job", job_id, "--abort")
    assert result.code == 2
    assert f"journal is for s3://{bucket}/somewhere-else, not s3://{bucket}/out" in result.err
    raw.delete_object(Bucket=bucket, Key=key)
    assert_nothing_lost(raw, bucket)


@pytest.mark.parametrize(("tampered", "words"), [
    ("out/a/../b.txt", "has an empty, '.' or '..' element"),
    ("out/./b.txt", "has an empty, '.' or '..' element"),
    ("out//b.txt", "has an empty, '.' or '..' element"),
    ("out/a/", "has an empty, '.' or '..' element"),
    ("out/p=1/__magic_job-1/b.txt", "points outside the destination"),
    ("out/__s3commit_lease", "points outside the destination"),
], ids=["dot-dot", "dot", "empty", "trailing-slash", "scratch-element", "lease"])
def test_pendingset_naming_a_key_no_file_may_have_is_refused(tampered, words, s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    messages = run_tasks(committer, JobSpec(tasks=1, files=2, job_id_in_names=True))
    key = pendingset_keys(raw, bucket)[0]

    def point_at(data):
        data["commits"][0]["destinationKey"] = tampered
        return data

    rewrite(raw, bucket, key, point_at)
    commit_fails(s3_sim, committer, messages, ManifestError, words)
    assert_nothing_lost(raw, bucket)


def test_keys_that_only_look_like_scratch_or_dot_elements_are_committed(s3_sim, bucket, raw):
    committer = committer_for(s3_sim, bucket)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    names = [".hidden/a__magic_job-1.txt", "p=__x/..b.txt", "a..b/.c"]
    for name in names:
        with attempt.open(name) as out:
            out.write(name.encode())
    committer.commit_job([committer.commit_task(attempt)])
    for name in names:
        assert read(raw, bucket, f"out/{name}") == name.encode()
