"""The job commit engine: failure roll-back with exact counts, idempotent completion, overwrite plans,
request costs. Against the moto server behind the simulator (profile none)."""

from __future__ import annotations

import threading

import pytest

from s3commit import JobCommitError, S3Store, create_committer
from s3commit.errors import TransientError
from s3commit.model.paths import MAGIC_PATH_PREFIX
from s3commit.store.objects import ObjectRequests
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.conftest import STAGING_AND_MAGIC, store_options_for


class FailingCompletes(UploadRequests):
    """Fails the ``fail_at``-th CompleteMultipartUpload (1-based); records the keys completed and the uploads
    aborted."""

    def __init__(self, requests, bodies, objects):
        super().__init__(requests, bodies, objects)
        self.fail_at = 0
        self.completes = 0
        self.completed_keys = []
        self.aborted_ids = []

    def complete_multipart_upload(self, bucket, key, upload_id, etags, **kwargs):
        self.completes += 1
        if self.completes == self.fail_at:
            raise TransientError(f"Mock Fail on commit {self.fail_at}", operation="CompleteMultipartUpload",
                                 bucket=bucket, key=key, upload_id=upload_id)
        result = super().complete_multipart_upload(bucket, key, upload_id, etags, **kwargs)
        self.completed_keys.append(key)
        return result

    def abort_multipart_upload(self, bucket, key, upload_id):
        self.aborted_ids.append(upload_id)
        super().abort_multipart_upload(bucket, key, upload_id)


class RecordedDeletes(ObjectRequests):
    """Records the key of every DeleteObject."""

    def __init__(self, requests, bodies):
        super().__init__(requests, bodies)
        self.deleted_keys = []

    def delete_object(self, bucket, key):
        self.deleted_keys.append(key)
        super().delete_object(bucket, key)


class FailingStore(S3Store):
    """Fails the n-th CompleteMultipartUpload (1-based), like Hadoop's ``failOnCommit(n)``. ``uploads`` records the
    keys completed and the uploads aborted, ``objects`` the keys deleted one by one."""

    objects_class = RecordedDeletes
    uploads_class = FailingCompletes

    def __init__(self, options, *, fail_complete_at):
        super().__init__(options)
        self.uploads.fail_at = fail_complete_at


def run_tasks(committer, tasks, files, *, data=b"data"):
    committer.setup_job()
    messages = []
    for t in range(tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(t))
        for f in range(files):
            with attempt.open(f"part-{t:05d}-{f}-{committer.job_id}.txt") as out:
                out.write(data)
        messages.append(committer.commit_task(attempt))
    return messages


def user_keys(s3_client, bucket, prefix="out/"):
    return sorted(k for k in list_keys(s3_client, bucket, prefix) if "__" not in k)


@pytest.mark.parametrize("name", STAGING_AND_MAGIC)
def test_commit_job_reverts_completed_uploads_when_one_fails(name, s3_server, s3_client, s3_bucket, tmp_path):
    # Hadoop's testJobCommitFailure: 4 tasks x 3 files, the 6th Complete fails, one thread for a fixed order.
    store = FailingStore(store_options_for(s3_server), fail_complete_at=6)
    committer = create_committer(name, f"s3://{s3_bucket}/out", store=store, threads=1,
                                 staging_dir=str(tmp_path))
    messages = run_tasks(committer, 4, 3)
    with pytest.raises(JobCommitError, match="Mock Fail on commit 6") as err:
        committer.commit_job(messages)
    assert err.value.reverted == 5 and err.value.aborted == 7
    reverted = [k for k in store.objects.deleted_keys if "__" not in k and "_SUCCESS" not in k]
    assert sorted(store.uploads.completed_keys) == sorted(reverted)
    assert user_keys(s3_client, s3_bucket) == []
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert [k for k in list_keys(s3_client, s3_bucket) if MAGIC_PATH_PREFIX in k] == []


def test_completing_an_already_completed_upload_counts_as_done(store, s3_client, s3_bucket):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    messages = run_tasks(committer, 1, 2)
    # Someone (a crashed earlier commit) completed one upload already.
    from s3commit.commit.manifest_store import load_pendingset
    from s3commit.commit.upload_actions import commit_upload

    first = load_pendingset(store, s3_bucket, messages[0].pendingset_key).commits[0]
    commit_upload(store, first)
    committer.commit_job(messages)
    assert len(user_keys(s3_client, s3_bucket)) == 3
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_overwrite_of_whole_destination_happens_after_completion_and_keeps_new_keys(store, s3_client, s3_bucket):
    for key in ("out/old-1.txt", "out/year=2020/old-2.txt", "other/keep.txt"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"old")
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    messages = run_tasks(committer, 2, 1)
    committer.commit_job(messages, delete_paths=[""])
    keys = user_keys(s3_client, s3_bucket)
    assert all(committer.job_id in k or k.endswith("_SUCCESS") for k in keys) and len(keys) == 3
    assert list_keys(s3_client, s3_bucket, "other/") == ["other/keep.txt"]


class ListedDuringCompletes(S3Store):
    """Holds the last Complete of a job until the destination's old files have been listed (up to 10 s), and
    records whether they had, and whether the old files were all still there then."""

    def __init__(self, options, *, files: int, old_keys):
        super().__init__(options)
        listed, completes, seen = threading.Event(), [], {}
        list_objects, complete = self.objects.list_objects, self.uploads.complete_multipart_upload
        list_key_pages = self.objects.list_key_pages

        def listing(bucket, prefix, **kwargs):
            if prefix == "out/":
                listed.set()
            return list_key_pages(bucket, prefix, **kwargs)

        def completing(bucket, key, upload_id, etags, **kwargs):
            completes.append(key)
            if len(completes) == files:
                seen["listed"] = listed.wait(10)
                there = {info.key for info in list_objects(bucket, "out/")}
                seen["old_there"] = set(old_keys) <= there
            return complete(bucket, key, upload_id, etags, **kwargs)

        self.objects.list_key_pages = listing
        self.uploads.complete_multipart_upload = completing
        self.seen = seen


def test_an_overwrite_lists_the_old_files_while_it_completes_and_deletes_them_after(s3_server, s3_client, s3_bucket):
    old = [f"out/old-{n}.txt" for n in range(5)]
    for key in old:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"old")
    store = ListedDuringCompletes(store_options_for(s3_server, lean_requests=False), files=4, old_keys=old)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    committer.commit_job(run_tasks(committer, 2, 2), delete_paths=[""])
    assert store.seen == {"listed": True, "old_there": True}
    keys = user_keys(s3_client, s3_bucket)
    assert not set(old) & set(keys) and len(keys) == 5  # 4 new files, _SUCCESS


def test_overwrite_spares_a_concurrent_jobs_scratch_directory(store, s3_client, s3_bucket):
    other = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    other.setup_job()
    attempt = other.setup_task(other.new_task_attempt_id(0))
    with attempt.open("late.txt") as f:
        f.write(b"x")
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    committer.commit_job(run_tasks(committer, 1, 1), delete_paths=[""])
    other_message = other.commit_task(attempt)  # its .pending files survived the overwrite
    other.commit_job([other_message])
    assert "out/late.txt" in user_keys(s3_client, s3_bucket)


def test_failed_overwrite_job_leaves_the_old_data(s3_server, s3_client, s3_bucket):
    s3_client.put_object(Bucket=s3_bucket, Key="out/old.txt", Body=b"old")
    store = FailingStore(store_options_for(s3_server), fail_complete_at=2)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    messages = run_tasks(committer, 2, 2)
    with pytest.raises(JobCommitError):
        committer.commit_job(messages, delete_paths=[""])
    assert user_keys(s3_client, s3_bucket) == ["out/old.txt"]
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_replace_partitions_replaces_only_the_partitions_written(store, s3_client, s3_bucket):
    for key in ("out/day=1/old.txt", "out/day=2/old.txt", "out/day=2/sub/nested-old.txt"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"old")
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("day=2/new.txt") as f:
        f.write(b"new")
    committer.commit_job([committer.commit_task(attempt)], replace_partitions=True)
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/day=1/old.txt", "out/day=2/new.txt"]


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "per-file-manifests"])
def test_request_cost_of_a_magic_job_commit(store, s3_client, s3_bucket, in_memory):
    # 3 tasks, 10 files; names carry the job id (as Spark's do), so no upload markers are written.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=4,
                                 track_commits_in_memory=in_memory)
    committer.setup_job()
    messages = []
    for t, count in enumerate((4, 3, 3)):
        attempt = committer.setup_task(committer.new_task_attempt_id(t))
        for f in range(count):
            with attempt.open(f"part-{t:05d}-{committer.job_id}-c{f:03d}.txt") as out:
                out.write(b"x")
        messages.append(committer.commit_task(attempt))
    write_side = store.counters.snapshot()["requests"]
    if in_memory:
        # Per file: Create, UploadPart. Per task: PUT pendingset (a first attempt has no earlier one to GET).
        # Per job: PUT its owner record at setup, a LIST of the snapshot log's settings (whether its tasks
        # complete their uploads: s3commit.snapshot.complete-at-task-commit) and a GET of the commit lease (none
        # yet: a lease read free there is taken at commit with one PUT) beside it.
        assert write_side["CreateMultipartUpload"] == 10 and write_side["UploadPart"] == 10
        assert write_side["PutObject"] == 3 + 1
        assert write_side["ListObjectsV2"] == 1 and write_side["GetObject"] == 1
        assert "DeleteObjects" not in write_side
    else:
        # Per file: Create, UploadPart, PUT .pending. Per task: LIST attempt dir, GET old pendingset (404),
        # PUT pendingset, DeleteObjects of the attempt directory.
        assert write_side["CreateMultipartUpload"] == 10 and write_side["UploadPart"] == 10
        assert write_side["PutObject"] == 10 + 3 + 1  # and the job's owner record
        assert write_side["GetObject"] == 3 + 1 and write_side["ListObjectsV2"] == 3 + 1  # the lease, the settings
        assert write_side["DeleteObjects"] == 3
    store.counters.reset()
    committer.commit_job(messages)
    job = store.counters.snapshot()["requests"]
    # N completes + one GET per pendingset + journal PUT + _SUCCESS PUT + cleanup: LIST tasks dir, LIST job dir,
    # DeleteObjects, DELETE journal, ListMultipartUploads (orphan sweep); the lease (none at setup): a PUT to
    # create it, a PUT to free it; the sweep of dead jobs: one delimited LIST of the destination's job directories
    # (none dead); the snapshot log's directory, listed while the lease is taken (empty: _SUCCESS is the commit
    # point; nothing held the lease since the setup read it, so nothing changed the log).
    assert job == {"GetObject": 3, "PutObject": 4, "CompleteMultipartUpload": 10, "ListObjectsV2": 4,
                   "DeleteObjects": 1, "DeleteObject": 1, "ListMultipartUploads": 1}
