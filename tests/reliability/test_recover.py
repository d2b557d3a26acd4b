"""Recovery edge cases, in process: the state an interrupted commit leaves is built directly (journal written,
k of N uploads completed), then :func:`s3commit.commit.recovery.recover` runs. The crash matrix produces such states
with real SIGKILLs; these tests cover what it cannot reach cheaply: a roll-back that was itself interrupted,
a roll-back S3 refuses part of, recovery through a faulty network, and the report's counts.
"""

from __future__ import annotations

import json
import uuid

import pytest

from s3commit import JobCommitError, create_committer
from s3commit.commit.engine import CommitEngine, OverwritePlan
from s3commit.commit.manifest_store import load_pendingset
from s3commit.commit.recovery import RecoveryAction, RecoveryError, recover
from s3commit.commit.upload_actions import commit_upload
from s3commit.errors import AccessDeniedError, S3CommitError
from s3commit.store.objects import ObjectRequests
from s3commit.store.s3store import S3Store
from s3commit.store.uploads import UploadRequests
from s3commit.testing import FaultSpec
from s3commit.testing.assertions import list_keys, list_pending_uploads
from testbed.fixtures import ALL_SERVERS, every_server_fixture
from tests.reliability.helpers import (
    JobSpec,
    assert_all_or_nothing,
    assert_clean,
    expected_objects,
    make_store,
    run_tasks,
    store_options,
    success_json,
)

pytestmark = pytest.mark.integration

s3_server = every_server_fixture(ALL_SERVERS)  # (only the tests that name it; the rest run on s3_sim)


def interrupted_commit(store, committer, messages, *, completed: int, accepted=None):
    """What a job commit leaves when it dies after writing its journal (naming the ``accepted`` attempts of each
    pendingset) and completing ``completed`` uploads."""
    keys = [m.pendingset_key for m in messages]
    CommitEngine(store, dest=committer.dest, layout=committer.layout, job_id=committer.job_id,
                 committer=committer.name, options=committer.options).write_journal(keys, OverwritePlan(), accepted)
    uploads = [c for key in keys for c in load_pendingset(store, committer.dest.bucket, key).commits]
    for commit in uploads[:completed]:
        commit_upload(store, commit)
    return uploads


def test_forward_recovery_reports_what_it_completed_and_what_was_already_complete(s3_server):
    """On every server, whatever ETag it gives a completed object: rclone's `serve s3` (gofakes3 too) gives the MD5 of
    its bytes, not S3's multipart ETag, and answers a Complete sent again with NoSuchUpload; `recover` recognises
    what was completed by its length and date there (``multipart-etag`` probed). Before, it took those uploads for
    lost, failed, and its roll-back left them visible beside the old data."""
    bucket = s3_server.create_bucket(f"recover-{uuid.uuid4().hex[:10]}")
    store = make_store(s3_server)
    committer = create_committer("magic", f"s3://{bucket}/out", store=store, threads=2)
    spec = JobSpec(tasks=3, files=2)
    interrupted_commit(store, committer, run_tasks(committer, spec), completed=4)
    report = recover(store, committer.dest, committer.job_id)
    assert report.action is RecoveryAction.FINISHED
    assert (report.uploads, report.completed, report.already_completed) == (6, 2, 4)
    assert report.success_written and report.committer == "magic"
    client = s3_server.client()
    assert assert_all_or_nothing(client, bucket, expected_objects(committer, spec)) == "all"
    assert success_json(client, bucket)["diagnostics"]["s3commit.recovered"] == "true"
    assert_clean(client, bucket)
    again = recover(store, committer.dest, committer.job_id)
    assert again.action is RecoveryAction.NOTHING and not again.changed


def test_an_interrupted_commit_is_finished_only_from_the_task_attempts_its_caller_accepted(s3_sim, s3_bucket):
    # The journal names the attempt the caller accepted for each pendingset; one pendingset is now another
    # attempt's (two attempts of a task committed, the second after the commit read it).
    store = make_store(s3_sim)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    spec = JobSpec(tasks=3, files=2)
    messages = run_tasks(committer, spec)
    accepted = {m.pendingset_key: {m.task_attempt_id} for m in messages}
    accepted[messages[1].pendingset_key] = {"attempt_000000000000_0000_m_000001_7"}
    interrupted_commit(store, committer, messages, completed=0, accepted=accepted)
    journal = json.loads(s3_sim.client(raw=True).get_object(Bucket=s3_bucket,
                                                            Key=committer.layout.journal_key)["Body"].read())
    assert journal["acceptedAttempts"][messages[1].pendingset_key] == ["attempt_000000000000_0000_m_000001_7"]
    # A recovery validates as the commit would have: it refuses to publish what the caller never accepted...
    with pytest.raises(S3CommitError, match="two attempts of one task committed"):
        recover(store, committer.dest, committer.job_id)
    raw = s3_sim.client(raw=True)
    assert assert_all_or_nothing(raw, s3_bucket, expected_objects(committer, spec)) == "nothing"
    # ...and rolls it back when asked, leaving nothing behind.
    report = recover(store, committer.dest, committer.job_id, abort=True)
    assert report.action is RecoveryAction.ROLLED_BACK
    assert assert_all_or_nothing(raw, s3_bucket, expected_objects(committer, spec)) == "nothing"
    assert_clean(raw, s3_bucket)


def test_forward_recovery_of_a_commit_whose_roll_back_was_interrupted_rolls_it_back(s3_sim, s3_bucket):
    # Given: a commit that failed and died while rolling back: 2 uploads completed, 1 already aborted.
    store = make_store(s3_sim)
    raw = s3_sim.client(raw=True)
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=store, threads=2)
    uploads = interrupted_commit(store, committer, run_tasks(committer, JobSpec(tasks=2, files=2)), completed=2)
    store.uploads.abort_multipart_upload(s3_bucket, uploads[3].destination_key, uploads[3].upload_id)
    # When: the operator tries to finish it; then: it cannot be finished, so all of it is rolled back.
    with pytest.raises(JobCommitError, match="NoSuchUpload") as caught:
        recover(store, committer.dest, committer.job_id)
    assert caught.value.reverted >= 2  # the two found complete, and any completed before the failure
    assert assert_all_or_nothing(raw, s3_bucket, {}) == "nothing"
    assert_clean(raw, s3_bucket)
    assert recover(store, committer.dest, committer.job_id).action is RecoveryAction.NOTHING


def denied(operation, bucket, key="", upload_id=None) -> AccessDeniedError:
    """What S3 answers a role not allowed ``operation``."""
    return AccessDeniedError("Access Denied", operation=operation, bucket=bucket, key=key, upload_id=upload_id,
                             code="AccessDenied")


class RefusingAbort(UploadRequests):
    """Refuses to abort one upload (``refuse``), as S3 would for a role missing s3:AbortMultipartUpload on one
    prefix."""

    refuse: str | None = None

    def abort_multipart_upload(self, bucket, key, upload_id):
        if upload_id == self.refuse:
            raise denied("AbortMultipartUpload", bucket, key, upload_id)
        super().abort_multipart_upload(bucket, key, upload_id)


class RefusingAbortStore(S3Store):
    """A store that refuses to abort the upload ``store.uploads.refuse`` (:class:`RefusingAbort`)."""

    uploads_class = RefusingAbort
    uploads: RefusingAbort


def test_a_roll_back_s3_refuses_in_part_keeps_the_journal_and_can_be_run_again(s3_sim, s3_bucket):
    store = RefusingAbortStore(store_options(s3_sim))
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    uploads = interrupted_commit(store, committer, run_tasks(committer, JobSpec(tasks=2, files=2)), completed=1)
    store.uploads.refuse = uploads[-1].upload_id
    # When: the roll-back cannot abort one upload.
    with pytest.raises(RecoveryError, match=r"roll back of job .* is incomplete: 1 uploads could not be aborted"):
        recover(store, committer.dest, committer.job_id, abort=True)
    # Then: the journal is kept, so the same command finishes the job once S3 allows it.
    assert any(o.key.endswith("_commit-journal.json") for o in store.objects.list_objects(s3_bucket, "out/"))
    store.uploads.refuse = None
    report = recover(store, committer.dest, committer.job_id, abort=True)
    assert report.action is RecoveryAction.ROLLED_BACK
    assert assert_all_or_nothing(raw, s3_bucket, {}) == "nothing"
    assert_clean(raw, s3_bucket)


@pytest.mark.parametrize("abort", [False, True], ids=["finish", "roll-back"])
def test_recovery_through_a_faulty_network_still_ends_all_or_nothing(abort, s3_sim, s3_bucket):
    store = make_store(s3_sim)
    raw = s3_sim.client(raw=True)
    committer = create_committer("partitioned", f"s3://{s3_bucket}/out", store=store, threads=2)
    spec = JobSpec(tasks=3, files=2, job_id_in_names=True)
    interrupted_commit(store, committer, run_tasks(committer, spec), completed=3)
    s3_sim.configure(faults=FaultSpec(rates={"503": 0.05, "500": 0.05, "reset": 0.05}), seed=11)
    report = recover(store, committer.dest, committer.job_id, abort=abort)
    faults = s3_sim.stats().total_faults
    s3_sim.configure(faults=None)
    assert faults > 0
    assert report.action is (RecoveryAction.ROLLED_BACK if abort else RecoveryAction.FINISHED)
    outcome = assert_all_or_nothing(raw, s3_bucket, expected_objects(committer, spec))
    assert outcome == ("nothing" if abort else "all")
    assert_clean(raw, s3_bucket)


def test_recovery_refuses_a_destination_whose_bucket_is_missing(s3_sim):
    from s3commit import NoSuchBucketError

    with pytest.raises(NoSuchBucketError, match="does not exist"):
        recover(make_store(s3_sim), "s3://no-such-bucket-recover/out", "job-1")


def test_roll_back_leaves_the_uploads_of_other_jobs_alone(s3_sim, s3_bucket):
    # Given: an interrupted commit, and another job's upload pending under the same destination.
    store = make_store(s3_sim)
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    interrupted_commit(store, committer, run_tasks(committer, JobSpec(tasks=1, files=2)), completed=1)
    other = raw.create_multipart_upload(Bucket=s3_bucket, Key="out/other-job-file.txt")["UploadId"]
    # When: it is rolled back; then: the other job's upload is still pending.
    assert recover(store, committer.dest, committer.job_id, abort=True).action is RecoveryAction.ROLLED_BACK
    assert [u.upload_id for u in list_pending_uploads(raw, s3_bucket)] == [other]
    raw.abort_multipart_upload(Bucket=s3_bucket, Key="out/other-job-file.txt", UploadId=other)
    assert_clean(raw, s3_bucket)


class DenyingDeletes(ObjectRequests):
    """Denies deletes while ``deny_deletes`` (as a role without s3:DeleteObject on the job directory would)."""

    deny_deletes = False

    def delete_objects(self, bucket, keys):
        if self.deny_deletes:
            raise denied("DeleteObjects", bucket)
        return super().delete_objects(bucket, keys)

    def delete_object(self, bucket, key):
        if self.deny_deletes:
            raise denied("DeleteObject", bucket, key)
        super().delete_object(bucket, key)


class RefusingCompleteAndAbort(RefusingAbort):
    """Refuses, as well as the abort of ``refuse``, the completion of one upload (``refuse_complete``)."""

    refuse_complete: str | None = None

    def complete_multipart_upload(self, bucket, key, upload_id, *args, **kwargs):
        if upload_id == self.refuse_complete:
            raise denied("CompleteMultipartUpload", bucket, key, upload_id)
        return super().complete_multipart_upload(bucket, key, upload_id, *args, **kwargs)


class FlakyCleanupStore(RefusingAbortStore):
    """Denies deletes (as a role without s3:DeleteObject on the job directory would) and, optionally, the
    completion of one upload: ``store.objects.deny_deletes`` (:class:`DenyingDeletes`),
    ``store.uploads.refuse_complete`` and ``store.uploads.refuse`` (:class:`RefusingCompleteAndAbort`)."""

    objects_class = DenyingDeletes
    uploads_class = RefusingCompleteAndAbort
    objects: DenyingDeletes
    uploads: RefusingCompleteAndAbort


def test_a_job_committed_whose_clean_up_fails_reports_success_and_recover_finishes_the_clean_up(s3_sim, s3_bucket):
    store = FlakyCleanupStore(store_options(s3_sim))
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    spec = JobSpec(tasks=2, files=2)
    messages = run_tasks(committer, spec)
    store.objects.deny_deletes = True
    # When: the clean-up after _SUCCESS is refused, the job still succeeds: its output is committed.
    success = committer.commit_job(messages)
    assert success.job_id == committer.job_id
    assert assert_all_or_nothing(raw, s3_bucket, expected_objects(committer, spec)) == "all"
    assert success_json(raw, s3_bucket)["jobId"] == committer.job_id
    assert any(o.key.endswith("_commit-journal.json") for o in store.objects.list_objects(s3_bucket, "out/"))
    # Then: once deletes are allowed, recover finishes the clean-up and changes no output.
    store.objects.deny_deletes = False
    report = recover(store, committer.dest, committer.job_id)
    assert report.action in (RecoveryAction.FINISHED, RecoveryAction.CLEANED_UP)
    assert assert_all_or_nothing(raw, s3_bucket, expected_objects(committer, spec)) == "all"
    assert_clean(raw, s3_bucket)


def test_a_failed_job_commit_whose_roll_back_is_refused_in_part_keeps_its_journal(s3_sim, s3_bucket):
    store = FlakyCleanupStore(store_options(s3_sim))
    raw = s3_sim.client(raw=True)
    committer = create_committer("directory", f"s3://{s3_bucket}/out", store=store, threads=2)
    messages = run_tasks(committer, JobSpec(tasks=2, files=2))
    victim = load_pendingset(store, s3_bucket, messages[-1].pendingset_key).commits[-1].upload_id
    store.uploads.refuse_complete = store.uploads.refuse = victim
    # When: one upload can be neither completed nor aborted.
    with pytest.raises(JobCommitError, match=r"1 uploads or pendingsets could not be rolled back.*recover .*--abort"):
        committer.commit_job(messages)
    # Then: nothing is visible, and the journal is kept so recover --abort can finish the roll back.
    assert assert_all_or_nothing(raw, s3_bucket, {}) == "nothing"
    assert any(o.key.endswith("_commit-journal.json") for o in store.objects.list_objects(s3_bucket, "out/"))
    store.uploads.refuse = None
    report = recover(store, committer.dest, committer.job_id, abort=True)
    assert report.action is RecoveryAction.ROLLED_BACK
    assert assert_all_or_nothing(raw, s3_bucket, {}) == "nothing"
    assert_clean(raw, s3_bucket)


class DenyingSuccess(ObjectRequests):
    """Denies the ``_SUCCESS`` PUT while ``deny_success`` (as S3 might answer any one request)."""

    deny_success = False

    def put_object(self, bucket, key, *args, **kwargs):
        if self.deny_success and key.endswith("/_SUCCESS"):
            raise denied("PutObject", bucket, key)
        return super().put_object(bucket, key, *args, **kwargs)


class DenyingSuccessStore(S3Store):
    objects_class = DenyingSuccess
    objects: DenyingSuccess


def journal_of(store, committer) -> dict:
    return json.loads(store.objects.get_object(committer.dest.bucket, committer.layout.journal_key))


def test_a_leased_commit_whose_success_put_fails_beside_the_clean_up_is_marked_by_recover(s3_sim, s3_bucket):
    store = DenyingSuccessStore(store_options(s3_sim))
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2)
    spec = JobSpec(tasks=3, files=2)
    messages = run_tasks(committer, spec)
    store.objects.deny_success = True
    # When: under the lease, _SUCCESS goes beside the job directory's deletion, and its PUT is refused.
    with pytest.raises(S3CommitError, match=r"files are committed .* _SUCCESS could not be written.*AccessDenied"):
        committer.commit_job(messages)
    # Then: every file is there, the pendingsets are gone with the rest of the job directory, _SUCCESS is not: the
    # journal stays and says what _SUCCESS is to say.
    expected = expected_objects(committer, spec)
    assert assert_all_or_nothing(raw, s3_bucket, expected) == "all"
    assert "Contents" not in raw.list_objects_v2(Bucket=s3_bucket, Prefix="out/_SUCCESS")
    journal = journal_of(store, committer)
    assert journal["successBesideCleanup"] is True and (journal["files"], journal["bytes"]) == (
        6, sum(len(body) for body in expected.values()))
    assert journal["firstFiles"] == sorted(expected)
    # (and the task attempt the caller accepted for each pendingset: a recovery validates them as the commit did)
    assert journal["acceptedAttempts"] == {m.pendingset_key: [m.task_attempt_id] for m in messages}
    assert not [k for k in list_keys(raw, s3_bucket, "out/") if k.endswith(".pendingset")]
    # recover writes _SUCCESS from the journal and finishes the clean-up.
    store.objects.deny_success = False
    report = recover(store, committer.dest, committer.job_id)
    assert report.action is RecoveryAction.CLEANED_UP
    success = success_json(raw, s3_bucket)
    assert success["jobId"] == committer.job_id and success["diagnostics"]["s3commit.recovered"] == "true"
    assert success["metrics"]["committer_files"] == 6 and success["metrics"]["committer_pendingsets"] == 3
    assert success["filenames"] == [f"/{key}" for key in sorted(expected)]
    assert assert_all_or_nothing(raw, s3_bucket, expected) == "all"
    assert_clean(raw, s3_bucket)


def test_without_the_lease_a_failed_success_put_rolls_the_commit_back(s3_sim, s3_bucket):
    store = DenyingSuccessStore(store_options(s3_sim))
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=2, lease="off")
    messages = run_tasks(committer, JobSpec(tasks=2, files=2))
    store.objects.deny_success = True
    with pytest.raises(AccessDeniedError):
        committer.commit_job(messages)
    # _SUCCESS comes before the job directory's deletion: its pendingsets were there, so the job's abort after
    # the failure rolled it back (nothing was deleted by an overwrite), as a failure before its commit point is.
    assert assert_all_or_nothing(raw, s3_bucket, expected_objects(committer, JobSpec(tasks=2, files=2))) == "nothing"
    assert_clean(raw, s3_bucket)
