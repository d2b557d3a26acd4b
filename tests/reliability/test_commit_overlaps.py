"""What a job commit sends beside its path (issue 56, outcome 5: the demo's commit near its floor), and what still
waits for what.

Four requests no longer add their round trips to the commit's: the lease is taken while the pendingsets load, the job
directory's LIST goes beside the ``_SUCCESS`` PUT, under the lease so does its deletion, and the lease is released
beside the journal's DELETE. The order
that makes a commit safe is unchanged, and each test stages it by holding requests at the simulator
(``S3TestServer.hold``), never by latency: nothing is journalled or completed before every pendingset is read and the
lease held, nothing of the job directory is deleted before every upload is complete (and, without the lease, before
``_SUCCESS`` is written: under it the deletion goes beside that PUT, the journal recording what it says), the
journal is deleted only once ``_SUCCESS`` is written, and the lease is not released before everything of the job
directory but its journal is gone (a journal left then is finished as a clean-up).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from s3commit import S3Store, create_committer
from s3commit.commit.lease import lease_key
from s3commit.commit.process_state import ProcessState
from s3commit.model.lease_record import LeaseState
from s3commit.model.uri import S3Uri
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, list_pending_uploads
from tests.clocks import ManualClock
from tests.conftest import store_options_for

WINDOW = 2.0
"""The jobs' liveness window (nobody's store time moves here: every job stays alive)."""


def job(server: Any, bucket: str, *, process: ProcessState | None = None, **options: Any) -> Any:
    store = S3Store(store_options_for(server))
    committer = create_committer("magic", f"s3://{bucket}/t", store=store, threads=4, job_liveness=WINDOW,
                                 process=process or ProcessState(clock=ManualClock()), **options)
    committer.setup_job()
    return committer


def write(committer: Any, names: list[str], *, task: int = 0) -> Any:
    attempt = committer.setup_task(committer.new_task_attempt_id(task))
    for name in names:
        with attempt.open(name) as out:
            out.write(f"{name} of {committer.job_id}".encode())
    return committer.commit_task(attempt)


def until(condition: Callable[[], bool], what: str, alive: threading.Thread) -> None:
    """Wait for ``condition`` while the commit runs (an order reached, not a time measured)."""
    deadline = time.monotonic() + 60
    while not condition():
        if not alive.is_alive():
            assert condition(), f"the commit ended before {what}"  # reached just as it ended
            return
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def committing(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as err:  # handed to the test's thread
            outcome.append(err)

    thread = threading.Thread(target=run, name="committing")
    thread.start()
    return thread, outcome


def exists(client: Any, bucket: str, key: str) -> bool:
    """One HEAD (no LIST: a test that counts the commit's LISTs sends none of its own)."""
    try:
        client.head_object(Bucket=bucket, Key=key)
    except client.exceptions.ClientError as err:
        if err.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def lease_state(client: Any, bucket: str) -> LeaseState | None:
    try:
        body = client.get_object(Bucket=bucket, Key=lease_key(S3Uri(bucket, "t")))["Body"].read()
    except client.exceptions.NoSuchKey:
        return None
    return LeaseState.from_json(body, source="lease")


def lease_holder(client: Any, bucket: str) -> str | None:
    state = lease_state(client, bucket)
    holder = state.holder if state is not None else None
    return holder.job_id if holder is not None else None


def test_the_lease_is_taken_while_the_pendingsets_load_and_nothing_is_journalled_before_both(s3_sim, s3_bucket,
                                                                                            s3_client):
    committer = job(s3_sim, s3_bucket)
    messages = [write(committer, [f"p={i}/f.txt"], task=i) for i in range(3)]
    s3_sim.hold("GetObject", ending=".pendingset")
    thread, outcome = committing(lambda: committer.commit_job(messages))
    until(lambda: s3_sim.held().get("GetObject", 0) >= 1, "a pendingset was read", thread)
    # The pendingsets are still being read, and the lease is held already...
    until(lambda: lease_holder(s3_client, s3_bucket) == committer.job_id, "the lease was taken", thread)
    # ...but nothing of the commit was written: no journal, every upload still pending, no _SUCCESS.
    job_dir = committer.layout.job_attempt_dir
    assert not exists(s3_client, s3_bucket, committer.layout.journal_key)
    assert len(list_pending_uploads(s3_client, s3_bucket, "t/")) == 3
    assert not exists(s3_client, s3_bucket, "t/_SUCCESS")
    assert any(k.endswith(".pendingset") for k in list_keys(s3_client, s3_bucket, f"{job_dir}/"))
    s3_sim.release()
    thread.join(60)
    assert not thread.is_alive() and outcome and not isinstance(outcome[0], BaseException), outcome
    assert outcome[0].metrics["committer_files"] == 3
    assert lease_holder(s3_client, s3_bucket) is None  # released
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert [k for k in list_keys(s3_client, s3_bucket, "t/") if "__magic_job-" in k] == []


def test_the_lease_is_taken_ahead_of_the_commit_beside_what_comes_before_it(s3_sim, s3_bucket, s3_client):
    """``take_lease_ahead`` (the sidecar's, before it reads the task messages) sends the lease's request and returns:
    the commit then waits for that taking, and nothing is journalled before it is held."""
    committer = job(s3_sim, s3_bucket)
    message = write(committer, ["p=1/f.txt"])
    s3_sim.hold("PutObject", ending="__s3commit_lease")
    committer.take_lease_ahead()  # returns while its PUT is held
    until(lambda: s3_sim.held().get("PutObject", 0) == 1, "the lease's PUT was sent", threading.main_thread())
    thread, outcome = committing(lambda: committer.commit_job([message]))
    s3_sim.release()
    thread.join(60)
    assert not thread.is_alive() and outcome and not isinstance(outcome[0], BaseException), outcome
    puts = [r for r in s3_sim.request_log() if r["operation"] == "PutObject"]
    taken = min(r["answered"] for r in puts if r["key"].endswith("__s3commit_lease"))
    journalled = min(r["at"] for r in puts if r["key"] == committer.layout.journal_key)
    assert journalled >= taken  # the commit waited for the lease held up at the store: nothing journalled before
    assert outcome[0].metrics["committer_lease_requests"] == 1  # taken with one PUT (its setup read it free)
    assert lease_holder(s3_client, s3_bucket) is None
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_a_lease_taken_ahead_is_released_where_no_commit_follows(s3_sim, s3_bucket, s3_client):
    first = job(s3_sim, s3_bucket)
    first.take_lease_ahead()
    until(lambda: lease_holder(s3_client, s3_bucket) == first.job_id, "the lease was taken", threading.main_thread())
    first.drop_lease_ahead()
    assert lease_holder(s3_client, s3_bucket) is None
    second = job(s3_sim, s3_bucket, process=ProcessState(clock=ManualClock()))
    success = second.commit_job([write(second, ["p=2/f.txt"])])  # no wait: the lease is free
    assert success.metrics["committer_files"] == 1 and success.metrics["committer_lease_wait_ms"] == 0


def test_a_load_that_fails_while_the_lease_is_taken_fails_the_commit_and_releases_the_lease(s3_sim, s3_bucket,
                                                                                          s3_client):
    committer = job(s3_sim, s3_bucket)
    message = write(committer, ["p=1/f.txt"])
    s3_client.put_object(Bucket=s3_bucket, Key=message.pendingset_key, Body=b"{not json")
    thread, outcome = committing(lambda: committer.commit_job([message]))
    thread.join(60)
    assert not thread.is_alive() and outcome and isinstance(outcome[0], Exception)
    assert "pendingset" in str(outcome[0]).lower() or "json" in str(outcome[0]).lower(), outcome[0]
    assert lease_holder(s3_client, s3_bucket) is None
    assert not exists(s3_client, s3_bucket, "t/_SUCCESS")
    assert [k for k in list_keys(s3_client, s3_bucket, "t/") if not k.startswith("t/__")] == []


def _commit_holding_success(s3_sim, committer, message):
    """The commit started, its _SUCCESS PUT held at the simulator once sent; its job directory listed by then."""
    s3_sim.hold("PutObject", ending="_SUCCESS")
    s3_sim.reset_stats()
    thread, outcome = committing(lambda: committer.commit_job([message]))
    until(lambda: s3_sim.held().get("PutObject", 0) == 1, "_SUCCESS was being written", thread)

    def answered(ending: str) -> float:
        return max(r["answered"] for r in s3_sim.request_log()
                   if r["operation"] == "PutObject" and r["key"].endswith(ending) and r["answered"])

    def listed_after_the_journal() -> bool:  # the job directory's LIST is sent once the journal is written
        return any(r["operation"] == "ListObjectsV2" and r["at"] > answered("_commit-journal.json")
                   for r in s3_sim.request_log())

    until(listed_after_the_journal, "the job directory was listed before _SUCCESS was written", thread)
    return thread, outcome, answered


def test_under_the_lease_the_job_directory_goes_beside_the_success_put_and_the_journal_after_it(s3_sim, s3_bucket,
                                                                                                s3_client):
    committer = job(s3_sim, s3_bucket)
    message = write(committer, ["p=1/f.txt"])
    thread, outcome, answered = _commit_holding_success(s3_sim, committer, message)
    # Every upload is complete: the job directory is deleted while _SUCCESS is written, all but the journal, which
    # says what _SUCCESS says (a recovery that finds the pendingsets gone writes it), and the lease is still held.
    until(lambda: not exists(s3_client, s3_bucket, message.pendingset_key), "the pendingset was deleted", thread)
    assert exists(s3_client, s3_bucket, committer.layout.journal_key)
    assert not exists(s3_client, s3_bucket, "t/_SUCCESS")
    assert lease_holder(s3_client, s3_bucket) == committer.job_id
    s3_sim.release()
    thread.join(60)
    assert not thread.is_alive() and outcome and not isinstance(outcome[0], BaseException), outcome
    # The journal's DELETE waits for _SUCCESS; no LIST after it: the listing sent beside the commit is the one used.
    log = s3_sim.request_log()
    journal_deleted = [r for r in log if r["operation"] == "DeleteObject" and r["key"].endswith("_commit-journal.json")]
    assert journal_deleted and journal_deleted[0]["at"] > answered("_SUCCESS")
    assert [r["operation"] for r in log if r["at"] > answered("_SUCCESS")].count("ListObjectsV2") == 0
    assert lease_holder(s3_client, s3_bucket) is None


def test_without_the_lease_the_job_directory_is_deleted_only_after_the_success_put(s3_sim, s3_bucket, s3_client):
    committer = job(s3_sim, s3_bucket, lease="off")
    message = write(committer, ["p=1/f.txt"])
    thread, outcome, answered = _commit_holding_success(s3_sim, committer, message)
    # Nothing of the job directory is deleted before _SUCCESS is written (its pendingsets say the commit point was
    # not passed).
    assert not any(r["operation"] in ("DeleteObjects", "DeleteObject") for r in s3_sim.request_log())
    assert exists(s3_client, s3_bucket, committer.layout.journal_key)
    assert exists(s3_client, s3_bucket, message.pendingset_key)
    s3_sim.release()
    thread.join(60)
    assert not thread.is_alive() and outcome and not isinstance(outcome[0], BaseException), outcome
    # No LIST after _SUCCESS: the listing sent beside the commit is the one its deletion used.
    after = [r["operation"] for r in s3_sim.request_log() if r["at"] > answered("_SUCCESS")]
    assert after.count("ListObjectsV2") == 0 and after.count("DeleteObjects") == 1, after


def test_the_lease_is_released_beside_the_journals_delete_once_the_rest_of_the_job_directory_is_gone(
        s3_sim, s3_bucket, s3_client):
    committer = job(s3_sim, s3_bucket)
    message = write(committer, ["p=1/f.txt"])
    s3_sim.hold("DeleteObject", ending=committer.layout.journal_key)
    thread, outcome = committing(lambda: committer.commit_job([message]))
    until(lambda: s3_sim.held().get("DeleteObject", 0) == 1, "the journal was being deleted", thread)
    # The journal's DELETE is held, and the lease is free, recording the job's commit...
    until(lambda: lease_holder(s3_client, s3_bucket) is None and lease_state(s3_client, s3_bucket) is not None
          and lease_state(s3_client, s3_bucket).committed(committer.job_id) is not None,
          "the lease was released", thread)
    # ...while _SUCCESS is written and everything of the job directory but the journal is gone.
    assert exists(s3_client, s3_bucket, "t/_SUCCESS")
    assert [k for k in list_keys(s3_client, s3_bucket, "t/") if "__magic_job-" in k] == [committer.layout.journal_key]
    s3_sim.release()
    thread.join(60)
    assert not thread.is_alive() and outcome and not isinstance(outcome[0], BaseException), outcome
    assert [k for k in list_keys(s3_client, s3_bucket, "t/") if "__magic_job-" in k] == []
    assert lease_state(s3_client, s3_bucket).committed(committer.job_id).files == 1
