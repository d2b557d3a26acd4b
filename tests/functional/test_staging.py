"""Staging committers: conflict modes, unique names, parallel parts, task failures."""

from __future__ import annotations

import os

import pytest

from s3commit import CommitConflictError, S3Store, create_committer
from s3commit.config.options import MIB
from s3commit.errors import TransientError
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.conftest import store_options_for


def user_keys(s3_client, bucket, prefix="out/"):
    return sorted(k for k in list_keys(s3_client, bucket, prefix) if "__" not in k)


def one_file_job(committer, relative, data=b"new"):
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open(relative) as f:
        f.write(data)
    return [committer.commit_task(attempt)]


@pytest.fixture
def staging(store, s3_bucket, tmp_path):
    def make(name, **options):
        options.setdefault("unique_filenames", False)
        return create_committer(name, f"s3://{s3_bucket}/out", store=store, staging_dir=str(tmp_path), **options)
    return make


def test_directory_fail_mode_refuses_a_destination_with_data_at_job_setup(staging, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/existing", Body=b"old")
    with pytest.raises(CommitConflictError, match="conflict mode is 'fail'"):
        staging("directory", conflict_mode="fail").setup_job()


def test_directory_fail_mode_accepts_an_empty_destination(staging, s3_client, s3_bucket):
    committer = staging("directory", conflict_mode="fail")
    committer.commit_job(one_file_job(committer, "a.txt"))
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/a.txt"]


@pytest.mark.parametrize("mode", ["append", "replace", "fail"])
def test_directory_committer_refuses_a_destination_that_is_a_file(staging, s3_client, s3_bucket, mode):
    s3_client.put_object(Bucket=s3_bucket, Key="out", Body=b"a file")
    with pytest.raises(CommitConflictError, match="is a file"):
        staging("directory", conflict_mode=mode).setup_job()


def test_directory_append_keeps_old_data(staging, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/old.txt", Body=b"old")
    committer = staging("directory")
    committer.commit_job(one_file_job(committer, "new.txt"))
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/new.txt", "out/old.txt"]


def test_directory_replace_deletes_old_data_after_the_new_is_complete(staging, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/old.txt", Body=b"old")
    s3_client.put_object(Bucket=s3_bucket, Key="out/new.txt", Body=b"old content, same name")
    committer = staging("directory", conflict_mode="replace")
    committer.commit_job(one_file_job(committer, "new.txt"))
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/new.txt"]
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/new.txt")["Body"].read() == b"new"


def test_partitioned_fail_mode_refuses_an_existing_partition_at_task_commit(staging, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/day=1/old.txt", Body=b"old")
    committer = staging("partitioned", conflict_mode="fail")
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for rel in ("day=1/a.txt", "day=2/b.txt"):
        with attempt.open(rel) as f:
            f.write(b"x")
    with pytest.raises(CommitConflictError, match="day=1"):
        committer.commit_task(attempt)
    assert not os.path.exists(attempt.work_path)
    committer.abort_job()
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert user_keys(s3_client, s3_bucket) == ["out/day=1/old.txt"]


def test_partitioned_fail_mode_accepts_new_partitions(staging, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/day=1/old.txt", Body=b"old")
    committer = staging("partitioned", conflict_mode="fail")
    committer.commit_job(one_file_job(committer, "day=3/c.txt"))
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/day=1/old.txt", "out/day=3/c.txt"]


def test_partitioned_replace_replaces_only_written_partitions(staging, s3_client, s3_bucket):
    for key in ("out/day=1/old.txt", "out/day=2/old.txt"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"old")
    committer = staging("partitioned", conflict_mode="replace")
    committer.commit_job(one_file_job(committer, "day=2/new.txt"))
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/day=1/old.txt", "out/day=2/new.txt"]


def test_partitioned_append_adds_to_partitions(staging, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/day=1/old.txt", Body=b"old")
    committer = staging("partitioned")
    committer.commit_job(one_file_job(committer, "day=1/new.txt"))
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/day=1/new.txt", "out/day=1/old.txt"]


def test_unique_filenames_carry_the_job_id(staging, s3_client, s3_bucket):
    committer = staging("directory", unique_filenames=True)
    committer.commit_job(one_file_job(committer, "year=1/part-0000.snappy.parquet"))
    assert f"out/year=1/part-0000-{committer.job_id}.snappy.parquet" in user_keys(s3_client, s3_bucket)


def test_large_file_is_uploaded_in_parallel_parts(staging, store, s3_client, s3_bucket):
    data = os.urandom(11 * MIB)
    committer = staging("directory", part_size=5 * MIB)
    committer.commit_job(one_file_job(committer, "big.bin", data))
    assert store.counters.snapshot()["requests"]["UploadPart"] == 3
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/big.bin")["Body"].read() == data


def test_a_file_with_fewer_parts_than_threads_goes_up_in_smaller_parts(staging, store, s3_client, s3_bucket):
    # One 24 MiB file at a part size of 32 MiB would be one part, uploaded alone while the committer's other
    # threads idle: it goes as three parts of 8 MiB side by side, and arrives whole.
    data = os.urandom(24 * MIB)
    committer = staging("directory", part_size=32 * MIB, threads=8)
    committer.commit_job(one_file_job(committer, "big.bin", data))
    assert store.counters.snapshot()["requests"]["UploadPart"] == 3
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/big.bin")["Body"].read() == data
    assert s3_client.head_object(Bucket=s3_bucket, Key="out/big.bin")["ETag"].endswith('-3"')

    # Many files share the threads: each keeps the configured part size.
    committer = staging("directory", part_size=32 * MIB, threads=2)
    before = store.counters.snapshot()["requests"]["UploadPart"]
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for name in ("a.bin", "b.bin"):
        with attempt.open(name) as f:
            f.write(data)
    committer.commit_job([committer.commit_task(attempt)])
    assert store.counters.snapshot()["requests"]["UploadPart"] - before == 2


def test_hidden_files_are_not_task_output(staging, s3_client, s3_bucket):
    committer = staging("directory")
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for rel in ("_metadata", ".x.partial", "visible.txt"):
        with open(os.path.join(attempt.work_path, rel), "wb") as f:
            f.write(b"x")
    committer.commit_job([committer.commit_task(attempt)])
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/visible.txt"]


class FailingParts(UploadRequests):
    """Fails the ``fail_on_part``-th UploadPart (1-based) with a TransientError."""

    def __init__(self, requests, bodies, objects):
        super().__init__(requests, bodies, objects)
        self.fail_on_part = 0
        self.parts = 0

    def upload_part(self, bucket, key, upload_id, part_number, body, **kwargs):
        self.parts += 1
        if self.parts == self.fail_on_part:
            raise TransientError(f"Mock Fail on upload {self.fail_on_part}", operation="UploadPart",
                                 bucket=bucket, key=key, upload_id=upload_id)
        return super().upload_part(bucket, key, upload_id, part_number, body, **kwargs)


class FailingUploads(S3Store):
    """A store whose ``fail_on_part``-th UploadPart (1-based) fails."""

    uploads_class = FailingParts

    def __init__(self, options, *, fail_on_part):
        super().__init__(options)
        self.uploads.fail_on_part = fail_on_part


def test_task_upload_failure_aborts_every_upload_and_deletes_local_output(s3_server, s3_client, s3_bucket,
                                                                          tmp_path):
    store = FailingUploads(store_options_for(s3_server), fail_on_part=2)
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=store, threads=1,
                                 staging_dir=str(tmp_path))
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for n in range(3):
        with attempt.open(f"f{n}") as f:
            f.write(b"x")
    with pytest.raises(TransientError, match="Mock Fail on upload 2"):
        committer.commit_task(attempt)
    assert not os.path.exists(attempt.work_path)
    assert_no_pending_uploads(s3_client, s3_bucket)
    committer.abort_job()


def test_staging_task_abort_makes_no_s3_request(staging, store):
    committer = staging("partitioned")
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("day=1/x") as f:
        f.write(b"x")
    before = store.counters.snapshot()["total_requests"]
    committer.abort_task(attempt)
    assert store.counters.snapshot()["total_requests"] == before
    assert not os.path.exists(attempt.work_path)
    committer.abort_job()


class FailingPartsAndAborts(FailingParts):
    """Fails the ``fail_on_part``-th UploadPart, and every AbortMultipartUpload."""

    def abort_multipart_upload(self, bucket, key, upload_id):
        raise TransientError("Mock Fail on abort 0", operation="AbortMultipartUpload", bucket=bucket, key=key,
                             upload_id=upload_id)


class FailingUploadsAndAborts(FailingUploads):
    """A store whose ``fail_on_part``-th UploadPart fails, and every AbortMultipartUpload."""

    uploads_class = FailingPartsAndAborts


def test_upload_failure_is_what_propagates_when_the_abort_fails_too(s3_server, s3_client, s3_bucket, tmp_path,
                                                                    caplog):
    store = FailingUploadsAndAborts(store_options_for(s3_server), fail_on_part=1)
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=store, threads=1,
                                 staging_dir=str(tmp_path))
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("f") as f:
        f.write(b"x")
    with pytest.raises(TransientError, match="Mock Fail on upload 1"):
        committer.commit_task(attempt)
    assert "could not abort upload" in caplog.text
    assert not os.path.exists(attempt.work_path)
    # The upload the failed abort left behind is this job's: a job abort through a working store removes it.
    create_committer("directory", f"s3://{s3_bucket}/out", job_id=committer.job_id,
                     store=S3Store(store_options_for(s3_server)), staging_dir=str(tmp_path)).abort_job()
    assert_no_pending_uploads(s3_client, s3_bucket)
