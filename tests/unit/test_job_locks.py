"""One operation per job in a process (:func:`s3commit.commit.ownership.one_operation`): the lock serializes a job's
commit and abort, and nothing of a job is kept once its operations end (a sidecar lives through thousands of jobs)."""

from __future__ import annotations

import threading

from s3commit.commit import ownership
from s3commit.commit.ownership import one_operation
from s3commit.model.uri import S3Uri

DEST = S3Uri.parse("s3://b/t")


def test_a_jobs_lock_is_dropped_when_its_last_operation_ends() -> None:
    with one_operation(DEST, "job-1", "its commit"), one_operation(DEST, "job-1", "its abort (re-entered)"):
        assert ("b", "t", "job-1") in ownership._job_locks
    assert ("b", "t", "job-1") not in ownership._job_locks


def test_a_second_operation_waits_for_the_first_and_the_lock_goes_with_the_last() -> None:
    inside, release, order = threading.Event(), threading.Event(), []

    def first() -> None:
        with one_operation(DEST, "job-2", "its commit"):
            inside.set()
            release.wait(5)
            order.append("commit")

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(5)
    waiter = threading.Thread(target=lambda: _run(order))
    waiter.start()
    release.set()
    thread.join(5)
    waiter.join(5)
    assert order == ["commit", "abort"]
    assert ("b", "t", "job-2") not in ownership._job_locks


def _run(order: list[str]) -> None:
    with one_operation(DEST, "job-2", "its abort"):
        order.append("abort")
