"""A job that commits or aborts while a task attempt of it, in the same process, still has a file closing (its
last part uploading in the background): the job waits for that part before its sweep aborts the upload, and
closes the attempt, so that nothing of it lands after the sweep. On SeaweedFS a part that lands after the abort
brings the upload back as pending; on S3 an abort may have to be repeated (AbortMultipartUpload's documentation).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait

import pytest

from s3commit import CommitStateError, S3Store, create_committer
from s3commit.store.objects import ObjectRequests
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, visible_keys
from tests.conftest import store_options_for

JOB_END_GRACE_SECONDS = 0.5
"""How long a job's end is left with its file's part held: one that did not wait for the part aborts the upload
before the part ends."""

HELD_PART_TIMEOUT_SECONDS = 60.0
"""A safety net only: a part never released goes after this long."""

RECORDS_WAIT_SECONDS = 1.0
"""How long a marker's read waits for the job directory's deletion to begin (it never does when the job directory
outlives the reading of the records, as it must)."""


class HeldParts(UploadRequests):
    """Every UploadPart is held until ``release`` is set (a part that ends after its file's close returned); the
    order of part ends and aborts is recorded in ``events``."""

    def __init__(self, requests, bodies, objects):
        super().__init__(requests, bodies, objects)
        self.release = threading.Event()
        self.events: list[tuple[str, str]] = []
        self._events_lock = threading.Lock()

    def _event(self, what, upload_id):
        with self._events_lock:
            self.events.append((what, upload_id))

    def upload_part(self, bucket, key, upload_id, part_number, body, **kwargs):
        self.release.wait(HELD_PART_TIMEOUT_SECONDS)
        sent = super().upload_part(bucket, key, upload_id, part_number, body, **kwargs)
        self._event("part", upload_id)
        return sent

    def abort_multipart_upload(self, bucket, key, upload_id):
        self._event("abort", upload_id)
        super().abort_multipart_upload(bucket, key, upload_id)


class HeldPartStore(S3Store):
    """A store whose UploadParts end only once the test sets ``uploads.release``."""

    uploads_class = HeldParts


@pytest.fixture
def held_committer(s3_server, s3_bucket):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=HeldPartStore(store_options_for(s3_server)),
                                 threads=4, unique_filenames=False)
    yield committer
    committer.store.uploads.release.set()  # a test that failed with a part still held
    committer.close()


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_the_job_waits_for_a_closing_file_before_it_aborts_its_upload(end, held_committer, s3_client, s3_bucket):
    committer = held_committer
    uploads = committer.store.uploads
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-m-00000") as f:  # a key without the job id: recorded by an upload marker
        f.write(b"x" * 100)
    assert uploads.events == []  # the close returned while its part was held: it did not wait for the part
    with ThreadPoolExecutor(1) as side:
        ending = side.submit(committer.commit_job, []) if end == "commit" else side.submit(committer.abort_job)
        done, _ = wait([ending], timeout=JOB_END_GRACE_SECONDS)
        uploads.release.set()
        assert not done, "the job's end did not wait for the part"
        ending.result()
    if end == "commit":
        assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    else:
        assert list_keys(s3_client, s3_bucket, "out/") == []
    events = uploads.events
    assert [e for e, _ in events] == ["part", "abort"], events
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_file_closing_after_its_job_ended_aborts_its_own_upload(held_committer, s3_client, s3_bucket):
    committer = held_committer
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    f = attempt.open("part-m-00000")
    f.write(b"x" * 100)
    committer.commit_job([])  # a straggler: its task never committed, its file is still open
    with pytest.raises(CommitStateError, match="was aborted or committed"):
        f.close()
    assert visible_keys(s3_client, s3_bucket, "out/") == ["out/_SUCCESS"]
    assert_no_pending_uploads(s3_client, s3_bucket)


class MarkersReadLate(ObjectRequests):
    """Reads a task attempt's upload marker only once the job directory is deleted (or after
    RECORDS_WAIT_SECONDS, if it never begins first): the order an in-process S3 such as moto's ``mock_aws``
    produced about once in twenty commits of a job with nothing to commit."""

    def __init__(self, requests, bodies):
        super().__init__(requests, bodies)
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


class LateRecordsStore(S3Store):
    """A store that reads a task attempt's upload marker only once the job directory is deleted
    (:class:`MarkersReadLate`)."""

    objects_class = MarkersReadLate


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
