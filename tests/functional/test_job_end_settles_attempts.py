"""A job that commits or aborts while a task attempt of it, in the same process, still has a file closing (its
last part uploading in the background): the job waits for that part before its sweep aborts the upload, and
closes the attempt, so that nothing of it lands after the sweep. On SeaweedFS a part that lands after the abort
brings the upload back as pending; on S3 an abort may have to be repeated (AbortMultipartUpload's documentation).
"""

from __future__ import annotations

import threading
import time

import pytest

from s3commit import CommitStateError, S3Store, create_committer
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, visible_keys
from tests.conftest import store_options_for

PART_DELAY_SECONDS = 0.5


class SlowPartStore(S3Store):
    """Every UploadPart takes PART_DELAY_SECONDS longer; the order of part ends and aborts is recorded."""

    def __init__(self, options):
        super().__init__(options)
        self.events: list[tuple[str, str]] = []
        self._events_lock = threading.Lock()

    def _event(self, what, upload_id):
        with self._events_lock:
            self.events.append((what, upload_id))

    def upload_part(self, bucket, key, upload_id, part_number, body):
        time.sleep(PART_DELAY_SECONDS)
        sent = super().upload_part(bucket, key, upload_id, part_number, body)
        self._event("part", upload_id)
        return sent

    def abort_multipart_upload(self, bucket, key, upload_id):
        self._event("abort", upload_id)
        super().abort_multipart_upload(bucket, key, upload_id)


@pytest.fixture
def slow_committer(s3_server, s3_bucket):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=SlowPartStore(store_options_for(s3_server)),
                                 threads=4, unique_filenames=False)
    yield committer
    committer.close()


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_the_job_waits_for_a_closing_file_before_it_aborts_its_upload(end, slow_committer, s3_client, s3_bucket):
    committer = slow_committer
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    started = time.monotonic()
    with attempt.open("part-m-00000") as f:  # a key without the job id: recorded by an upload marker
        f.write(b"x" * 100)
    assert time.monotonic() - started < PART_DELAY_SECONDS  # the close did not wait for the part
    if end == "commit":
        committer.commit_job([])
        assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    else:
        committer.abort_job()
        assert list_keys(s3_client, s3_bucket, "out/") == []
    events = committer.store.events
    assert [e for e, _ in events] == ["part", "abort"], events
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_file_closing_after_its_job_ended_aborts_its_own_upload(slow_committer, s3_client, s3_bucket):
    committer = slow_committer
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    f = attempt.open("part-m-00000")
    f.write(b"x" * 100)
    committer.commit_job([])  # a straggler: its task never committed, its file is still open
    with pytest.raises(CommitStateError, match="was aborted or committed"):
        f.close()
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    assert_no_pending_uploads(s3_client, s3_bucket)


class LateRecordsStore(S3Store):
    """Reads a task attempt's upload marker only once the job directory is deleted (or after
    RECORDS_WAIT_SECONDS, if it never begins first): the order an in-process S3 such as moto's ``mock_aws``
    produced about once in twenty commits of a job with nothing to commit."""

    def __init__(self, options):
        super().__init__(options)
        self.deleting = threading.Event()

    def get_object(self, bucket, key, **kwargs):
        if key.endswith(".upload"):
            self.deleting.wait(RECORDS_WAIT_SECONDS)
        return super().get_object(bucket, key, **kwargs)

    def delete_objects(self, bucket, keys):
        keys = list(keys)
        deleted = super().delete_objects(bucket, keys)
        if any("/__magic_job-" in f"/{key}" for key in keys):
            self.deleting.set()
        return deleted


RECORDS_WAIT_SECONDS = 1.0


def test_the_job_directory_outlives_the_reading_of_the_records_its_sweep_needs(s3_server, s3_client, s3_bucket):
    # Given: an attempt that never commits, its file's upload known only by its upload marker (no job id in
    # the key), and a store on which reading the marker is slow.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=LateRecordsStore(store_options_for(s3_server)),
                                 threads=4, unique_filenames=False)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-m-00000") as f:
        f.write(b"x" * 100)
    # When: the job commits without it.
    committer.commit_job([])
    committer.close()
    # Then: the sweep read the marker before the job directory went, and aborted the upload.
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    assert_no_pending_uploads(s3_client, s3_bucket)
