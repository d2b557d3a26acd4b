"""Concurrency: jobs writing to one destination and to adjacent paths at the same time.

Concurrent jobs must not see, abort or delete each other's work (HADOOP-17318, HADOOP-18797): each job has
its own directory (``__magic_job-<id>``, ``__staging_job-<id>``), and the orphan sweep at commit aborts only
uploads that provably belong to the job. Adjacent paths (``out-1``, ``out1``, ``out.2`` next to ``out``)
catch prefix matching done on strings instead of path elements.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from s3commit import JobCommitError, create_committer
from s3commit.errors import CommitStateError, TransientError
from s3commit.store.s3store import S3Store
from s3commit.store.uploads import UploadRequests
from s3commit.testing.assertions import list_keys
from tests.reliability.crash_child import file_body, file_name
from tests.reliability.helpers import (
    JobSpec,
    assert_clean,
    expected_objects,
    final_key,
    make_store,
    read,
    store_options,
    success_json,
    user_keys,
)

pytestmark = pytest.mark.integration

SHARED = "out"
ADJACENT = ["out-1", "out1", "out.2", "out_3"]


def _job(committer_name, dest, s3_sim, tmp_path, *, store=None):
    committer = create_committer(committer_name, dest, store=store or make_store(s3_sim), threads=4,
                                 staging_dir=str(tmp_path / "staging"))
    # Spark's file names carry the job id, so appending jobs never write the same key.
    return committer, JobSpec(tasks=3, files=2, job_id_in_names=True)


def _run_in_phases(jobs, barrier, *, commit=True):
    """Each job: setup, [barrier], tasks, [barrier], commit (or abort) -- all jobs in step."""

    def run(committer, spec, action):
        committer.setup_job()
        barrier.wait()
        messages = []
        for task in range(spec.tasks):
            attempt = committer.setup_task(committer.new_task_attempt_id(task))
            for index in range(spec.files):
                with attempt.open(spec.name(committer, task, index)) as out:
                    out.write(spec.body(task, index) + committer.job_id.encode())
            messages.append(committer.commit_task(attempt))
        barrier.wait()
        if action == "abort":
            committer.abort_job()
            return None
        return committer.commit_job(messages)

    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(run, c, s, action) for c, s, action in jobs]
        return [f.exception() or f.result() for f in futures]


def _expected(committer, spec):
    return {k: v + committer.job_id.encode() for k, v in expected_objects(committer, spec).items()}


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_four_jobs_appending_to_one_destination_and_four_to_adjacent_paths(s3_sim, s3_bucket, tmp_path):
    # Given: four jobs appending to s3://b/out (two magic, one directory, one partitioned) and four jobs
    # writing to the adjacent paths out-1, out1, out.2, out_3.
    raw = s3_sim.client(raw=True)
    names = ["magic", "magic", "directory", "partitioned", "magic", "directory", "partitioned", "magic"]
    dests = [SHARED] * 4 + ADJACENT
    jobs = [(*_job(name, f"s3://{s3_bucket}/{dest}", s3_sim, tmp_path / str(i)), "commit")
            for i, (name, dest) in enumerate(zip(names, dests, strict=True))]
    s3_sim.reset_stats()
    # When: they set up, run their tasks and commit at the same moments.
    results = _run_in_phases(jobs, threading.Barrier(len(jobs), timeout=120))
    # Then: every job committed, and nobody aborted anything (no job saw another's uploads as orphans).
    for (committer, _spec, _), result in zip(jobs, results, strict=True):
        assert not isinstance(result, BaseException), f"{committer}: {result!r}"
        assert result.job_id == committer.job_id
    assert s3_sim.stats().requests.get("AbortMultipartUpload", 0) == 0
    # Every job's data is present, with its own content.
    for committer, spec, _ in jobs:
        for key, body in _expected(committer, spec).items():
            assert read(raw, s3_bucket, key) == body
    shared_expected = set().union(*(_expected(c, s) for c, s, _ in jobs[:4]))
    assert set(user_keys(raw, s3_bucket, f"{SHARED}/")) == shared_expected
    for (committer, spec, _), dest in zip(jobs[4:], ADJACENT, strict=True):
        assert set(user_keys(raw, s3_bucket, f"{dest}/")) == set(_expected(committer, spec))
    # Each _SUCCESS names its own job and lists only that job's files.
    for (committer, spec, _), result in zip(jobs, results, strict=True):
        own = {f"/{k}" for k in _expected(committer, spec)}
        assert set(result.filenames) == own
    for (committer, _spec, _), dest in zip(jobs[4:], ADJACENT, strict=True):
        assert success_json(raw, s3_bucket, dest)["jobId"] == committer.job_id
    # The shared destination's _SUCCESS is the last committer's: one of its four jobs, with its own files.
    shared_success = success_json(raw, s3_bucket, SHARED)
    by_id = {c.job_id: (c, s) for c, s, _ in jobs[:4]}
    assert shared_success["jobId"] in by_id
    owner, owner_spec = by_id[shared_success["jobId"]]
    assert set(shared_success["filenames"]) == {f"/{k}" for k in _expected(owner, owner_spec)}
    assert_clean(raw, s3_bucket)


def test_a_job_aborting_beside_committing_jobs_touches_only_its_own_uploads(s3_sim, s3_bucket, tmp_path):
    # Given: three jobs committing to s3://b/out while a fourth one, on the same destination, aborts.
    raw = s3_sim.client(raw=True)
    names = ["magic", "directory", "partitioned", "magic"]
    jobs = [(*_job(name, f"s3://{s3_bucket}/out", s3_sim, tmp_path / str(i)), "abort" if i == 3 else "commit")
            for i, name in enumerate(names)]
    # When: all run in step; the fourth aborts exactly when the others commit.
    results = _run_in_phases(jobs, threading.Barrier(len(jobs), timeout=120))
    # Then: the three committed in full; the aborted job left nothing.
    for (committer, spec, action), result in zip(jobs, results, strict=True):
        assert not isinstance(result, BaseException), f"{committer}: {result!r}"
        if action == "commit":
            assert all(read(raw, s3_bucket, k) == v for k, v in _expected(committer, spec).items())
    committed = set().union(*(_expected(c, s) for c, s, a in jobs if a == "commit"))
    assert set(user_keys(raw, s3_bucket)) == committed
    assert_clean(raw, s3_bucket)


class FailingCompletes(UploadRequests):
    """Fails its 4th CompleteMultipartUpload, so its job commit rolls back."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.completes = 0
        self.lock = threading.Lock()

    def complete_multipart_upload(self, bucket, key, upload_id, etags, **kwargs):
        with self.lock:
            self.completes += 1
            fail = self.completes == 4
        if fail:
            raise TransientError("injected failure", operation="CompleteMultipartUpload", bucket=bucket, key=key,
                                 upload_id=upload_id)
        return super().complete_multipart_upload(bucket, key, upload_id, etags, **kwargs)


class FailingCompleteStore(S3Store):
    """A store that fails its 4th CompleteMultipartUpload (:class:`FailingCompletes`)."""

    uploads_class = FailingCompletes


def test_a_job_commit_rolling_back_beside_committing_jobs_leaves_theirs_intact(s3_sim, s3_bucket, tmp_path):
    # Given: four magic jobs on one destination; the commit of one fails part-way and rolls back.
    raw = s3_sim.client(raw=True)
    jobs = []
    for i in range(4):
        store = FailingCompleteStore(store_options(s3_sim)) if i == 0 else None
        jobs.append((*_job("magic", f"s3://{s3_bucket}/out", s3_sim, tmp_path / str(i), store=store), "commit"))
    # When: all commit at once.
    results = _run_in_phases(jobs, threading.Barrier(len(jobs), timeout=120))
    # Then: the failed job reverted only its own files; the other three are complete.
    assert isinstance(results[0], JobCommitError)
    assert "injected failure" in str(results[0])
    for (committer, spec, _), result in zip(jobs[1:], results[1:], strict=True):
        assert not isinstance(result, BaseException), f"{committer}: {result!r}"
        assert all(read(raw, s3_bucket, k) == v for k, v in _expected(committer, spec).items())
    assert set(user_keys(raw, s3_bucket)) == set().union(*(_expected(c, s) for c, s, _ in jobs[1:]))
    assert_clean(raw, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_four_job_processes_on_adjacent_paths_at_once(s3_sim, s3_bucket, tmp_path):
    # Given: four separate processes (as four Spark drivers would be), one job each, on adjacent paths.
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, **s3_sim.env(), "PYTHONPATH": str(root)}
    env.pop("S3COMMIT_CRASH_AT", None)
    runs = []
    for i, dest in enumerate(ADJACENT):
        job_id = str(uuid.uuid4())
        committer = ["magic", "directory", "partitioned", "magic"][i]
        command = [sys.executable, str(Path(__file__).with_name("crash_child.py")), "--committer", committer,
                   "--dest", f"s3://{s3_bucket}/{dest}", "--job", job_id, "--staging-dir", str(tmp_path / dest)]
        runs.append((dest, committer, job_id, subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                                               stderr=subprocess.PIPE, text=True)))
    # When: they all run to the end.
    for dest, _committer, _job_id, process in runs:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, f"{dest}: {err[-2000:]}"
        assert "committed" in out
    # Then: each path holds exactly its job's files, and its _SUCCESS names that job.
    raw = s3_sim.client(raw=True)
    for dest, committer, job_id, _ in runs:
        names = [file_name(t, i) for t in range(3) for i in range(3)]
        keys = {final_key(committer, dest, n, job_id) for n in names}
        assert set(user_keys(raw, s3_bucket, f"{dest}/")) == keys
        assert read(raw, s3_bucket, sorted(keys)[0]) in {file_body(t, i, big=False) for t in range(3)
                                                           for i in range(3)}
        assert success_json(raw, s3_bucket, dest)["jobId"] == job_id
    assert list_keys(raw, s3_bucket, f"{SHARED}/") == []
    assert_clean(raw, s3_bucket)



@pytest.mark.parametrize("late", ["open", "close"])
def test_a_file_opened_or_closed_for_an_attempt_already_aborted_leaves_no_upload(s3_sim, s3_bucket, late):
    """Spark cancels a task by interrupting its thread: the JVM's request (open a file, close it) may still be
    running in the sidecar when the task's abort arrives on another connection and takes the attempt's
    uploads. What that request then starts or saves belongs to nobody: it must be aborted, not left behind."""
    from s3commit.committers.magic import open_magic_file

    committer = create_committer("magic", f"s3://{s3_bucket}/{SHARED}", store=make_store(s3_sim))
    committer.setup_job()
    attempt = committer.setup_task(f"attempt_{uuid.uuid4().hex[:12]}_0000_m_000003_0")
    custom = f"s3://{s3_bucket}/custom/p=1"
    late_path = attempt.absolute_work_path(custom, "part-00003.parquet")
    writer = open_magic_file(committer.store, late_path) if late == "close" else None
    if writer is not None:
        writer.write(b"written before the abort")
    committer.abort_task(attempt)  # a late file is not among the attempt's writers: only the registry knows
    with pytest.raises(CommitStateError, match="was aborted"):
        if writer is None:
            open_magic_file(committer.store, late_path).write(b"x")
        else:
            writer.close()
    committer.abort_job()
    assert_clean(s3_sim.client(), s3_bucket)
    assert list_keys(s3_sim.client(), s3_bucket, "custom/") == []


def test_an_attempt_set_up_again_after_an_abort_writes_again(s3_sim, s3_bucket):
    committer = create_committer("magic", f"s3://{s3_bucket}/{SHARED}", store=make_store(s3_sim))
    committer.setup_job()
    attempt_id = f"attempt_{uuid.uuid4().hex[:12]}_0000_m_000001_0"
    committer.abort_task(committer.setup_task(attempt_id))
    attempt = committer.setup_task(attempt_id)
    with attempt.open("again.txt") as f:
        f.write(b"again")
    committer.commit_job([committer.commit_task(attempt)])
    assert read(s3_sim.client(), s3_bucket, f"{SHARED}/again.txt") == b"again"
