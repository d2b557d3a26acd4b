"""Fault matrix: jobs run through the simulated S3 while it injects 503 SlowDown, 500 InternalError,
connection resets (before and after the request reached S3) and 200-with-an-error-body on every operation
type, seeded, at total rates of 2-5% per request. Every job must either commit exactly the right objects or
fail cleanly (nothing of it visible, old data intact); nothing is visible before the job commit; no upload
is left pending and no job directory is left behind.

Each seed also picks a flavour: random faults only (the job should succeed: the store retries), plus a
permanent failure of CompleteMultipartUpload (the job commit must fail and roll back under faults), or plus
a permanent failure of UploadPart (a task fails; the driver aborts the task and the job, under faults).

The default run uses a few seeds per committer; the slow marker runs the full count (30 jobs per committer).
A per-prefix throttle test checks that ``CommitterOptions.rate_limit`` keeps a job commit under it.
"""

from __future__ import annotations

import time

import pytest

from s3commit import JobCommitError, S3CommitError, create_committer
from s3commit.commit.recovery import recover
from s3commit.config.options import RetryPolicy
from s3commit.testing import FaultSpec, ThrottleSpec
from tests.reliability.helpers import (
    COMMITTERS,
    JobSpec,
    assert_clean,
    expected_objects,
    make_store,
    read,
    run_tasks,
    user_keys,
)

pytestmark = pytest.mark.integration

OPERATIONS = [
    "HeadBucket", "HeadObject", "GetObject", "PutObject", "DeleteObject", "DeleteObjects", "ListObjectsV2",
    "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload",
    "ListMultipartUploads",
]
"""Every S3 operation the committers use."""
KINDS = ["503", "500", "reset", "200-error"]
RATES = [0.02, 0.035, 0.05]
DEFAULT_SEEDS = range(2)
FULL_SEEDS = range(2, 30)
OLD = "out/old/keep.txt"
PERMANENT = 14
"""Consecutive scripted faults that make one request exhaust its 7 attempts even with 2 threads racing."""


def fault_spec(rate: float) -> FaultSpec:
    """``rate`` per request on every operation, split evenly over the kinds that operation can see."""
    per_operation = {}
    for operation in OPERATIONS:
        kinds = KINDS if operation == "CompleteMultipartUpload" else KINDS[:3]
        per_operation[operation] = {kind: rate / len(kinds) for kind in kinds}
    return FaultSpec(operation_rates=per_operation, reset_after_forward=0.5)


def drive(committer, spec: JobSpec, *, before_commit=lambda: None):
    """Run a job as a driver would: a failed task is aborted; a failed job is aborted.

    Returns ``(SuccessData, None)`` or ``(None, the first error)``.
    """
    try:
        committer.setup_job()
        messages = []
        for task in range(spec.tasks):
            attempt = committer.setup_task(committer.new_task_attempt_id(task))
            try:
                for index in range(spec.files):
                    with attempt.open(spec.name(committer, task, index)) as out:
                        out.write(spec.body(task, index))
                messages.append(committer.commit_task(attempt))
            except S3CommitError:
                committer.abort_task(attempt)
                raise
        before_commit()
        return committer.commit_job(messages), None
    except S3CommitError as err:
        committer.abort_job()
        return None, err


def run_seed(committer_name: str, seed: int, sim, tmp_path, tally) -> None:
    # Given: a destination with old data, and faults at 2-5% on every operation (seeded).
    bucket = sim.create_bucket(f"faults-{committer_name[:4]}-{seed}-{time.monotonic_ns() % 10**8}")
    raw = sim.client(raw=True)  # the test's own view of S3 bypasses the faults
    raw.put_object(Bucket=bucket, Key=OLD, Body=b"old")
    flavour = ("random", "complete-fails", "part-fails")[seed % 3]
    # Every (flavour, rate) pair within each 9 seeds; the default seeds run the random flavour at 5%.
    sim.configure(faults=fault_spec(RATES[(2 - seed + seed // 3) % 3]), seed=seed)
    if flavour == "part-fails":
        sim.fail_next("UploadPart", "503", PERMANENT)
    store = make_store(sim)
    committer = create_committer(committer_name, f"s3://{bucket}/out", store=store, threads=2,
                                 staging_dir=str(tmp_path / "staging"))
    spec = JobSpec(tasks=3, files=3, job_id_in_names=bool(seed % 2))

    def before_commit() -> None:
        # Nothing of the job is visible before its commit.
        assert user_keys(raw, bucket) == [OLD]
        if flavour == "complete-fails":
            sim.fail_next("CompleteMultipartUpload", "500", PERMANENT)

    # When: the job runs.
    success, error = drive(committer, spec, before_commit=before_commit)
    stats = sim.stats()
    sim.configure(faults=None)
    sim.reset_simulator()

    # Then: exactly the job's objects and the old data, or only the old data; nothing pending or left over.
    expected = expected_objects(committer, spec)
    if success is not None:
        assert flavour == "random", f"the job should have failed ({flavour})"
        assert user_keys(raw, bucket) == sorted([*expected, OLD])
        assert all(read(raw, bucket, key) == body for key, body in expected.items())
        assert success.job_id == committer.job_id
        tally["fault matrix: jobs committed"] += 1
    else:
        assert user_keys(raw, bucket) == [OLD], f"partial output after {error!r}"
        assert flavour != "random" or "already has a commit journal" not in str(error)
        tally[f"fault matrix: jobs failed cleanly ({flavour})"] += 1
    assert read(raw, bucket, OLD) == b"old"
    assert_clean(raw, bucket)
    tally["fault matrix: jobs"] += 1
    tally["fault matrix: faults injected"] += stats.total_faults
    tally["fault matrix: requests"] += stats.total_requests


@pytest.mark.parametrize("seed", DEFAULT_SEEDS)
@pytest.mark.parametrize("committer_name", COMMITTERS)
def test_job_under_faults_commits_exactly_or_fails_cleanly(committer_name, seed, s3_sim, tmp_path, tally):
    run_seed(committer_name, seed, s3_sim, tmp_path, tally)


@pytest.mark.slow
@pytest.mark.parametrize("seed", FULL_SEEDS)
@pytest.mark.parametrize("committer_name", COMMITTERS)
def test_full_fault_matrix_commits_exactly_or_fails_cleanly(committer_name, seed, s3_sim, tmp_path, tally):
    run_seed(committer_name, seed, s3_sim, tmp_path, tally)


@pytest.mark.parametrize("committer_name", COMMITTERS)
def test_every_operation_type_recovers_from_each_fault_kind(committer_name, s3_sim, tmp_path, tally):
    # Given: for every operation type, its first requests fail with each fault kind in turn: 503, 500, a reset
    # before S3 saw the request, a reset after S3 applied it, and (Complete) 200 with an error body.
    bucket = s3_sim.create_bucket(f"every-op-{committer_name[:4]}-{time.monotonic_ns() % 10**8}")
    raw = s3_sim.client(raw=True)
    for operation in OPERATIONS:
        for kind in ("503", "500", "reset"):
            s3_sim.fail_next(operation, kind)
        s3_sim.fail_next(operation, "reset", after_forward=True)
        if operation == "CompleteMultipartUpload":
            s3_sim.fail_next(operation, "200-error")
    store = make_store(s3_sim)
    committer = create_committer(committer_name, f"s3://{bucket}/out", store=store, threads=2,
                                 staging_dir=str(tmp_path / "staging"))
    spec = JobSpec(tasks=2, files=3)
    # When: a job runs (and, so that Abort and HeadObject see their faults too, a second one is aborted).
    success, error = drive(committer, spec)
    other = create_committer(committer_name, f"s3://{bucket}/out", store=store, threads=2,
                             staging_dir=str(tmp_path / "staging2"))
    other.setup_job()
    attempt = other.setup_task(other.new_task_attempt_id(0))
    with attempt.open("aborted.txt") as out:
        out.write(b"never visible")
    other.commit_task(attempt)
    other.abort_job()
    stats = s3_sim.stats()
    # Then: the job committed exactly its files, and every scripted fault was served.
    assert error is None, error
    assert success.job_id == committer.job_id
    assert user_keys(raw, bucket) == sorted(expected_objects(committer, spec))
    unserved = s3_sim.configure()["scripted"]
    used = {op: kinds for op, kinds in stats.faults.items() if op in OPERATIONS}
    for operation in ("HeadBucket", "PutObject", "GetObject", "ListObjectsV2", "DeleteObjects",
                      "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "ListMultipartUploads",
                      "AbortMultipartUpload", "DeleteObject"):
        assert operation not in unserved, f"{operation} never saw its faults"
        assert set(used[operation]) >= {"503", "500", "reset"}, (operation, used[operation])
    assert used["CompleteMultipartUpload"].get("200-error") == 1
    assert_clean(raw, bucket)
    tally["fault matrix: jobs"] += 2
    tally["fault matrix: faults injected"] += stats.total_faults


def test_lost_response_to_the_journal_put_does_not_fail_the_commit(s3_sim, tmp_path):
    # Given: the journal PUT (If-None-Match: *) reaches S3 but its response is lost, so the store's retry
    # meets the journal it wrote itself (412 Precondition Failed).
    bucket = s3_sim.create_bucket(f"journal-{time.monotonic_ns() % 10**8}")
    raw = s3_sim.client(raw=True)
    committer = create_committer("magic", f"s3://{bucket}/out", store=make_store(s3_sim), threads=2)
    spec = JobSpec(tasks=2, files=2)

    def lose_the_next_put() -> None:
        # After the task commits, the next PutObject is the journal's.
        s3_sim.fail_next("PutObject", "reset", after_forward=True)

    # When: the job commits.
    success, error = drive(committer, spec, before_commit=lose_the_next_put)
    # Then: the commit recognises its own journal and succeeds.
    assert error is None, error
    assert success.job_id == committer.job_id
    assert s3_sim.stats().resets_after_forward.get("PutObject") == 1
    assert user_keys(raw, bucket) == sorted(expected_objects(committer, spec))
    assert_clean(raw, bucket)


THROTTLE_WRITES = 50.0
"""Writes per second per prefix: S3's 3,500 scaled down 70 times so that 2 cores can exceed it."""
RATE_LIMIT = 40.0
"""Completes per second the job commit is held to: 80% of the throttle, leaving room for the other writes
of the commit (journal, ``_SUCCESS``, deletes), as 2,800/s would under S3's 3,500."""
FILES = 100
BURST_SECONDS = 0.5
"""The throttle's bucket: 25 writes at once. It absorbs the bunching of paced requests on a loaded machine
(with 0.2 s, 4 of 100 were refused under three test workers on 2 cores)."""


def _throttled_job(sim, tmp_path, name: str, *, rate_limit: float):
    bucket = sim.create_bucket(f"throttle-{name}-{time.monotonic_ns() % 10**8}")
    store = make_store(sim, retry=RetryPolicy(max_attempts=10, initial_delay=0.05, max_delay=0.5))
    committer = create_committer("directory", f"s3://{bucket}/out", store=store, threads=16,
                                 staging_dir=str(tmp_path / name), rate_limit=rate_limit)
    spec = JobSpec(tasks=1, files=FILES)
    messages = run_tasks(committer, spec)  # uploads happen before the throttle is on
    sim.configure(throttle=ThrottleSpec(writes_per_second=THROTTLE_WRITES, burst_seconds=BURST_SECONDS))
    sim.reset_stats()
    started = time.monotonic()
    try:
        success, error = committer.commit_job(messages), None
    except JobCommitError as err:
        success, error = None, err
    elapsed = time.monotonic() - started
    stats = sim.stats()
    sim.configure(throttle=None)
    if error is not None and error.not_rolled_back:
        # The roll back's own deletes were refused through all their attempts (the throttle was still on): the
        # error keeps the journal and names the command that finishes it, which a user then runs.
        assert f"s3commit recover s3://{bucket}/out --job {committer.job_id} --abort" in str(error), error
        recover(store, f"s3://{bucket}/out", committer.job_id, abort=True)
    return bucket, success or error, elapsed, stats


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_rate_limit_keeps_the_job_commit_under_a_per_prefix_throttle(s3_sim, tmp_path):
    # Given: S3 throttles writes to 50/s per prefix (3,500/s scaled down), and a job of 100 files.
    # When: the job commit is limited to 40 Completes per second.
    bucket, success, elapsed, stats = _throttled_job(s3_sim, tmp_path, "limited", rate_limit=RATE_LIMIT)
    assert not isinstance(success, JobCommitError), success
    # Then: S3 never had to refuse a request, and the commit took about 100/40 s.
    assert stats.throttled == {}, stats.throttled
    assert stats.requests["CompleteMultipartUpload"] == FILES
    assert success.metrics["committer_commits_completed"] == FILES
    assert FILES / RATE_LIMIT * 0.8 < elapsed < FILES / RATE_LIMIT * 3
    assert_clean(s3_sim.client(raw=True), bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_without_a_rate_limit_the_same_commit_is_throttled(s3_sim, tmp_path):
    # The control for the test above: 16 threads completing at full speed exceed 50 writes/s on one prefix,
    # so S3 answers 503 SlowDown; the store backs off, and a request that stays throttled through all its
    # attempts fails the commit, which then rolls back. Either way nothing is left half done.
    bucket, outcome, elapsed, stats = _throttled_job(s3_sim, tmp_path, "unlimited", rate_limit=0.0)
    raw = s3_sim.client(raw=True)
    if not stats.throttled and elapsed > (FILES - THROTTLE_WRITES * BURST_SECONDS) / THROTTLE_WRITES:
        pytest.skip(f"this machine is too loaded to exceed the throttle: 16 threads completed {FILES} uploads "
                    f"in {elapsed:.1f} s, under {THROTTLE_WRITES:.0f}/s")
    assert stats.throttled.get("CompleteMultipartUpload", 0) > 0
    if isinstance(outcome, JobCommitError):
        assert "SlowDown" in str(outcome)
        assert user_keys(raw, bucket) == []
    else:
        assert outcome.metrics["committer_commits_completed"] == FILES
    assert_clean(raw, bucket)
