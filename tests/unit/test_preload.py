"""The preload's bounds and what a job commit may take from it (:mod:`s3commit.commit.preload`), on a store whose
GETs the test answers (or holds, or fails)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from s3commit.commit import preload
from s3commit.commit.engine import CACHE_BUDGET
from s3commit.commit.preload import PendingsetPreloads
from s3commit.errors import NotFoundError
from s3commit.model.manifests import PendingSet, PendingUpload
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri

DEST = S3Uri.parse("s3://bkt/t")
JOB = "job-1"


def body(attempt: str, files: int = 2) -> bytes:
    commits = tuple(PendingUpload(bucket="bkt", destination_key=f"t/part-{attempt}-{n}", upload_id=f"u{n}",
                                  etags=("e",), length=1, uri=f"s3a://bkt/t/part-{attempt}-{n}")
                    for n in range(files))
    return PendingSet(commits=commits, job_id=JOB, extra_data={"task.attempt.id": attempt}).to_json()


class Objects:
    """GETs answered from ``bodies``; a key in ``held`` waits for ``release``; a key missing raises NotFound."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.held: set[str] = set()
        self.release = threading.Event()
        self.gets: list[str] = []

    def get_object(self, bucket: str, key: str) -> bytes:
        self.gets.append(key)
        if key in self.held:
            self.release.wait(30)
        if key not in self.bodies:
            raise NotFoundError("no such key", operation="GetObject", bucket=bucket, key=key)
        return self.bodies[key]


class Store:
    def __init__(self) -> None:
        self.objects = Objects()


def message(task: int, attempt: str, files: int = 2, job: str = JOB, **fields: Any) -> TaskCommitMessage:
    return TaskCommitMessage(job_id=job, task_id=f"task_{task}", task_attempt_id=attempt,
                             pendingset_key=f"t/__magic/{task}.pendingset", files=files, bytes=files, **fields)


@pytest.fixture
def preloads():
    made = PendingsetPreloads()
    yield made
    made.close()


def test_the_preload_holds_no_more_than_the_entries_a_commit_keeps_parsed():
    assert preload.PRELOAD_FILES <= CACHE_BUDGET


def test_what_was_read_by_the_accepted_attempt_is_taken_and_the_rest_is_left_to_the_commit(preloads):
    store = Store()
    read, wrong, failed = (message(n, f"attempt_{n}") for n in range(3))
    store.objects.bodies = {read.pendingset_key: body("attempt_0"), wrong.pendingset_key: body("attempt_other")}
    for m in (read, wrong, failed):
        assert preloads.add(store, DEST, m)
    accepted = {m.pendingset_key: {m.task_attempt_id} for m in (read, wrong, failed)}
    taken = preloads.take(DEST, JOB, accepted)
    # read: taken; wrong: written by another attempt since; failed: missing when read
    assert list(taken) == [read.pendingset_key]
    assert taken[read.pendingset_key].task_attempt_id == "attempt_0"
    assert not preloads.add(store, DEST, message(5, "attempt_5"))  # the job has ended here: nothing is held for it
    assert preloads.held(DEST, JOB) == 0


def test_the_commit_waits_for_the_reads_under_way_and_reads_itself_what_is_queued_behind_them(preloads, monkeypatch):
    monkeypatch.setattr(preload, "PRELOAD_THREADS", 1)
    store = Store()
    running, *queued = (message(n, f"attempt_{n}") for n in range(3))
    store.objects.bodies = {m.pendingset_key: body(m.task_attempt_id) for m in (running, *queued)}
    store.objects.held = {running.pendingset_key}
    preloads.add(store, DEST, running)
    while running.pendingset_key not in store.objects.gets:  # (its read has begun, and waits)
        threading.Event().wait(0.01)
    for m in queued:
        preloads.add(store, DEST, m)
    futures = list(preloads._jobs[(str(DEST), JOB)].reads.values())
    result: dict[str, PendingSet] = {}
    taking = threading.Thread(target=lambda: result.update(preloads.take(DEST, JOB, {
        m.pendingset_key: {m.task_attempt_id} for m in (running, *queued)})))
    taking.start()
    while not all(f.cancelled() for f in futures[1:]):  # more left than one round of the readers: cancelled
        threading.Event().wait(0.01)
    assert taking.is_alive()  # and it waits for the one being read
    store.objects.release.set()
    taking.join(30)
    assert list(result) == [running.pendingset_key]
    assert store.objects.gets == [running.pendingset_key]


def test_a_job_holds_no_more_files_than_its_budget_and_the_oldest_job_gives_way(preloads, monkeypatch):
    monkeypatch.setattr(preload, "PRELOAD_FILES", 5)
    monkeypatch.setattr(preload, "PRELOAD_JOBS", 2)
    store = Store()
    assert preloads.add(store, DEST, message(0, "a0", files=3))
    assert not preloads.add(store, DEST, message(1, "a1", files=3))  # 6 > 5: the commit reads it
    assert preloads.add(store, DEST, message(2, "a2", files=2))
    assert preloads.held(DEST, JOB) == 2
    for job in ("job-2", "job-3"):  # two more jobs: the first one's reads are dropped
        assert preloads.add(store, DEST, message(0, "b0", job=job))
    assert preloads.held(DEST, JOB) == 0 and preloads.held(DEST, "job-3") == 1


def test_a_message_that_carries_its_pendingset_or_names_none_is_not_read(preloads):
    store = Store()
    carried = message(0, "a0", completed=(("t/part-0", 1, "u0"),))
    empty = TaskCommitMessage(job_id=JOB, task_id="task_1", task_attempt_id="a1", pendingset_key=None, files=0,
                              bytes=0)
    assert not preloads.add(store, DEST, carried) and not preloads.add(store, DEST, empty)
    assert store.objects.gets == []


def test_a_forgotten_job_takes_nothing(preloads):
    store = Store()
    m = message(0, "a0")
    store.objects.bodies = {m.pendingset_key: body("a0")}
    preloads.add(store, DEST, m)
    preloads.wait_read(DEST, JOB, timeout=30)
    preloads.forget(DEST, JOB)
    assert preloads.take(DEST, JOB, {m.pendingset_key: {"a0"}}) == {}
