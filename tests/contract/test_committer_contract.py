"""One lifecycle contract, run against every committer (after Hadoop's AbstractITCommitProtocol list).

Every test ends with no pending uploads in the bucket (fixture ``no_pending_uploads``), and the tests that
commit check that nothing was visible at the destination before the job commit.
"""

from __future__ import annotations

import json
import threading

import pytest

from s3commit import CommitStateError, SuccessData, create_committer
from s3commit.model.paths import is_scratch_key
from s3commit.testing.assertions import list_keys
from tests.conftest import STAGING_AND_MAGIC

pytestmark = [pytest.mark.usefixtures("no_pending_uploads"), pytest.mark.parametrize("name", STAGING_AND_MAGIC)]

CONTENT = b"key1\tval1\nval1\nval2\nkey2\nkey1\nkey2\tval2\n"


@pytest.fixture
def make(store, dest, staging_dir):
    committers = []

    def factory(name, *, target=None, job_id=None, **options):
        committer = create_committer(name, target or dest, job_id=job_id, store=store, threads=4,
                                     staging_dir=staging_dir, unique_filenames=False, **options)
        committers.append(committer)
        return committer

    yield factory
    for committer in committers:
        committer.close()


def write(attempt, relative, data=CONTENT):
    with attempt.open(relative) as f:
        f.write(data)


def user_keys(s3_client, bucket, prefix="out/"):
    """Keys a reader of the destination would see (scratch directories excluded)."""
    return sorted(k for k in list_keys(s3_client, bucket, prefix) if not is_scratch_key(k))


def pending_uploads(s3_client, bucket):
    return s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def read_success(s3_client, bucket, prefix="out"):
    body = s3_client.get_object(Bucket=bucket, Key=f"{prefix}/_SUCCESS")["Body"].read()
    return SuccessData.from_json(body)


def test_commit_lifecycle_publishes_nothing_before_job_commit(name, make, s3_client, s3_bucket):
    # 1. Set up the job and two tasks; each writes files in subdirectories.
    committer = make(name)
    committer.setup_job()
    messages = []
    for task in range(2):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        write(attempt, f"part-m-0000{task}")
        write(attempt, f"year=2026/part-m-0000{task}.csv", b"a,b\n")
        assert committer.needs_task_commit(attempt)
        messages.append(committer.commit_task(attempt))
    # 2. After the task commits nothing is visible, but the uploads are pending.
    assert user_keys(s3_client, s3_bucket) == []
    assert len(pending_uploads(s3_client, s3_bucket)) == 4
    assert [m.files for m in messages] == [2, 2]
    # 3. Job commit publishes exactly the files, with their content.
    success = committer.commit_job(messages)
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/part-m-00000", "out/part-m-00001",
                                               "out/year=2026/part-m-00000.csv", "out/year=2026/part-m-00001.csv"]
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/part-m-00001")["Body"].read() == CONTENT
    # 4. _SUCCESS is Hadoop's JSON, naming the committer, the job and the files.
    marker = read_success(s3_client, s3_bucket)
    assert marker.committer == name and marker.job_id == committer.job_id
    assert set(marker.filenames) == {"/out/part-m-00000", "/out/part-m-00001", "/out/year=2026/part-m-00000.csv",
                                     "/out/year=2026/part-m-00001.csv"}
    assert marker.metrics["committer_commits_completed"] == 4
    assert success.job_id == committer.job_id
    # 5. No scratch directory is left.
    assert [k for k in list_keys(s3_client, s3_bucket, "out/") if "__" in k] == ["out/__s3commit_lease"]  # free


def test_second_commit_of_the_same_task_attempt_fails(name, make):
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part-0")
    message = committer.commit_task(attempt)
    with pytest.raises(CommitStateError, match="already committed"):
        committer.commit_task(attempt)
    committer.commit_job([message])


def test_two_attempts_of_one_task_last_committed_wins(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    first = committer.setup_task(committer.new_task_attempt_id(0, 0))
    second = committer.setup_task(committer.new_task_attempt_id(0, 1))
    write(first, "part-from-attempt-0")
    write(second, "part-from-attempt-1")
    m1 = committer.commit_task(first)
    m2 = committer.commit_task(second)
    success = committer.commit_job([m1, m2])
    assert success.filenames == ("/out/part-from-attempt-1",)
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/part-from-attempt-1"]


def test_commit_job_without_task_commit_publishes_nothing(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part-m-00000")
    committer.commit_job([])
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS"]
    assert read_success(s3_client, s3_bucket).filenames == ()


def test_commit_task_with_no_output_succeeds(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    message = committer.commit_task(attempt)
    assert message.files == 0
    committer.commit_job([message])
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS"]


def test_abort_task_and_job_with_no_work_succeed(name, make):
    committer = make(name)
    committer.setup_job()
    committer.abort_task(committer.setup_task(committer.new_task_attempt_id(0)))
    committer.abort_job()


def test_abort_task_then_job_leaves_nothing(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part-m-00000", b"x" * 100)
    committer.abort_task(attempt)
    committer.abort_job()
    assert list_keys(s3_client, s3_bucket, "out/") == []


def test_abort_job_twice_is_idempotent(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part-m-00000")
    committer.commit_task(attempt)
    committer.abort_job()
    committer.abort_job()
    assert list_keys(s3_client, s3_bucket, "out/") == []


def test_abort_job_without_abort_task_aborts_the_uploads(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    committed = committer.setup_task(committer.new_task_attempt_id(0))
    write(committed, "a")
    committer.commit_task(committed)
    uncommitted = committer.setup_task(committer.new_task_attempt_id(1))
    write(uncommitted, "b")
    committer.abort_job()
    assert list_keys(s3_client, s3_bucket, "out/") == []


def test_commit_job_twice_fails(name, make):
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part")
    committer.commit_job([committer.commit_task(attempt)])
    with pytest.raises(CommitStateError, match="already committed"):
        committer.commit_job([])


def test_concurrent_task_commits_with_subdirectories(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    messages, errors = [], []

    def task(n):
        try:
            attempt = committer.setup_task(committer.new_task_attempt_id(n))
            write(attempt, f"SUB_DIR/part-m-0000{n}")
            messages.append(committer.commit_task(attempt))
        except Exception as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=task, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    committer.commit_job(messages)
    assert user_keys(s3_client, s3_bucket) == ["out/SUB_DIR/part-m-00000", "out/SUB_DIR/part-m-00001",
                                               "out/_SUCCESS"]


def test_parallel_jobs_to_adjacent_paths_do_not_touch_each_other(name, make, s3_client, s3_bucket):
    job1 = make(name, target=f"s3://{s3_bucket}/out/job1")
    job2 = make(name, target=f"s3://{s3_bucket}/out/job2")
    for job in (job1, job2):
        job.setup_job()
    t2 = job2.setup_task(job2.new_task_attempt_id(0))
    write(t2, "part-2")
    m2 = job2.commit_task(t2)
    t1 = job1.setup_task(job1.new_task_attempt_id(0))
    write(t1, "part-1")
    m1 = job1.commit_task(t1)
    job1.commit_job([m1])
    assert [u["Key"] for u in pending_uploads(s3_client, s3_bucket)] == ["out/job2/part-2"]
    job2.commit_job([m2])
    assert user_keys(s3_client, s3_bucket) == ["out/job1/_SUCCESS", "out/job1/part-1", "out/job2/_SUCCESS",
                                               "out/job2/part-2"]


def test_parallel_jobs_to_the_same_destination_keep_both_outputs(name, make, s3_client, s3_bucket):
    job1, job2 = make(name), make(name)
    assert job1.layout.job_dir != job2.layout.job_dir
    for job in (job1, job2):
        job.setup_job()
    # Same task attempt id in both jobs; job 1 commits while job 2's file is still open.
    t1 = job1.setup_task("attempt_20261122_0000_m_000000_0")
    t2 = job2.setup_task("attempt_20261122_0000_m_000000_0")
    write(t1, "task1-part")
    open_file = t2.open("task2-part")
    open_file.write(b"still writing")
    job1.commit_job([job1.commit_task(t1)])
    open_file.close()
    job2.commit_job([job2.commit_task(t2)])
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/task1-part", "out/task2-part"]
    assert read_success(s3_client, s3_bucket).job_id == job2.job_id


def test_success_marker_can_be_switched_off(name, make, s3_client, s3_bucket):
    committer = make(name, success_marker=False)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part")
    committer.commit_job([committer.commit_task(attempt)])
    assert user_keys(s3_client, s3_bucket) == ["out/part"]


def test_commit_job_from_the_job_directory_without_messages(name, make, s3_client, s3_bucket):
    committer = make(name)
    committer.setup_job()
    for n in range(3):
        attempt = committer.setup_task(committer.new_task_attempt_id(n))
        write(attempt, f"part-{n}")
        committer.commit_task(attempt)
    committer.commit_job()
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS", "out/part-0", "out/part-1", "out/part-2"]


def test_task_commit_messages_are_small_and_picklable(name, make):
    import pickle

    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part")
    message = committer.commit_task(attempt)
    data = pickle.dumps(message)
    assert len(data) < 1024
    committer.commit_job([pickle.loads(data)])


def test_a_job_that_never_commits_leaves_the_old_success_marker_and_a_commit_replaces_it(
        name, make, s3_client, s3_bucket):
    # Nothing changes at the destination before the commit holds its lease: a job that fails or never commits
    # leaves it exactly as it was, _SUCCESS included.
    old = json.dumps({"old": True}).encode()
    s3_client.put_object(Bucket=s3_bucket, Key="out/_SUCCESS", Body=old)
    failed = make(name)
    failed.setup_job()
    write(failed.setup_task(failed.new_task_attempt_id(0)), "never-committed")
    failed.abort_job()
    assert user_keys(s3_client, s3_bucket) == ["out/_SUCCESS"]
    assert s3_client.get_object(Bucket=s3_bucket, Key="out/_SUCCESS")["Body"].read() == old
    committer = make(name)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    write(attempt, "part")
    committer.commit_job([committer.commit_task(attempt)])
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="out/_SUCCESS")["Body"].read())
    assert success["jobId"] == committer.job_id


def test_an_attempt_committing_after_the_accepted_one_is_refused_not_published(name, make, s3_client, s3_bucket):
    # Speculation without a commit coordinator: the driver accepted attempt 0, then attempt 1 also committed
    # and replaced the task's pendingset. Publishing it would publish output nobody accepted.
    from s3commit import ManifestError

    committer = make(name)
    committer.setup_job()
    first = committer.setup_task(committer.new_task_attempt_id(0, 0))
    second = committer.setup_task(committer.new_task_attempt_id(0, 1))
    write(first, "from-attempt-0")
    write(second, "from-attempt-1")
    accepted = committer.commit_task(first)
    committer.commit_task(second)
    with pytest.raises(ManifestError, match="two attempts of one task committed"):
        committer.commit_job([accepted])
    assert user_keys(s3_client, s3_bucket) == []
