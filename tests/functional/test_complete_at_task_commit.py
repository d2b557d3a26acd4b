"""Snapshot destinations whose tasks complete their uploads at task commit (issue 55, outcome 3): the job commit
sends no Complete for them; a key that exists stays pending; losers, aborted and dead jobs, and task commits cut
short leave no file in any snapshot, and their completed files are deleted (by the abort, the sweep, the attempt
that superseded them, or a full vacuum)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from typing import Any

import pytest

import s3commit
from s3commit import create_committer
from s3commit.commit.manifest_store import load_pendingset
from s3commit.commit.process_state import ProcessState
from s3commit.commit.snapshots import SnapshotLog, vacuum
from s3commit.commit.sweep import sweep_dead_jobs
from s3commit.committers.base import Committer
from s3commit.config.options import CommitterOptions
from s3commit.errors import JobCommitError
from s3commit.model.paths import LEASE_NAME, is_scratch_key
from s3commit.model.task_message import TaskCommitMessage
from s3commit.testing.memory import MemoryS3, ProcessStopped, client_of, s3_error
from tests.functional.test_snapshots import BUCKET, DAY, DEST, URI


def committers(s3: MemoryS3, name: str = "magic", **options: Any) -> tuple[Committer, Committer]:
    """A job set up in a driver process, and its committer in an executor process."""
    job_id = str(uuid.uuid4())
    opts = CommitterOptions(threads=4, **options)
    driver = create_committer(name, DEST, job_id=job_id, store=s3.store(), options=opts, process=ProcessState())
    driver.setup_job()
    executor = create_committer(name, DEST, job_id=job_id, store=s3.store(), options=opts, process=ProcessState())
    return driver, executor


def run_task(executor: Committer, files: dict[str, bytes], task: int = 0, attempt: int = 0) -> Any:
    ref = executor.setup_task(executor.new_task_attempt_id(task, attempt))
    for relative, body in files.items():
        with ref.open(relative) as out:
            out.write(body)
    return executor.commit_task(ref)


def snapshot_dest(s3: MemoryS3, files: dict[str, bytes]) -> None:
    """``files`` committed by a first job, then the destination made a snapshot destination."""
    driver, executor = committers(s3)
    driver.commit_job([run_task(executor, files)])
    s3commit.enable_snapshots(DEST, store=s3.store())


def reader(s3: MemoryS3) -> dict[str, bytes]:
    """What a reader of the log reads."""
    snapshot = SnapshotLog(s3.store(), URI).current()
    assert snapshot is not None
    objects = s3.objects(BUCKET, "t/")
    return {f.relative: objects[f"t/{f.relative}"] for f in snapshot.files}


def data(s3: MemoryS3) -> dict[str, bytes]:
    """What a plain lister reads: every object under the destination but scratch keys, the log and ``_SUCCESS``."""
    return {k[2:]: v for k, v in s3.objects(BUCKET, "t/").items()
            if not is_scratch_key(k) and "_spark_metadata" not in k and not k.endswith("_SUCCESS")}


def completed_flags(s3: MemoryS3, message: Any) -> dict[str, bool]:
    pendingset = load_pendingset(s3.store(), BUCKET, message.pendingset_key)
    return {c.destination_key[2:]: c.completed_at_task_commit for c in pendingset.commits}


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_the_job_commit_sends_no_complete_for_uploads_completed_at_task_commit(s3, name):
    snapshot_dest(s3, {"p=0/old": b"old"})
    driver, executor = committers(s3, name)
    messages = [run_task(executor, {f"p={t}/f{i}": f"{t}{i}".encode() for i in range(3)}, task=t) for t in range(2)]
    assert all(all(completed_flags(s3, m).values()) for m in messages)
    # Completed, and a plain lister sees them already; a reader of the log does not.
    assert len(data(s3)) == 1 + 6 and reader(s3) == {"p=0/old": b"old"}
    client = client_of(driver.store)
    before = len(client.requests)
    success = driver.commit_job(messages)
    sent = [r.operation for r in client.requests[before:]]
    assert "complete_multipart_upload" not in sent
    assert success.metrics["committer_commits_completed_at_task_commit"] == 6
    assert success.metrics["committer_commits_completed"] == 0
    assert len(reader(s3)) == 7 and reader(s3) == data(s3)
    assert s3.uploads(BUCKET) == []


def test_the_job_commit_takes_what_tasks_completed_from_their_messages_and_reads_no_pendingset(s3):
    """A task that completed every upload at its commit says which in its message (as Spark carries it to the
    driver): the job commit checks those entries as a pendingset's and reads none; the pendingset stays the
    record `recover` reads. Where two attempts' messages name one pendingset, it is read (the last saved wins)."""
    snapshot_dest(s3, {})
    driver, executor = committers(s3)
    messages = [run_task(executor, {f"p={t}/f{i}": f"{t}{i}".encode() for i in range(3)}, task=t) for t in range(3)]
    for t, message in enumerate(messages):
        assert sorted((k, n) for k, n, _ in message.completed) == [(f"t/p={t}/f{i}", 2) for i in range(3)]
        assert TaskCommitMessage.from_dict(json.loads(json.dumps(asdict(message)))) == message
    second = run_task(executor, {"p=9/x": b"x"}, task=9, attempt=1)
    first = run_task(executor, {"p=9/x": b"x"}, task=9, attempt=0)  # attempt 0 ran late: it loses
    assert first.pendingset_key == second.pendingset_key
    client = client_of(driver.store)
    before = len(client.requests)
    success = driver.commit_job([*messages, second, first])
    read = [r.key for r in client.requests[before:] if r.operation == "get_object" and r.key.endswith(".pendingset")]
    assert read == [second.pendingset_key]
    # The late attempt 0 found attempt 1's file there and left its upload pending: the job commit completed it.
    assert success.metrics["committer_commits_completed_at_task_commit"] == 9
    assert success.metrics["committer_commits_completed"] == 1
    assert reader(s3) == {**{f"p={t}/f{i}": f"{t}{i}".encode() for t in range(3) for i in range(3)}, "p=9/x": b"x"}
    assert reader(s3) == data(s3) and s3.uploads(BUCKET) == []


def test_a_message_of_a_task_that_left_an_upload_pending_carries_no_entries(s3):
    snapshot_dest(s3, {"p=0/a": b"old"})
    s3commit.disable_snapshots(DEST, store=s3.store())
    s3.store().objects.put_object(BUCKET, "t/_keep", b"")
    s3commit.enable_snapshots(DEST, store=s3.store())
    _, executor = committers(s3)
    s3.store().objects.put_object(BUCKET, "t/p=0/b", b"left")  # in no snapshot: the task commit leaves it pending
    message = run_task(executor, {"p=0/b": b"new", "p=0/c": b"c"})
    assert message.completed == ()
    assert completed_flags(s3, message) == {"p=0/b": False, "p=0/c": True}


def test_a_key_of_the_current_snapshot_is_never_rewritten_in_place(s3):
    snapshot_dest(s3, {"p=0/a": b"old"})
    driver, executor = committers(s3)
    message = run_task(executor, {"p=0/a": b"new", "p=0/b": b"b"})
    # The live file is not replaced under a reader at task commit: its upload stays pending, marked so.
    assert completed_flags(s3, message) == {"p=0/a": False, "p=0/b": True}
    assert s3.objects(BUCKET, "t/p=0/a")["t/p=0/a"] == b"old"
    assert len(s3.uploads(BUCKET)) == 1
    # Nor at job commit: the job is refused, naming why, before any Complete; what it completed is deleted.
    with pytest.raises(JobCommitError, match=r"names of files of snapshot 0 .*rewrite them in place"):
        driver.commit_job([message])
    assert reader(s3) == {"p=0/a": b"old"}
    assert data(s3) == {"p=0/a": b"old"}
    assert s3.uploads(BUCKET) == []


def test_a_key_there_but_in_no_snapshot_is_completed_by_the_job_commit(s3):
    """A key there that no snapshot lists (a file a failed job left, not vacuumed yet) is no reader's: the job
    commit completes it."""
    snapshot_dest(s3, {})
    s3.store().objects.put_object(BUCKET, "t/p=0/a", b"left")
    driver, executor = committers(s3)
    message = run_task(executor, {"p=0/a": b"new", "p=0/b": b"b"})
    assert completed_flags(s3, message) == {"p=0/a": False, "p=0/b": True}
    success = driver.commit_job([message])
    assert success.metrics["committer_commits_completed"] == 1
    assert success.metrics["committer_commits_completed_at_task_commit"] == 1
    assert reader(s3) == {"p=0/a": b"new", "p=0/b": b"b"}


@pytest.mark.parametrize("options, enable", [({"complete_at_task_commit": False}, True), ({}, False)],
                         ids=["key-off", "plain-destination"])
def test_uploads_stay_pending_with_the_key_off_or_on_a_plain_destination(s3, options, enable):
    if enable:
        snapshot_dest(s3, {})
    driver, executor = committers(s3, **options)
    message = run_task(executor, {"p=0/a": b"a"})
    assert completed_flags(s3, message) == {"p=0/a": False}
    assert "p=0/a" not in data(s3)
    success = driver.commit_job([message])
    assert success.metrics["committer_commits_completed"] == 1
    assert data(s3) == {"p=0/a": b"a"}


def test_a_destination_enabled_after_the_jobs_setup_gets_pending_uploads_and_commits_them(s3):
    driver, executor = committers(s3)  # set up on a plain destination: the executor's copy knows none
    s3commit.enable_snapshots(DEST, store=s3.store())
    executor.snapshot_dest = False  # as pickled from the driver's setup
    message = run_task(executor, {"p=0/a": b"a"})
    assert completed_flags(s3, message) == {"p=0/a": False}
    driver.commit_job([message])
    assert reader(s3) == {"p=0/a": b"a"}


def test_a_destination_disabled_after_its_tasks_completed_fails_the_commit_and_rolls_it_back(s3):
    snapshot_dest(s3, {"p=0/old": b"old"})
    driver, executor = committers(s3)
    messages = [run_task(executor, {"p=0/a": b"a"}, task=0), run_task(executor, {"p=1/b": b"b"}, task=1)]
    s3commit.disable_snapshots(DEST, store=s3.store())  # deletes every file in no snapshot: the tasks' files
    with pytest.raises(JobCommitError, match="completed at its task commit"):
        driver.commit_job(messages)
    assert data(s3) == {"p=0/old": b"old"} and s3.uploads(BUCKET) == []


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_an_aborted_job_leaves_no_file(s3, name):
    snapshot_dest(s3, {"p=0/old": b"old"})
    driver, executor = committers(s3, name)
    for t in range(3):
        run_task(executor, {f"p={t}/f": b"x", f"p={t}/g": b"y"}, task=t)
    assert len(data(s3)) == 7
    driver.abort_job()
    assert data(s3) == {"p=0/old": b"old"} == reader(s3)
    assert s3.uploads(BUCKET) == []
    assert not [k for k in s3.objects(BUCKET) if is_scratch_key(k) and not k.endswith(LEASE_NAME)]


def test_an_abort_keeps_a_file_a_later_commit_put_at_the_same_key(s3):
    snapshot_dest(s3, {})
    first, first_executor = committers(s3)
    run_task(first_executor, {"p=0/a": b"first"})
    second, second_executor = committers(s3)
    second.commit_job([run_task(second_executor, {"p=0/a": b"second"})])  # pending (the key existed), completed
    first.abort_job()
    assert reader(s3) == {"p=0/a": b"second"} == data(s3)


def test_a_dead_jobs_completed_files_are_deleted_by_the_sweep(s3):
    snapshot_dest(s3, {"p=0/old": b"old"})
    driver, executor = committers(s3)
    run_task(executor, {"p=1/a": b"a", "p=1/b": b"b"})
    driver.process.end()  # the driver dies: its liveness record is no longer renewed
    s3.advance(CommitterOptions().job_liveness + CommitterOptions().lease_duration + 1)
    result = sweep_dead_jobs(s3.store(), URI, liveness=CommitterOptions().job_liveness, sweeper="test",
                             conditional=True)
    assert result.uploads_aborted == 2
    assert data(s3) == {"p=0/old": b"old"} == reader(s3)


def test_an_attempt_that_loses_leaves_no_file(s3):
    snapshot_dest(s3, {})
    driver, executor = committers(s3)
    run_task(executor, {"p=0/from-attempt-0": b"0", "p=0/both": b"0"}, attempt=0)
    # A second attempt of the task commits after it (no commit coordinator): last attempt wins.
    winner = run_task(executor, {"p=0/from-attempt-1": b"1", "p=0/both": b"1"}, attempt=1)
    assert "p=0/from-attempt-0" not in data(s3)
    # The key both wrote was completed by the loser: the winner's upload of it stayed pending.
    assert completed_flags(s3, winner) == {"p=0/both": False, "p=0/from-attempt-1": True}
    driver.commit_job([winner])
    assert reader(s3) == {"p=0/from-attempt-1": b"1", "p=0/both": b"1"} == data(s3)


@pytest.mark.parametrize("name", ["magic", "directory"])
def test_a_task_commit_killed_at_every_request_leaves_readers_the_old_snapshot_and_nothing_after_vacuum(s3, name):
    """The executor dies at each request of its task commit: a reader of the log sees the old snapshot; the job's
    abort deletes what the pendingset names, and a full vacuum past the horizon what no record names (files
    completed before the pendingset was saved)."""
    def attempt(stop_at: int | None) -> tuple[MemoryS3, int]:
        s3 = MemoryS3()
        s3.create_bucket(BUCKET)
        snapshot_dest(s3, {"p=0/old": b"old"})
        driver, executor = committers(s3, name)
        ref = executor.setup_task(executor.new_task_attempt_id(0))
        for i in range(4):
            with ref.open(f"p=1/f{i}") as out:
                out.write(b"x")
        if name == "magic":  # the files' background closes end before the process is made to die
            registry, key = executor.process.tasks, (executor.job_id, ref.task_attempt_id)
            with registry._lock:
                registry._lock.wait_for(lambda: not registry._states[key].closing)
        client = client_of(executor.store)
        before = len(client.requests)
        if stop_at is not None:
            client.stop_at = before + stop_at
        try:
            executor.commit_task(ref)
        except ProcessStopped:
            executor.process.end()
        sent = len(client.requests) - before
        assert reader(s3) == {"p=0/old": b"old"}
        driver.abort_job()
        assert reader(s3) == {"p=0/old": b"old"}
        s3.advance(DAY + 1)
        vacuum(s3.store(), URI, full=True)
        assert data(s3) == {"p=0/old": b"old"}, f"task commit killed at request {stop_at}"
        return s3, sent

    _, total = attempt(None)
    assert total >= 5  # the Completes and the pendingset, at least
    for n in range(1, total + 1):
        attempt(n)


def test_a_job_commit_that_fails_before_its_log_entry_deletes_the_files_completed_at_task_commit(s3):
    snapshot_dest(s3, {"p=0/old": b"old"})
    job_id = str(uuid.uuid4())
    opts = CommitterOptions(threads=4)

    def refuse_the_entry(request: Any) -> Exception | None:
        if request.operation == "put_object" and request.key.endswith(".compact"):
            return s3_error("AccessDenied", 403)
        return None

    driver = create_committer("magic", DEST, job_id=job_id, store=s3.store(fail=refuse_the_entry), options=opts,
                              process=ProcessState())
    driver.setup_job()
    executor = create_committer("magic", DEST, job_id=job_id, store=s3.store(), options=opts, process=ProcessState())
    messages = [run_task(executor, {"p=1/a": b"a", "p=1/b": b"b"})]
    assert len(data(s3)) == 3
    with pytest.raises(JobCommitError) as failed:
        driver.commit_job(messages)
    assert failed.value.reverted == 2  # counted as completed by the roll-back: deleted
    assert data(s3) == {"p=0/old": b"old"} == reader(s3)
    assert s3.uploads(BUCKET) == []


def test_the_job_commit_reads_no_log_entry_its_process_holds_as_it_is_and_reads_one_that_changed(s3):
    """The latest entry is read at the job's setup (or kept from the commit that wrote it, in the same process): the
    job commit builds the next snapshot on it without a GET, unless another process published since (a new ETag)."""
    snapshot_dest(s3, {"p=0/old": b"old"})
    driver_process = ProcessState()

    def job(process: ProcessState) -> tuple[Committer, Committer]:
        job_id = str(uuid.uuid4())
        opts = CommitterOptions(threads=4)
        driver = create_committer("magic", DEST, job_id=job_id, store=s3.store(), options=opts, process=process)
        driver.setup_job()
        return driver, create_committer("magic", DEST, job_id=job_id, store=s3.store(), options=opts,
                                        process=ProcessState())

    def entries_read(driver: Committer, messages: list[Any]) -> list[str]:
        client = client_of(driver.store)
        before = len(client.requests)
        driver.commit_job(messages)
        return [r.key for r in client.requests[before:]
                if r.operation == "get_object" and "/_spark_metadata/" in r.key and r.key.endswith(".compact")]

    # A job set up in the driver's process commits: the entry its setup read is the one it builds on.
    first, executor = job(driver_process)
    assert entries_read(first, [run_task(executor, {"p=1/a": b"a"})]) == []
    # The next job of that process builds on the entry the first one wrote.
    second, executor = job(driver_process)
    assert entries_read(second, [run_task(executor, {"p=2/b": b"b"})]) == []
    # A job set up, then another process commits: the entry changed, and the job commit reads the new one.
    third, executor = job(driver_process)
    message = run_task(executor, {"p=3/c": b"c"})
    other, other_executor = job(ProcessState())
    other.commit_job([run_task(other_executor, {"p=4/d": b"d"})])
    assert entries_read(third, [message]) == ["t/_spark_metadata/3.compact"]
    assert reader(s3) == {"p=0/old": b"old", "p=1/a": b"a", "p=2/b": b"b", "p=3/c": b"c", "p=4/d": b"d"}
