"""One owner per job: commit, abort and recover never act on another's work (each scenario as it was reproduced on
the code before: an abort racing a live commit left only ``_SUCCESS``; a recovery trusting ``_SUCCESS`` deleted a
committed job's files or re-ran an overwrite over a later job's; two jobs with one id shared and deleted each
other's task files; a job id matched as a substring aborted another job's upload; two RDD writes to one new
destination both succeeded; an ambiguous Complete whose read-back failed published a file nothing knew of)."""

from __future__ import annotations

import logging
import threading
import uuid

import pytest

from s3commit import S3Store, create_committer
from s3commit.commit.recovery import recover
from s3commit.commit.recovery_result import AlreadyCommittedError
from s3commit.errors import CommitConflictError, ConfigError, JobCommitError
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import (
    assert_no_pending_uploads,
    held_leases,
    list_keys,
    list_pending_uploads,
    visible_keys,
)
from tests.conftest import store_options_for
from tests.reliability.helpers import make_store, success_json
from tests.reliability.test_crash_matrix import OLD_KEYS, expected_output
from tests.reliability.test_resume import crash

pytestmark = pytest.mark.integration


class HeldCompletes(UploadRequests):
    """The commit's Completes wait until the test lets them go: it stays live (holding its lease, completing) until
    another operation has met it."""

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.completing = threading.Event()
        self.go = threading.Event()

    def complete_multipart_upload(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.completing.set()
        assert self.go.wait(60), "the other operation never met the commit"
        return super().complete_multipart_upload(*args, **kwargs)


class HeldCompletesStore(S3Store):
    """A store whose Completes are held (:class:`HeldCompletes`, ``store.uploads``)."""

    uploads_class = HeldCompletes
    uploads: HeldCompletes


class WhenWaiting(logging.Handler):
    """Lets the held commit go once another operation of its job in this process says that it waits for it
    (:func:`s3commit.commit.ownership.one_operation`): the order is forced, not timed."""

    logger = logging.getLogger("s3commit.commit.ownership")

    def __init__(self, held: HeldCompletes) -> None:
        super().__init__()
        self.held = held

    def emit(self, record: logging.LogRecord) -> None:
        if "waits for another operation of this job" in record.getMessage():
            self.held.go.set()

    def __enter__(self) -> WhenWaiting:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.logger.removeHandler(self)
        self.held.go.set()  # never leave the commit held


def job_with_files(store, dest, n=3, *, name="magic", job_id=None, staging_dir=None, **options):
    committer = create_committer(name, dest, store=store, job_id=job_id, threads=1, staging_dir=staging_dir,
                                 **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for i in range(n):
        with attempt.open(f"part-{i:05d}-{committer.job_id}.txt") as out:
            out.write(f"{committer.job_id} {i}\n".encode())
    return committer, [committer.commit_task(attempt)]


# --- 1. an abort meeting a live commit ------------------------------------------------------------------------


def test_an_abort_that_meets_a_live_commit_in_its_process_waits_and_never_deletes_what_it_completes(
        s3_server, s3_bucket, s3_client):
    dest = f"s3://{s3_bucket}/out"
    store = HeldCompletesStore(store_options_for(s3_server))
    committer, messages = job_with_files(store, dest, n=4)
    committing = threading.Thread(target=committer.commit_job, args=(messages,))
    committing.start()
    assert store.uploads.completing.wait(60)  # the commit holds its lease and is completing
    # The sidecar serves Spark's job.abort (after an interrupted commitJob) on another thread, with a committer of
    # its own for the same job.
    other = create_committer("magic", dest, job_id=committer.job_id, store=S3Store(store_options_for(s3_server)))
    with WhenWaiting(store.uploads), pytest.raises(AlreadyCommittedError, match="has committed"):
        other.abort_job()
    committing.join()
    assert len([k for k in visible_keys(s3_client, s3_bucket, "out/") if k.endswith(".txt")]) == 4
    assert success_json(s3_client, s3_bucket)["jobId"] == committer.job_id
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_recover_abort_that_meets_a_live_commit_in_another_process_waits_for_its_lease(
        s3_server, s3_bucket, s3_client, tmp_path):
    dest = f"s3://{s3_bucket}/out"
    store = HeldCompletesStore(store_options_for(s3_server))
    committer, messages = job_with_files(store, dest, n=4)
    committing = threading.Thread(target=committer.commit_job, args=(messages,))
    committing.start()
    assert store.uploads.completing.wait(60)
    # `s3commit recover --abort` run by an operator elsewhere: its own store, its own process's view (the lease).
    with WhenWaiting(store.uploads):
        report = recover(S3Store(store_options_for(s3_server)), dest, committer.job_id, abort=True)
    committing.join()
    assert report.action.value == "nothing" and "has committed" in report.message
    assert len([k for k in visible_keys(s3_client, s3_bucket, "out/") if k.endswith(".txt")]) == 4


# --- 2. recovery decides from its own records -------------------------------------------------------------------


@pytest.fixture
def old_data(s3_client, s3_bucket):
    for key in OLD_KEYS:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"old")


def test_a_job_that_died_after_success_keeps_its_files_when_aborted_after_another_job_committed(
        s3_server, s3_bucket, s3_client, old_data, tmp_path):
    # A dies in its clean-up (after _SUCCESS), holding the lease; B commits (taking A's lease over, settling A
    # first); then an operator rolls A back: A's own records say it committed.
    job_a, _ = crash(s3_server, s3_bucket, "magic", "mid-cleanup", tmp_path)
    b, messages = job_with_files(make_store(s3_server), f"s3://{s3_bucket}/out")
    b.commit_job(messages)
    assert success_json(s3_client, s3_bucket)["jobId"] == b.job_id
    recover(make_store(s3_server), f"s3://{s3_bucket}/out", job_a, abort=True)
    for key in expected_output("magic", job_a):
        assert s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read(), key
    assert held_leases(s3_client, s3_bucket) == []


def test_an_overwrite_that_died_mid_commit_is_settled_before_a_later_append_never_re_run_after_it(
        s3_server, s3_bucket, s3_client, old_data, tmp_path):
    job_a, _ = crash(s3_server, s3_bucket, "magic", "after-k-completes:4", tmp_path, replace=True)
    b, messages = job_with_files(make_store(s3_server), f"s3://{s3_bucket}/out")
    b.commit_job(messages)  # takes A's lease over: finishes A (its overwrite) first, then appends
    b_files = [k for k in visible_keys(s3_client, s3_bucket, "out/") if b.job_id in k]
    assert len(b_files) == 3
    report = recover(make_store(s3_server), f"s3://{s3_bucket}/out", job_a)  # an operator, later
    assert not report.changed
    assert [k for k in visible_keys(s3_client, s3_bucket, "out/") if b.job_id in k] == b_files  # kept
    assert not set(OLD_KEYS) & set(visible_keys(s3_client, s3_bucket, "out/"))  # A's overwrite happened once
    assert success_json(s3_client, s3_bucket)["jobId"] == b.job_id


def test_a_commit_sent_again_after_it_finished_reports_success_without_a_success_marker(
        s3_server, s3_bucket, s3_client):
    dest = f"s3://{s3_bucket}/out"
    committer, messages = job_with_files(make_store(s3_server), dest, success_marker=False)
    committer.commit_job(messages)
    assert success_json(s3_client, s3_bucket) is None
    # Another sidecar, after the first died before its reply: the same job, the same messages.
    again = create_committer("magic", dest, job_id=committer.job_id, store=make_store(s3_server),
                             success_marker=False)
    success = again.commit_job(messages)
    assert success.job_id == committer.job_id
    # Other messages are still refused (its records count the files it committed).
    with pytest.raises(Exception, match="is missing"):
        create_committer("magic", dest, job_id=committer.job_id, store=make_store(s3_server),
                         success_marker=False).commit_job(messages * 2)


# --- 3. job ids cannot collide silently --------------------------------------------------------------------------


def test_two_jobs_with_one_id_on_one_host_keep_their_own_staging_files(s3_server, s3_bucket, s3_client, tmp_path):
    job_id = str(uuid.uuid4())  # fs.s3a.committer.uuid set for a whole session
    first, first_messages = job_with_files(make_store(s3_server), f"s3://{s3_bucket}/one", name="directory",
                                           job_id=job_id, staging_dir=str(tmp_path))
    second = create_committer("directory", f"s3://{s3_bucket}/two", job_id=job_id, store=make_store(s3_server),
                              staging_dir=str(tmp_path))
    second.setup_job()
    attempt = second.setup_task(second.new_task_attempt_id(0))
    with attempt.open("data.txt") as out:
        out.write(b"second")
    first.commit_job(first_messages)  # its clean-up must not take the second job's task files
    success = second.commit_job([second.commit_task(attempt)])
    assert success.metrics["committer_files"] == 1
    assert [k for k in visible_keys(s3_client, s3_bucket, "two/") if k.endswith(".txt")] == [
        f"two/data-{job_id}.txt"]


def test_a_second_live_job_with_the_same_id_on_one_destination_is_refused_naming_the_key(
        s3_server, s3_bucket, s3_client):
    dest = f"s3://{s3_bucket}/out"
    first, _ = job_with_files(make_store(s3_server), dest)
    second = create_committer("magic", dest, job_id=first.job_id, store=make_store(s3_server))
    with pytest.raises(ConfigError, match=r"already used by another job.*fs\.s3a\.committer\.uuid"):
        second.setup_job()
    first.setup_job()  # the same run claims it again: fine


def test_a_job_whose_id_is_a_partition_value_never_aborts_another_jobs_upload_there(
        s3_server, s3_bucket, s3_client):
    dest = f"s3://{s3_bucket}/events"
    other = create_committer("magic", dest, store=make_store(s3_server))
    other.setup_job()
    attempt = other.setup_task(other.new_task_attempt_id(0))
    with attempt.open(f"date=2024-06-01/part-00000-{other.job_id}.txt") as out:
        out.write(b"the other job's")  # pending until its job commits
    other_message = other.commit_task(attempt)
    dated, messages = job_with_files(make_store(s3_server), dest, job_id="2024-06-01")
    dated.commit_job(messages)  # its sweep of orphan uploads must not take the other job's
    other.commit_job([other_message])
    assert f"events/date=2024-06-01/part-00000-{other.job_id}.txt" in list_keys(s3_client, s3_bucket, "events/")
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_denied_speculative_attempt_never_aborts_the_winners_upload(s3_sim, s3_bucket, s3_client):
    store = make_store(s3_sim)
    committer = create_committer("magic", f"s3://{s3_bucket}/out", store=store, threads=1, unique_filenames=False)
    committer.setup_job()
    loser = committer.setup_task(committer.new_task_attempt_id(0, 0))
    winner = committer.setup_task(committer.new_task_attempt_id(0, 1))
    s3_sim.fail_next("CreateMultipartUpload", "reset", after_forward=True)  # the loser's Create loses its answer
    with loser.open("part-00000.txt") as out:
        out.write(b"loser")
    with winner.open("part-00000.txt") as out:  # the same file, inside the loser's Create window
        out.write(b"winner")
    message = committer.commit_task(winner)
    committer.abort_task(loser)  # denied by the commit coordinator
    committer.commit_job([message])
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/part-00000.txt")["Body"].read() == b"winner"
    assert_no_pending_uploads(s3_client, s3_bucket)  # the loser's orphan went with the job's clean-up


# --- 4. RDD writes claim a new destination -----------------------------------------------------------------------


def test_two_rdd_writes_started_together_on_one_new_destination_cannot_both_run(s3_server, s3_bucket, s3_client):
    dest = f"s3://{s3_bucket}/rdd"
    first = create_committer("magic", dest, store=make_store(s3_server))
    second = create_committer("magic", dest, store=make_store(s3_server))
    first.setup_job(exclusive=True)
    with pytest.raises(CommitConflictError, match=f"job {first.job_id} is writing it"):
        second.setup_job(exclusive=True)
    attempt = first.setup_task(first.new_task_attempt_id(0))
    with attempt.open("part-00000") as out:
        out.write(b"x")
    first.commit_job([first.commit_task(attempt)])
    assert visible_keys(s3_client, s3_bucket, "rdd/") == ["rdd/_SUCCESS", "rdd/part-00000"]  # claim released


# --- 5. an ambiguous Complete is resolved before anything is decided ----------------------------------------------


@pytest.mark.parametrize("unreadable", [7, 14], ids=["read-back-later", "never-read-back"])
def test_a_complete_whose_answer_and_read_back_are_lost_is_resolved_before_anything_is_decided(
        s3_sim, s3_bucket, s3_client, unreadable):
    store = make_store(s3_sim)  # 7 attempts a request
    committer, messages = job_with_files(store, f"s3://{s3_bucket}/out", n=1)
    # The Complete takes effect and its answer is lost; its retries fail; then its read-back fails 7 times (the
    # store's whole retry budget), and with 14 the roll-back's read-back too.
    s3_sim.fail_next("CompleteMultipartUpload", "reset", after_forward=True)
    s3_sim.fail_next("CompleteMultipartUpload", "500", count=6)
    s3_sim.fail_next("HeadObject", "500", count=unreadable)
    with pytest.raises(JobCommitError) as failed:
        committer.commit_job(messages)
    data = [k for k in visible_keys(s3_client, s3_bucket, "out/") if k.endswith(".txt")]
    journals = [k for k in list_keys(s3_client, s3_bucket, "out/") if k.endswith("_commit-journal.json")]
    if unreadable == 7:  # the roll-back read it back: it was completed, so it was reverted
        assert data == [] and journals == [] and failed.value.reverted == 1
    else:  # nothing could tell: the journal is kept (never a published file nothing knows of)
        assert data and journals and failed.value.not_rolled_back == 1
        recover(make_store(s3_sim), f"s3://{s3_bucket}/out", committer.job_id, abort=True)
        assert [k for k in visible_keys(s3_client, s3_bucket, "out/") if k.endswith(".txt")] == []
    assert list_pending_uploads(s3_client, s3_bucket) == []
