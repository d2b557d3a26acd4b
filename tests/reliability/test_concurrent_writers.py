"""Many writers, one table: jobs in processes of their own commit to one destination at the same moment (random
timing, S3-like latency) and the end state is always one that some serial order of the jobs that succeeded gives,
with ``_SUCCESS`` naming the last of them. Without the commit lease two overwrites left the destination empty; an
overwrite beside an append lost half the append; two dynamic partition overwrites sharing a partition left it with
neither job's files. Also: a lease holder killed mid-commit is taken over and its commit settled first; a waiter
gives up cleanly; a store without conditional writes gets no lease (a warning), or a refusal when it is asked for.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from s3commit import S3Store, create_committer
from s3commit.commit.lease import CommitLease, lease_key
from s3commit.commit.process_state import ProcessState
from s3commit.errors import ConfigError, LeaseTimeoutError
from s3commit.model.lease_record import Holder, LeaseState
from s3commit.model.paths import JOURNAL_FILE, is_scratch_key, partition_of
from s3commit.model.uri import S3Uri
from s3commit.store.capability_cache import known
from s3commit.store.conditional import ConditionalRequests
from s3commit.testing.assertions import assert_no_pending_uploads, held_leases, list_keys
from testbed import CHILD_TIMEOUT
from testbed.fixtures import ALL_SERVERS, every_server_fixture
from tests.clocks import ManualClock, let_store_time_pass
from tests.conftest import store_options_for

pytestmark = pytest.mark.integration
s3_server = every_server_fixture(ALL_SERVERS)
CHILD = Path(__file__).with_name("lease_child.py")
OLD = [f"t/p={p}/old-{p}.txt" for p in (1, 2, 3)]


def conditional(server) -> bool:
    return getattr(server, "name", "moto") != "rclone"


@pytest.fixture
def latency(s3_server):
    """S3-like latency on moto (the windows the lease closes are then as wide as on S3)."""
    if hasattr(s3_server, "configure"):
        s3_server.configure(profile="s3-standard")
        yield
        s3_server.reset_simulator()
    else:
        yield


def run_jobs(server, bucket: str, jobs: list[dict], tmp_path: Path, *, committer: str = "magic",
             jitter: float = 0.3, **child_args: object) -> list[dict]:
    """Start one process per job, let each write and commit its task, then tell them all to commit at once (but a
    job with ``after_exit_of``: it commits once that job's process has ended; it comes after it in ``jobs``)."""
    run = uuid.uuid4().hex[:6]

    def go(after: str = "") -> Path:  # the file a job waits for: the go of all, or the one after a job's exit
        return tmp_path / f"go-{run}-{after}"

    processes = []
    for job in jobs:
        argv = [sys.executable, str(CHILD), "--endpoint", server.endpoint_url, "--dest", f"s3://{bucket}/t",
                "--committer", committer, "--mode", job["mode"], "--tag", job["tag"], "--partitions",
                job.get("partitions", "1,2"), "--files", str(job.get("files", 4)),
                "--go", str(go(job.get("after_exit_of", ""))), "--jitter", str(jitter),
                "--staging-dir", str(tmp_path / f"staging-{job['tag']}")]
        for name, value in {**child_args, **job.get("args", {})}.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        processes.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          env={**os.environ, "PYTHONPATH": str(CHILD.parents[2])}))
    ready = []
    for process in processes:  # every job has written and committed its task
        line = process.stdout.readline()
        assert line.startswith('{"ready"'), (line, process.stderr.read() if process.poll() is not None else "")
        ready.append(json.loads(line))
    go().touch()
    results = []
    for job, process, started in zip(jobs, processes, ready, strict=True):
        out, err = process.communicate(timeout=CHILD_TIMEOUT)
        go(job["tag"]).touch()  # the jobs that commit after its exit
        lines = [json.loads(line) for line in out.splitlines() if line.startswith('{"tag"')]
        results.append(lines[-1] if lines else {"ok": False, "job_id": started["job_id"],
                                                "error": f"killed ({process.returncode}): {err[-2000:]}"})
    return results


def serial_outcomes(initial: set[str], jobs: list[dict]) -> dict[str, set[str]]:
    """The end state each serial order of ``jobs`` gives, keyed by the job id that would be last (``_SUCCESS``)."""
    outcomes: dict[str, set[str]] = {}
    for order in itertools.permutations(jobs):
        state = set(initial)
        for job in order:
            files = set(job["files"])
            if job["mode"] == "overwrite":
                state = files
            elif job["mode"] == "partitions":
                written = {partition_of(k) for k in files}
                state = {k for k in state if partition_of(k) not in written} | files
            else:
                state |= files
        outcomes.setdefault(order[-1]["job_id"], set()).update({"|".join(sorted(state))})
    return outcomes


def assert_serializable(client, bucket: str, initial: list[str], results: list[dict]) -> None:
    succeeded = [r for r in results if r["ok"]]
    assert succeeded, results
    data = sorted(k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k) and not k.endswith("_SUCCESS"))
    success = json.loads(client.get_object(Bucket=bucket, Key="t/_SUCCESS")["Body"].read())
    possible = serial_outcomes(set(initial), succeeded)
    assert success["jobId"] in possible, (success["jobId"], results)
    assert "|".join(data) in possible[success["jobId"]], (
        f"end state {data} is what no serial order of {[(r['tag'], r['mode']) for r in succeeded]} ending with "
        f"{success['jobId']} gives")
    assert_no_pending_uploads(client, bucket)
    assert held_leases(client, bucket) == [], "a lease is still held"
    recorded = lease_state(client, bucket).recent
    assert {r["job_id"] for r in succeeded} <= {c.job_id for c in recorded}  # each job's own record of its commit


def seed_old_data(client, bucket: str) -> None:
    for key in OLD:
        client.put_object(Bucket=bucket, Key=key, Body=b"old")


SCENARIOS = {
    "two-overwrites": [{"tag": "a", "mode": "overwrite"}, {"tag": "b", "mode": "overwrite"}],
    "overwrite-beside-append": [{"tag": "a", "mode": "overwrite"}, {"tag": "b", "mode": "append", "files": 8}],
    "two-partition-overwrites-sharing-one": [{"tag": "a", "mode": "partitions", "partitions": "1,2"},
                                             {"tag": "b", "mode": "partitions", "partitions": "2,3"}],
    "four-appenders": [{"tag": t, "mode": "append"} for t in "abcd"],
}


def run_rounds(server, tmp_path, scenario: str, committer: str, rounds: int) -> None:
    client = server.client()
    for _ in range(rounds):
        bucket = server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
        seed_old_data(client, bucket)
        results = run_jobs(server, bucket, SCENARIOS[scenario], tmp_path, committer=committer)
        assert all(r["ok"] for r in results), results  # every job commits: the lease only orders them
        assert_serializable(client, bucket, OLD, results)


@pytest.mark.parametrize(("scenario", "committer"), [
    ("two-overwrites", "magic"),
    pytest.param("overwrite-beside-append", "directory", marks=pytest.mark.slow)])  # the default tier's budget
def test_concurrent_commits_end_as_some_serial_order(s3_server, latency, tmp_path, scenario, committer):
    if not conditional(s3_server):
        pytest.skip("rclone honours no conditional write: no lease (tested below)")
    run_rounds(s3_server, tmp_path, scenario, committer, rounds=2)


@pytest.mark.slow
@pytest.mark.parametrize("committer", ["magic", "directory", "partitioned"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_and_committer_ends_as_some_serial_order_over_many_rounds(
        s3_server, latency, tmp_path, scenario, committer):
    if not conditional(s3_server):
        pytest.skip("rclone honours no conditional write: no lease (tested below)")
    run_rounds(s3_server, tmp_path, scenario, committer, rounds=3 if hasattr(s3_server, "configure") else 2)


def test_a_holder_killed_mid_commit_is_taken_over_and_its_commit_settled_first(s3_server, latency, tmp_path):
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    client = s3_server.client()
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    seed_old_data(client, bucket)
    # a overwrites and dies after 2 of its 4 Completes, holding the lease; b appends and must wait for it, take it
    # over (a's process is gone: on this host that is known at once) and finish a's commit before its own.
    results = run_jobs(s3_server, bucket, [
        {"tag": "a", "mode": "overwrite", "args": {"die_after_completes": 2}},
        {"tag": "b", "mode": "append", "after_exit_of": "a"}], tmp_path, jitter=0.0)
    dead, survivor = results
    assert not dead["ok"] and "killed" in dead["error"]
    assert survivor["ok"], survivor
    data = sorted(k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k) and not k.endswith("_SUCCESS"))
    a_files = [f"t/p={1 + n % 2}/part-a-{n:03d}.txt" for n in range(4)]
    b_files = [f"t/p={1 + n % 2}/part-b-{n:03d}.txt" for n in range(4)]
    assert data == sorted(a_files + b_files)  # a finished (its overwrite applied), then b appended
    success = json.loads(client.get_object(Bucket=bucket, Key="t/_SUCCESS")["Body"].read())
    assert success["jobId"] == survivor["job_id"]
    assert not [k for k in list_keys(client, bucket, "t/") if "_commit-journal" in k]
    assert held_leases(client, bucket) == []
    # the dead job ends committed (settled by b) and its own record says so, as b's says for b
    assert {c.job_id for c in lease_state(client, bucket).recent} == {dead["job_id"], survivor["job_id"]}
    assert_no_pending_uploads(client, bucket)


def lease_state(client, bucket: str) -> LeaseState:
    key = lease_key(S3Uri(bucket, "t"))
    return LeaseState.from_json(client.get_object(Bucket=bucket, Key=key)["Body"].read(), source=key)


def fake_lease(client, bucket: str, *, host: str, duration: float, job_id: str = "job-elsewhere") -> None:
    """A lease held by a job on another host (its process cannot be seen from here)."""
    holder = Holder(job_id=job_id, operation="commit", host=host, pid=1, token="t",
                    taken="2026-11-25T00:00:00+00:00", duration=duration, journal="")
    client.put_object(Bucket=bucket, Key=lease_key(S3Uri(bucket, "t")), Body=LeaseState(holder).to_json())


def one_file_job(server, bucket: str, tmp_path, *, process: ProcessState | None = None, **options):
    store = S3Store(store_options_for(server))
    committer = create_committer("magic", f"s3://{bucket}/t", store=store, staging_dir=str(tmp_path),
                                 **({"process": process} if process is not None else {}), **options)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("p=1/new.txt") as out:
        out.write(b"new")
    return committer, committer.commit_task(attempt)


def test_a_waiter_gives_up_cleanly_naming_the_holder(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    client = s3_server.client()
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    seed_old_data(client, bucket)
    fake_lease(client, bucket, host="another-host", duration=3600)
    clock = ManualClock()
    committer, message = one_file_job(s3_server, bucket, tmp_path, lease_wait=1.5, process=ProcessState(clock=clock))
    failed = run_on_the_clock(clock, lambda: committer.commit_job([message], delete_paths=[""]))
    assert [type(e) for e in failed] == [LeaseTimeoutError]
    with pytest.raises(LeaseTimeoutError, match=r"held by job job-elsewhere .*on host another-host"):
        raise failed[0]
    assert sorted(k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k)) == OLD  # as it was
    # (its journal, written beside the lease's taking, went with the commit that did not take place)
    assert [k for k in list_keys(client, bucket, "t/") if k.endswith(JOURNAL_FILE)] == []
    assert_no_pending_uploads(client, bucket)


def test_an_expired_lease_of_another_host_is_taken_over_by_the_store_clock(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    client = s3_server.client()
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    clock = ManualClock()
    committer, message = one_file_job(s3_server, bucket, tmp_path, lease_wait=30, process=ProcessState(clock=clock))
    # Written just before the commit: 4 s to go by the store's clock, which says expiry in whole seconds (its Date
    # and the lease's Last-Modified), so at least 3.
    fake_lease(client, bucket, host="another-host", duration=4)
    done: list = []
    failed = run_on_the_clock(clock, lambda: done.append(committer.commit_job([message])),
                              store_time=lambda seconds: let_store_time_pass(s3_server, bucket, seconds))
    assert failed == [] and len(done) == 1
    assert done[0].metrics["committer_lease_wait_ms"] >= 1500  # it waited for the expiry, then took it over
    assert held_leases(client, bucket) == []


def test_a_store_that_ignores_conditional_deletes_still_orders_commits_by_the_lease(s3_server, latency, tmp_path):
    """The lease is taken, renewed, released and taken over by conditional PUTs only: a store that honours those and
    drops the If-Match of a DELETE (gofakes3) keeps it, and two overwrites at once end as one of them alone."""
    if not hasattr(s3_server, "configure"):
        pytest.skip("the simulator in front of moto is what drops the DELETEs' If-Match")
    s3_server.configure(conditional_deletes=False)
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")  # (probed again: the setting changed)
    found = known(S3Store(store_options_for(s3_server)), bucket)  # (from the cache the children read too)
    assert found is not None and str(found.findings["delete-if-match"]) == "ignored"
    assert found.conditional_writes and not found.conditional_deletes
    client = s3_server.client()
    seed_old_data(client, bucket)
    results = run_jobs(s3_server, bucket, SCENARIOS["two-overwrites"], tmp_path)
    assert all(r["ok"] for r in results), results
    assert_serializable(client, bucket, OLD, results)  # each job's commit recorded by the lease it released


def test_a_store_without_conditional_writes_gets_no_lease_warned_or_refused_when_asked(s3_server, tmp_path, caplog):
    if conditional(s3_server):
        pytest.skip("rclone is the store that ignores conditional writes")
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    committer, message = one_file_job(s3_server, bucket, tmp_path)  # auto
    committer.commit_job([message])
    said = [r.getMessage() for r in caplog.records]
    # Named once, by the commit (its setup read the lease without a word), and nothing of what it does not ask for
    # (fail-if-exists: named by a commit that asks for it).
    assert sum("no commit lease" in m and "does not honour conditional writes" in m for m in said) == 1, said
    assert not any("fail-if-exists" in m for m in said), said
    refused = create_committer("magic", f"s3://{bucket}/u", store=S3Store(store_options_for(s3_server)), lease="on")
    with pytest.raises(ConfigError, match=r"s3commit.commit.lease is on, but the store .* does not honour"):
        refused.setup_job()
    assert list_keys(s3_server.client(), bucket, "u/") == []


def test_what_the_lease_adds_to_a_commit_whose_setup_read_it_and_to_one_whose_process_did_not(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    counts = {}
    for mode in ("on", "off"):
        # A destination each: on SeaweedFS the first job's emptied directory would cost the second's sweep a read.
        bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
        for job in ("first", "next", "elsewhere"):
            committer, message = one_file_job(s3_server, bucket, tmp_path, lease=mode, process=ProcessState())
            if job == "elsewhere":  # committed by a process that did not set the job up: it remembers nothing
                committer.process = ProcessState()
            before = sum(committer.store.counters.snapshot()["requests"].values())
            success = committer.commit_job([message])
            counts[mode, job] = sum(committer.store.counters.snapshot()["requests"].values()) - before
            # _SUCCESS counts the requests that took and renewed it; the release comes after _SUCCESS.
            assert success.metrics["committer_lease_requests"] == (0 if mode == "off" else
                                                                   2 if job == "elsewhere" else 1)
    # The setup read it (none yet; then free): the commit creates it with one If-None-Match PUT, or takes it with
    # one If-Match PUT, frees it with another, and trusts the snapshot log as it read it before it held the lease
    # (nothing held the lease in between).
    assert counts["on", "first"] - counts["off", "first"] == 2
    assert counts["on", "next"] - counts["off", "next"] == 2
    # Remembering nothing: it reads it (the GET), takes it (a PUT), frees it (a PUT), and lists the snapshot log
    # again under it (what it read before it held the lease could have changed since).
    assert counts["on", "elsewhere"] - counts["off", "elsewhere"] == 4


def test_a_lease_remembered_free_is_taken_with_one_put_and_read_where_another_took_it_since(s3_server, tmp_path):
    """The lease as this process released it, or as its job's setup read it free (its ETag remembered), is taken
    with one If-Match PUT and no GET; where another process took and freed it since, that PUT fails and the lease
    is read and taken as before."""
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    here, elsewhere = ProcessState(), ProcessState()

    def commit(job: tuple[Any, Any]) -> tuple[int, dict[str, int]]:
        committer, message = job
        before = dict(committer.store.counters.snapshot()["requests"])
        success = committer.commit_job([message])
        after = committer.store.counters.snapshot()["requests"]
        return success.metrics["committer_lease_requests"], {k: after[k] - before.get(k, 0) for k in after}

    def job(process: ProcessState) -> tuple[Any, Any]:
        return one_file_job(s3_server, bucket, tmp_path, process=process, lease="on")

    first, _ = commit(job(here))
    assert first == 1  # none yet at setup: created with If-None-Match, nothing read
    again, sent = commit(job(here))
    assert again == 1  # taken as released: no read
    lease_gets = sent.get("GetObject", 0)
    other, _ = commit(job(elsewhere))
    assert other == 1  # its setup read it free
    stale = job(here)  # set up (the lease read free), then another process commits before it does
    commit(job(elsewhere))
    after_other, sent = commit(stale)
    assert after_other == 3  # the remembered ETag is stale: refused, then read and taken
    assert sent.get("GetObject", 0) == lease_gets + 1
    state = lease_state(s3_server.client(), bucket)
    assert state.holder is None and len(state.recent) == 5


def test_two_arrow_overwrites_in_two_processes_end_with_one_writers_data(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    import pyarrow.dataset as ds  # noqa: F401  (the children need pyarrow)

    client = s3_server.client()
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    seed_old_data(client, bucket)
    go = tmp_path / "go"
    reached = {tag: tmp_path / f"{tag}-reached-its-commit" for tag in ("a", "b")}
    child = Path(__file__).parents[1] / "engines" / "arrow_overwrite_child.py"
    processes = [subprocess.Popen([sys.executable, str(child), s3_server.endpoint_url, f"s3://{bucket}/t", tag,
                                   "overwrite", str(go), str(reached[tag])], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for tag in ("a", "b")]
    deadline = time.monotonic() + 120
    while not all(path.exists() for path in reached.values()):  # both have written their files and reached their commit
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), [
            p.communicate() for p in processes if p.poll() is not None]
        time.sleep(0.05)
    go.touch()
    results = [json.loads(p.communicate(timeout=120)[0].splitlines()[-1]) for p in processes]
    assert all(r["ok"] for r in results), results
    success = json.loads(client.get_object(Bucket=bucket, Key="t/_SUCCESS")["Body"].read())
    last = next(r for r in results if r["job_id"] == success["jobId"])
    data = [k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k) and not k.endswith("_SUCCESS")]
    assert data and all(last["job_id"] in k for k in data), data  # only the last writer's files, none lost
    assert_no_pending_uploads(client, bucket)


def test_fail_if_exists_never_replaces_an_object_that_appeared_after_the_check(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("rclone ignores If-None-Match on Complete")
    client = s3_server.client()
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    store = S3Store(store_options_for(s3_server))
    committer = create_committer("directory", f"s3://{bucket}/t", store=store, conflict_mode="fail",
                                 unique_filenames=False, staging_dir=str(tmp_path))
    committer.setup_job()  # the destination is empty: the check passes
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for name in ("a.txt", "b.txt"):
        with attempt.open(name) as out:
            out.write(b"ours")
    message = committer.commit_task(attempt)
    client.put_object(Bucket=bucket, Key="t/b.txt", Body=b"another writer's")  # after the check
    with pytest.raises(Exception, match=r"t/b.txt appeared after the job's conflict check"):
        committer.commit_job([message])
    assert client.get_object(Bucket=bucket, Key="t/b.txt")["Body"].read() == b"another writer's"
    assert sorted(k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k)) == ["t/b.txt"]
    assert_no_pending_uploads(client, bucket)


class Replacing(ConditionalRequests):
    """Another writer replaces the first object the overwrite is about to delete, between its listing and its
    delete (the window conditional deletes close). ``replaced``: the key it replaced."""

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.replaced: list[str] = []

    def _replace_first(self, bucket: str, key: str) -> None:
        if not self.replaced:
            self.replaced.append(key)
            self.client.put_object(Bucket=bucket, Key=key, Body=b"rewritten by another writer")

    def delete_if_match(self, bucket, key, etag):  # type: ignore[no-untyped-def]
        self._replace_first(bucket, key)
        return super().delete_if_match(bucket, key, etag)

    def delete_objects_if_match(self, bucket, objects):  # type: ignore[no-untyped-def]
        objects = list(objects)
        self._replace_first(bucket, objects[0][0])
        return super().delete_objects_if_match(bucket, objects)


class ReplacingStore(S3Store):
    """A store whose conditional deletes meet an object replaced since the listing (:class:`Replacing`)."""

    conditional_class = Replacing
    conditional: Replacing


def test_an_overwrite_keeps_an_object_replaced_since_its_listing(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("rclone ignores If-Match on DELETE")
    client = s3_server.client()
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    seed_old_data(client, bucket)
    store = ReplacingStore(store_options_for(s3_server))
    committer = create_committer("magic", f"s3://{bucket}/t", store=store, staging_dir=str(tmp_path))
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("p=9/new.txt") as out:
        out.write(b"new")
    success = committer.commit_job([committer.commit_task(attempt)], delete_paths=[""])
    kept = store.conditional.replaced[0]
    assert success.metrics["committer_objects_kept_changed_since_listing"] == 1
    assert client.get_object(Bucket=bucket, Key=kept)["Body"].read() == b"rewritten by another writer"
    data = sorted(k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k) and not k.endswith("_SUCCESS"))
    assert data == sorted([kept, "t/p=9/new.txt"])


def test_a_holder_renews_its_lease_every_quarter_of_its_duration_and_a_waiter_gives_up_by_its_clock(
        s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("no lease on rclone")
    bucket = s3_server.create_bucket(f"lease-{uuid.uuid4().hex[:10]}")
    dest = S3Uri(bucket, "t")
    clock = ManualClock()
    holder = CommitLease(S3Store(store_options_for(s3_server)), dest, "job-a", duration=8, clock=clock).acquire()
    try:
        taken = holder.etag
        clock.advance(1.5)
        assert holder.etag == taken  # not yet a quarter of its duration
        clock.advance(0.5)
        assert holder.etag != taken and holder.held  # renewed (If-Match on the ETag it held)
        waiter = CommitLease(S3Store(store_options_for(s3_server)), dest, "job-b", wait=30, clock=clock)
        failed: list[BaseException] = []
        waiting = threading.Thread(target=lambda: failed.extend(_raised(waiter.acquire)))
        waiting.start()
        for _ in range(40):  # the holder renews all along; the waiter reads, sleeps on the clock, reads again
            clock.advance(1.0)
        waiting.join(30)
        assert [type(e) for e in failed] == [LeaseTimeoutError] and "held by job job-a" in str(failed[0])
    finally:
        holder.release()
    assert held_leases(s3_server.client(), bucket) == []


def run_on_the_clock(clock: ManualClock, call, *, store_time=None, step: float = 0.5) -> list[BaseException]:
    """Run ``call`` on a thread whose waits are on ``clock``, moving the clock (and with ``store_time``, the
    store's clock as much) a ``step`` each time the thread waits, until it ends; what it raised."""
    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: failed.extend(_raised(call)), name="committing")
    thread.start()
    for _ in range(200):
        if not clock.until_waiting(thread):
            break
        if store_time is not None:
            store_time(step)
        clock.advance(step)
    thread.join(60)
    assert not thread.is_alive()
    return failed


def _raised(call) -> list[BaseException]:
    try:
        call()
    except BaseException as err:  # handed to the test's thread
        return [err]
    return []
