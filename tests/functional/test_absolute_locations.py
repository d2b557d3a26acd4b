"""Files for absolute locations outside the destination (Spark's custom partition locations), through the
magic committer: invisible before the job commit, completed with the job, replaced by a dynamic overwrite,
rolled back with it, and accepted only in directories a committed task declared."""

from __future__ import annotations

import pytest

from s3commit import ConfigError, JobCommitError, ManifestError, create_committer
from s3commit.commit.engine import CommitEngine, OverwritePlan
from s3commit.commit.manifest_store import load_pendingset
from s3commit.commit.recovery import RecoveryAction, RecoveryError, recover
from s3commit.commit.upload_actions import commit_upload
from s3commit.store.objects import ObjectRequests
from s3commit.store.s3store import S3Store
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.conftest import store_options_for
from tests.functional.test_job_commit import FailingStore, user_keys


def write_job(committer, bucket, *, absolute="elsewhere/p=1"):
    """Task 0 writes one file under the destination and one to ``s3://bucket/<absolute>``."""
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open(f"p=0/part-00000-{committer.job_id}.txt") as out:
        out.write(b"inside")
    with attempt.open_absolute(f"s3a://{bucket}/{absolute}", f"part-00000-{committer.job_id}.txt") as out:
        out.write(b"outside")
    return attempt


def test_a_file_for_an_absolute_location_appears_there_at_job_commit(store, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    attempt = write_job(committer, s3_bucket)
    message = committer.commit_task(attempt)
    assert message.absolute_dirs == ("elsewhere/p=1",)
    # Nothing visible before the job commit, inside or outside the destination.
    assert user_keys(s3_client, s3_bucket) == [] and user_keys(s3_client, s3_bucket, "elsewhere/") == []
    success = committer.commit_job([message])
    outside = f"elsewhere/p=1/part-00000-{committer.job_id}.txt"
    assert s3_client.get_object(Bucket=s3_bucket, Key=outside)["Body"].read() == b"outside"
    assert f"/{outside}" in success.filenames and success.metrics["committer_commits_completed"] == 2
    assert [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k] == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_dynamic_overwrite_replaces_the_absolute_directory_it_wrote(store, s3_bucket, s3_client):
    s3_client.put_object(Bucket=s3_bucket, Key="elsewhere/p=1/old.txt", Body=b"old")
    s3_client.put_object(Bucket=s3_bucket, Key="elsewhere/p=2/old.txt", Body=b"untouched")
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    message = committer.commit_task(write_job(committer, s3_bucket))
    committer.commit_job([message], replace_partitions=True)
    assert list_keys(s3_client, s3_bucket, "elsewhere/") == [
        f"elsewhere/p=1/part-00000-{committer.job_id}.txt", "elsewhere/p=2/old.txt"]


def test_a_deletion_of_an_absolute_location_waits_for_the_job_commit(store, s3_bucket, s3_client):
    # Given: a static overwrite of a custom partition location (Spark's deleteWithJob on it).
    s3_client.put_object(Bucket=s3_bucket, Key="elsewhere/p=1/old.txt", Body=b"old")
    s3_client.put_object(Bucket=s3_bucket, Key="elsewhere/p=10/other.txt", Body=b"untouched")
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    message = committer.commit_task(write_job(committer, s3_bucket))
    # Then: the old data is there until the job commit, and replaced by the new file after it.
    assert list_keys(s3_client, s3_bucket, "elsewhere/p=1/") == ["elsewhere/p=1/old.txt"]
    success = committer.commit_job([message], delete_paths=[f"s3a://{s3_bucket}/elsewhere/p=1"])
    assert list_keys(s3_client, s3_bucket, "elsewhere/") == [
        f"elsewhere/p=1/part-00000-{committer.job_id}.txt", "elsewhere/p=10/other.txt"]
    assert success.metrics["committer_objects_deleted_by_overwrite"] == 1
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_failed_job_commit_keeps_the_old_data_of_an_absolute_location(s3_server, s3_bucket, s3_client):
    s3_client.put_object(Bucket=s3_bucket, Key="elsewhere/p=1/old.txt", Body=b"old")
    store = FailingStore(store_options_for(s3_server), fail_complete_at=2)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    message = committer.commit_task(write_job(committer, s3_bucket))
    with pytest.raises(JobCommitError):
        committer.commit_job([message], delete_paths=[f"s3://{s3_bucket}/elsewhere/p=1"])
    assert list_keys(s3_client, s3_bucket, "elsewhere/") == ["elsewhere/p=1/old.txt"]
    assert user_keys(s3_client, s3_bucket) == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_deletion_in_another_bucket_is_refused_before_anything_changes(store, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    message = committer.commit_task(write_job(committer, s3_bucket))
    with pytest.raises(ConfigError, match="s3://another-bucket/x with the job: it is not in the bucket"):
        committer.commit_job([message], delete_paths=["s3://another-bucket/x"])
    # Nothing completed or lost: the same job still commits.
    assert user_keys(s3_client, s3_bucket) == [] and list_keys(s3_client, s3_bucket, "elsewhere/") == []
    committer.commit_job([message])
    assert len(list_keys(s3_client, s3_bucket, "elsewhere/")) == 1
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_failed_job_commit_rolls_back_the_absolute_files_too(s3_server, s3_bucket, s3_client):
    store = FailingStore(store_options_for(s3_server), fail_complete_at=2)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1)
    message = committer.commit_task(write_job(committer, s3_bucket))
    with pytest.raises(JobCommitError):
        committer.commit_job([message])
    assert user_keys(s3_client, s3_bucket) == [] and list_keys(s3_client, s3_bucket, "elsewhere/") == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_an_aborted_task_aborts_its_absolute_uploads(store, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    attempt = write_job(committer, s3_bucket)
    committer.abort_task(attempt)
    committer.abort_job()
    assert list_keys(s3_client, s3_bucket) == []
    assert_no_pending_uploads(s3_client, s3_bucket)


class RunAfterFirstListing(ObjectRequests):
    """Runs ``during`` (if set, once) right after the first listing of ``prefix``."""

    def __init__(self, requests, bodies):
        super().__init__(requests, bodies)
        self.prefix = None
        self.during = None

    def list_objects(self, bucket, prefix, *, delimiter=None):
        listing = list(super().list_objects(bucket, prefix, delimiter=delimiter))
        if prefix == self.prefix and self.during is not None:
            during, self.during = self.during, None
            during()
        return iter(listing)


class CommitDuringAbortStore(S3Store):
    """Runs ``objects.during`` right after the first listing of the job attempt directory: a task commit that a
    cancelled task left running in its sidecar, landing while the driver aborts the job."""

    objects_class = RunAfterFirstListing

    def __init__(self, options, job_attempt_dir):
        super().__init__(options)
        self.objects.prefix = f"{job_attempt_dir}/"


def test_a_job_abort_racing_a_task_commit_still_aborts_its_absolute_uploads(s3_server, s3_bucket, s3_client):
    probe = create_committer("magic", f"s3://{s3_bucket}/out", store=S3Store(store_options_for(s3_server)))
    store = CommitDuringAbortStore(store_options_for(s3_server), probe.layout.job_attempt_dir)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, job_id=probe.job_id)
    attempt = write_job(committer, s3_bucket)
    # The task commit (pendingset written, the attempt's records deleted) lands between the abort's readings.
    # It runs in another process, whose attempts the job's end here does not know, so cannot close.
    store.objects.during = lambda: committer.commit_task(attempt)
    committer._end_task_attempts = lambda: None
    committer.abort_job()
    assert store.objects.during is None  # the commit did run during the abort
    assert list_keys(s3_client, s3_bucket, "elsewhere/") == [] and user_keys(s3_client, s3_bucket) == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_an_uncommitted_attempts_absolute_upload_is_aborted_by_the_job(store, s3_bucket, s3_client):
    # Given: attempt 0 wrote (and closed) files but never committed or aborted (its executor died), and
    # attempt 1 of the same task committed different output.
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    write_job(committer, s3_bucket, absolute="lost/p=9")
    retry = committer.setup_task(committer.new_task_attempt_id(0, 1))
    with retry.open("p=0/part-retry.txt") as out:
        out.write(b"retry")
    committer.commit_job([committer.commit_task(retry)])
    # Then: the dead attempt's upload outside the destination is aborted by its record, nothing of it lands.
    assert list_keys(s3_client, s3_bucket, "lost/") == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_pendingset_pointing_into_an_undeclared_directory_is_refused(store, s3_bucket, s3_client):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    message = committer.commit_task(write_job(committer, s3_bucket))
    forged = type(message)(**{**message.__dict__, "absolute_dirs": ()})
    with pytest.raises(ManifestError, match="points outside the destination"):
        committer.commit_job([forged])
    assert list_keys(s3_client, s3_bucket, "elsewhere/") == [] and user_keys(s3_client, s3_bucket) == []
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.parametrize("location, match", [
    ("s3a://another-bucket/x", "only within the same bucket"),
    ("s3a://{bucket}/a/../b", "'..'"),
    ("s3a://{bucket}/a/__base/b", "reserved"),
])
def test_bad_absolute_locations_are_refused_before_any_upload(store, s3_bucket, s3_client, location, match):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with pytest.raises(ConfigError, match=match):
        attempt.open_absolute(location.format(bucket=s3_bucket), "part-0.txt")
    committer.abort_job()
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_staging_committers_refuse_absolute_locations_by_name(name, store, s3_bucket, staging_dir):
    committer = create_committer(name, f"s3://{s3_bucket}/out", store=store, staging_dir=staging_dir)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with pytest.raises(ConfigError, match=f"the {name} committer writes only under its destination"):
        attempt.open_absolute(f"s3a://{s3_bucket}/elsewhere", "part-0.txt")
    committer.abort_job()


def interrupted(store, committer, message, *, completed, plan=None):
    """What a job commit leaves when it dies after its journal and ``completed`` uploads."""
    engine = CommitEngine(store, dest=committer.dest, layout=committer.layout, job_id=committer.job_id,
                       committer=committer.name, options=committer.options, absolute_dirs=message.absolute_dirs)
    engine.write_journal([message.pendingset_key], plan or OverwritePlan())
    uploads = load_pendingset(store, committer.dest.bucket, message.pendingset_key).commits
    for commit in uploads[:completed]:
        commit_upload(store, commit)


@pytest.mark.parametrize("abort", [False, True], ids=["finish", "roll-back"])
def test_recover_handles_absolute_files_from_the_journal(store, s3_bucket, s3_client, abort):
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    message = committer.commit_task(write_job(committer, s3_bucket))
    interrupted(store, committer, message, completed=1)
    report = recover(store, committer.dest, committer.job_id, abort=abort)
    outside = list_keys(s3_client, s3_bucket, "elsewhere/")
    if abort:
        assert report.action is RecoveryAction.ROLLED_BACK
        assert outside == [] and user_keys(s3_client, s3_bucket) == []
    else:
        assert report.action is RecoveryAction.FINISHED and report.uploads == 2
        assert outside == [f"elsewhere/p=1/part-00000-{committer.job_id}.txt"]
    assert [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k] == []
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_recover_applies_a_deferred_deletion_outside_the_destination(store, s3_bucket, s3_client):
    s3_client.put_object(Bucket=s3_bucket, Key="elsewhere/p=1/old.txt", Body=b"old")
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store)
    message = committer.commit_task(write_job(committer, s3_bucket))
    interrupted(store, committer, message, completed=2, plan=OverwritePlan(delete_outside=("elsewhere/p=1",)))
    # All uploads are complete and the plan deletes old data: a roll back would lose both, so it is refused.
    with pytest.raises(RecoveryError, match="cannot roll back"):
        recover(store, committer.dest, committer.job_id, abort=True)
    report = recover(store, committer.dest, committer.job_id)
    assert report.action is RecoveryAction.FINISHED and report.deleted_by_overwrite == 1
    assert list_keys(s3_client, s3_bucket, "elsewhere/") == [f"elsewhere/p=1/part-00000-{committer.job_id}.txt"]
    assert_no_pending_uploads(s3_client, s3_bucket)
