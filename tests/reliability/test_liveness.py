"""Nothing left behind: a job says it is alive, and the next job sweeps the dead (issue 47).

Jobs that die run in processes of their own (``liveness_child.py``, SIGKILLed in their task phase); the jobs that
live and sweep run here. Against the moto server behind the simulator, and SeaweedFS in the slow tier. A short
liveness window (2-3 s) stands in for the default 10 minutes. Nobody sleeps through it on moto: a job falls silent
as the simulator's clock is moved on, and a job's renewals come as the test advances its keeper's clock
(``tests/clocks.py``); on SeaweedFS and rclone the store's time passes for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from s3commit import S3Store, create_committer
from s3commit.commit.ownership import owner_key
from s3commit.commit.sweep import job_directories, job_statuses
from s3commit.errors import CommitStateError, EndpointUnreachableError, JobSweptError
from s3commit.model.markers import OwnerRecord
from s3commit.model.paths import MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX
from s3commit.store.conditional import ConditionalRequests
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed.fixtures import ALL_SERVERS, every_server_fixture
from tests.clocks import ManualClock, keeper_on, let_store_time_pass
from tests.conftest import store_options_for

s3_server = every_server_fixture(ALL_SERVERS)

CHILD = Path(__file__).with_name("liveness_child.py")
WINDOW = 2.0
PAST_WINDOW = WINDOW + 2.5
"""Long enough for a job that stopped renewing to be dead: the window, the judge's slack (1 s) and the whole seconds of
``Last-Modified`` and ``Date`` (up to 1 s more)."""
COMMITTERS = ["magic", "directory"]


def new_bucket(server) -> str:
    return server.create_bucket(f"alive-{uuid.uuid4().hex[:10]}")


def fresh_table(server) -> tuple[str, object, str]:
    """A new bucket, a client of the server, and the table ``s3://<bucket>/t`` the test's jobs write."""
    bucket = new_bucket(server)
    return bucket, server.client(), f"s3://{bucket}/t"


def job(server, dest: str, name: str = "magic", tmp_path=None, **options):
    store = S3Store(store_options_for(server))
    return create_committer(name, dest, store=store, threads=4, job_liveness=options.pop("job_liveness", WINDOW),
                            staging_dir=str(tmp_path) if tmp_path else None, unique_filenames=False, **options)


def write(committer, names: list[str], *, task: int = 0):
    attempt = committer.setup_task(committer.new_task_attempt_id(task))
    for name in names:
        with attempt.open(name) as out:
            out.write(f"{name} of {committer.job_id}".encode())
    return committer.commit_task(attempt)


def user_keys(client, bucket: str, prefix: str = "t/") -> list[str]:
    return sorted(k for k in list_keys(client, bucket, prefix) if "/__" not in f"/{k}" and not k.endswith("_SUCCESS"))


def start_dying_job(server, dest: str, committer: str, tmp_path, *, window: float = WINDOW,
                    absolute: str | None = None) -> tuple[subprocess.Popen, str]:
    """A job in a child process, its task phase under way; returns the process and the job's id."""
    command = [sys.executable, str(CHILD), "--endpoint", server.endpoint_url, "--dest", dest, "--committer",
               committer, "--liveness", str(window), "--staging-dir", str(tmp_path / "child")]
    if absolute:
        command += ["--absolute", absolute]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **server.env()}, start_new_session=True)
    line = child.stdout.readline()
    if not line:
        raise AssertionError(f"the dying job did not start: {child.stderr.read()[-3000:]}")
    return child, json.loads(line)["job_id"]


def kill(child: subprocess.Popen) -> None:
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def pending_keys(client, bucket: str) -> list[str]:
    return sorted(u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def record(client, bucket: str, committer) -> OwnerRecord:
    return OwnerRecord.from_json(client.get_object(Bucket=bucket, Key=owner_key(committer.layout))["Body"].read())


def conditional(server) -> bool:
    return getattr(server, "name", "moto") != "rclone"


# --- a job says it is alive ---------------------------------------------------------------------------------------

def test_a_job_renews_its_liveness_record_from_setup_until_it_commits(s3_server, tmp_path):
    bucket = new_bucket(s3_server)
    client = s3_server.client()
    committer = job(s3_server, f"s3://{bucket}/t")
    committer.setup_job()
    first = record(client, bucket, committer)
    assert first.liveness == WINDOW and first.renewed == 0 and first.host and first.pid == os.getpid()
    message = write(committer, ["a.txt"])
    clock = ManualClock()
    keeper_on(clock, committer)
    for _ in range(3):  # ~3 renewals (one every quarter window)
        clock.advance(WINDOW / 4)
    assert record(client, bucket, committer).renewed >= 2
    statuses = job_statuses(committer.store, committer.dest, liveness=WINDOW)
    assert [(s.job_id, s.state) for s in statuses] == [(committer.job_id, "alive")]
    committer.commit_job([message])
    # no renewal after the job's end
    assert committer.process.keepers.keeper_of(committer.dest, committer.job_id) is None
    assert [k for k in list_keys(client, bucket, "t/") if MAGIC_PATH_PREFIX in k] == []
    assert not any(t.name.startswith("s3commit-alive-") and t.is_alive() for t in threading.enumerate()
                   if committer.job_id[:8] in t.name)


def test_an_aborted_job_stops_renewing(s3_server):
    bucket = new_bucket(s3_server)
    committer = job(s3_server, f"s3://{bucket}/t")
    committer.setup_job()
    assert committer.process.keepers.keeper_of(committer.dest, committer.job_id) is not None
    committer.abort_job()
    assert committer.process.keepers.keeper_of(committer.dest, committer.job_id) is None
    assert list_keys(s3_server.client(), bucket, "t/") == []


# --- the next job sweeps the dead ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", COMMITTERS)
def test_a_job_killed_in_its_task_phase_is_swept_by_the_next_commit(s3_server, tmp_path, name):
    if not conditional(s3_server):
        pytest.skip("rclone: nothing is swept automatically")
    bucket, client, dest = fresh_table(s3_server)
    child, dead_id = start_dying_job(s3_server, dest, name, tmp_path)
    kill(child)
    assert pending_keys(client, bucket), "the dead job left pending uploads"
    scratch = STAGING_PATH_PREFIX if name != "magic" else MAGIC_PATH_PREFIX
    assert any(f"t/{scratch}{dead_id}/" in k for k in list_keys(client, bucket, "t/"))
    # Within its window the dead job still counts as alive: a commit now leaves it alone.
    early = job(s3_server, dest, name, tmp_path, job_liveness=3600)
    early.setup_job()
    success = early.commit_job([write(early, ["early.txt"])])
    assert success.metrics["committer_dead_jobs_swept"] == 0
    let_store_time_pass(s3_server, bucket, PAST_WINDOW)
    statuses = {s.job_id: s for s in job_statuses(early.store, early.dest, liveness=WINDOW)}
    assert statuses[dead_id].state == "dead" and statuses[dead_id].silent > WINDOW
    later = job(s3_server, dest, name, tmp_path)
    later.setup_job()
    success = later.commit_job([write(later, ["later.txt"])])
    assert success.metrics["committer_dead_jobs_swept"] == 1
    assert success.metrics["committer_dead_job_uploads_aborted"] >= 1
    assert_no_pending_uploads(client, bucket)
    assert [k for k in list_keys(client, bucket, "t/") if "/__" in f"/{k}" and "lease" not in k] == []
    assert user_keys(client, bucket) == ["t/early.txt", "t/later.txt"]


def test_a_dead_jobs_uploads_for_a_custom_partition_location_are_swept_too(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("rclone: nothing is swept automatically")
    bucket, client, dest = fresh_table(s3_server)
    child, _dead_id = start_dying_job(s3_server, dest, "magic", tmp_path, absolute=f"s3://{bucket}/elsewhere/p=1")
    kill(child)
    assert any(k.startswith("elsewhere/") for k in pending_keys(client, bucket))
    let_store_time_pass(s3_server, bucket, PAST_WINDOW)
    later = job(s3_server, dest)
    later.setup_job()
    later.commit_job([write(later, ["later.txt"])])
    assert_no_pending_uploads(client, bucket)
    assert list_keys(client, bucket, "elsewhere/") == []


def test_a_live_job_paused_longer_than_the_window_is_never_swept(s3_server, tmp_path):
    if not conditional(s3_server):
        pytest.skip("rclone: nothing is swept automatically")
    bucket, client, dest = fresh_table(s3_server)
    slow = job(s3_server, dest)
    slow.setup_job()
    slow_message = write(slow, ["slow.txt"])
    clock = ManualClock()
    keeper_on(clock, slow)
    for _ in range(10):  # the caller pauses 2.5 windows; its committer's thread renews every quarter window
        let_store_time_pass(s3_server, bucket, WINDOW / 4)
        clock.advance(WINDOW / 4)
    other = job(s3_server, dest)
    other.setup_job()
    success = other.commit_job([write(other, ["other.txt"])])
    assert success.metrics["committer_dead_jobs_swept"] == 0
    slow.commit_job([slow_message])
    assert user_keys(client, bucket) == ["t/other.txt", "t/slow.txt"]
    assert_no_pending_uploads(client, bucket)


class UnreachableRenewals(ConditionalRequests):
    """A store the job cannot reach for its renewals while ``down`` (its other requests go through)."""

    down = False

    def put_if_match(self, bucket, key, body, etag, **kwargs):
        if self.down and key.endswith("_owner.json"):
            raise EndpointUnreachableError("the store is unreachable (test)", operation="PutObject", bucket=bucket,
                                           key=key)
        return super().put_if_match(bucket, key, body, etag, **kwargs)


class Unreachable(S3Store):
    """A store whose owner-record renewals fail while ``store.conditional.down`` (:class:`UnreachableRenewals`)."""

    conditional_class = UnreachableRenewals
    conditional: UnreachableRenewals


@pytest.mark.parametrize("name", COMMITTERS)
def test_a_job_whose_renewals_fail_learns_at_commit_that_it_was_swept_and_loses_nothing_of_another(
        s3_server, tmp_path, name):
    if not conditional(s3_server):
        pytest.skip("rclone: nothing is swept automatically")
    bucket, client, dest = fresh_table(s3_server)
    cut_off = create_committer(name, dest, store=Unreachable(store_options_for(s3_server)), threads=4,
                               job_liveness=WINDOW, staging_dir=str(tmp_path / "cut"))
    cut_off.setup_job()
    cut_message = write(cut_off, ["cut.txt"])
    clock = ManualClock()
    keeper_on(clock, cut_off)
    cut_off.store.conditional.down = True
    let_store_time_pass(s3_server, bucket, PAST_WINDOW)
    clock.advance(PAST_WINDOW)  # its renewals fail meanwhile
    sweeper = job(s3_server, dest, name, tmp_path / "sweeper")
    sweeper.setup_job()
    success = sweeper.commit_job([write(sweeper, ["kept.txt"])])
    assert success.metrics["committer_dead_jobs_swept"] == 1
    cut_off.store.conditional.down = False
    with pytest.raises(JobSweptError, match=r"was judged dead and swept.*s3commit.job.liveness"):
        cut_off.commit_job([cut_message])
    assert user_keys(client, bucket) == ["t/kept.txt"]  # nothing of the swept job, everything of the other
    assert_no_pending_uploads(client, bucket)
    assert [k for k in list_keys(client, bucket, "t/") if "/__" in f"/{k}" and "lease" not in k] == []


@pytest.mark.simulator
@pytest.mark.parametrize("offset", [-3600.0, 3600.0])
def test_liveness_is_judged_by_the_stores_clock_whatever_the_clients(s3_sim, tmp_path, offset):
    # The store's clock an hour off this host's: judged by this host's clock, a live job would look dead (store
    # behind) or a dead one alive for an hour (store ahead).
    s3_sim.configure(clock_offset=offset)
    bucket = new_bucket(s3_sim)
    client = s3_sim.client()
    dest = f"s3://{bucket}/t"
    alive = job(s3_sim, dest)
    alive.setup_job()
    message = write(alive, ["alive.txt"])
    other = job(s3_sim, dest)
    other.setup_job()
    assert other.commit_job([write(other, ["other.txt"])]).metrics["committer_dead_jobs_swept"] == 0
    clock = ManualClock()
    keeper_on(clock, alive).stop()  # the job falls silent, as if its process died
    s3_sim.advance_clock(bucket, PAST_WINDOW)
    clock.advance(PAST_WINDOW)
    last = job(s3_sim, dest)
    last.setup_job()
    assert last.commit_job([write(last, ["last.txt"])]).metrics["committer_dead_jobs_swept"] == 1
    with pytest.raises(JobSweptError):
        alive.commit_job([message])
    assert user_keys(client, bucket) == ["t/last.txt", "t/other.txt"]
    assert_no_pending_uploads(client, bucket)


def test_the_next_commit_removes_the_emptied_directories_a_file_system_backed_store_keeps(s3_server):
    # SeaweedFS lists a committed job's emptied directory as a common prefix: the next commit's sweep removes it,
    # so that no later commit reads it again (on S3 and moto nothing is left to remove).
    if not conditional(s3_server):
        pytest.skip("rclone: no sweep at commit")
    bucket, client, dest = fresh_table(s3_server)
    first = job(s3_server, dest)
    first.setup_job()
    first.commit_job([write(first, ["first.txt"])])
    second = job(s3_server, dest)
    second.setup_job()
    second.commit_job([write(second, ["second.txt"])])
    listed = [job_id for job_id, _kind, _layout in job_directories(second.store, second.dest)]
    assert first.job_id not in listed
    assert user_keys(client, bucket) == ["t/first.txt", "t/second.txt"]


# --- stores without conditional writes -----------------------------------------------------------------------------

def test_a_store_without_conditional_writes_sweeps_nothing_by_itself_and_says_so_once(s3_server, tmp_path, caplog,
                                                                                      run_cli):
    if conditional(s3_server):
        pytest.skip("rclone is the store that ignores conditional writes")
    bucket, client, dest = fresh_table(s3_server)
    child, dead_id = start_dying_job(s3_server, dest, "magic", tmp_path)
    kill(child)
    let_store_time_pass(s3_server, bucket, PAST_WINDOW)
    for name in ("first.txt", "second.txt"):
        committer = job(s3_server, dest)
        committer.setup_job()
        assert committer.commit_job([write(committer, [name])]).metrics["committer_dead_jobs_swept"] == 0
    said = [r for r in caplog.records if "dead jobs under" in r.getMessage() and "never swept" in r.getMessage()]
    assert len(said) == 1 and "--older-than" in said[0].getMessage()
    assert pending_keys(client, bucket)  # the dead job's, kept: nobody can take its record safely here
    refused = run_cli("uploads", "sweep", dest)
    assert refused.code == 2 and "does not honour conditional writes" in refused.err and "--older-than" in refused.err
    swept = run_cli("uploads", "sweep", dest, "--older-than", "1s", "--liveness", "2s")
    assert swept.code == 0 and f"swept  magic job {dead_id}: dead" in swept.out
    assert_no_pending_uploads(client, bucket)
    assert user_keys(client, bucket) == ["t/first.txt", "t/second.txt"]


# --- the operator's view ------------------------------------------------------------------------------------------

def test_show_and_uploads_list_say_which_jobs_are_alive_dead_or_committed_and_sweep_sweeps_the_dead(
        s3_server, tmp_path, run_cli):
    if not conditional(s3_server):
        pytest.skip("rclone: covered above")
    bucket, client, dest = fresh_table(s3_server)
    child, dead_id = start_dying_job(s3_server, dest, "magic", tmp_path)
    kill(child)
    done = job(s3_server, dest)
    done.setup_job()
    done.commit_job([write(done, ["done.txt"])])
    running = job(s3_server, dest, job_liveness=3600)
    running.setup_job()
    write(running, ["running.txt"])
    let_store_time_pass(s3_server, bucket, PAST_WINDOW)
    shown = run_cli("show", dest + "/")
    assert shown.code == 0
    lines = shown.out.splitlines()
    assert any(f"magic job {running.job_id}: alive on" in line for line in lines)
    assert any(f"committed recently: {done.job_id}" in line for line in lines)
    listed = run_cli("uploads", "list", dest, "--json")
    jobs = {j["job_id"]: j["state"] for j in json.loads(listed.out)["jobs"]}
    assert jobs == {dead_id: "alive", running.job_id: "alive"}  # the default window: 10 minutes
    dry = run_cli("uploads", "sweep", dest, "--liveness", "2s", "--dry-run")
    assert dry.code == 0 and f"would sweep  magic job {dead_id}: dead" in dry.out
    assert pending_keys(client, bucket)  # a dry run changes nothing
    swept = run_cli("uploads", "sweep", dest, "--liveness", "2s", "--json")
    result = json.loads(swept.out)
    assert [j["job_id"] for j in result["swept"]] == [dead_id] and result["swept"][0]["uploads_aborted"] >= 1
    assert {j["job_id"]: j["why"] for j in result["left"]} == {running.job_id: "alive"}
    assert pending_keys(client, bucket) == ["t/running.txt"]  # the live job's, untouched
    running.abort_job()
    assert_no_pending_uploads(client, bucket)


def test_a_job_of_unknown_liveness_is_swept_only_at_the_operators_word(s3_server, run_cli):
    # An S3A job's leftovers (no liveness record): a __magic_job-<id>/ directory and an upload whose key carries the
    # job id. The sweep leaves them; with --older-than it takes them once the directory has been quiet that long.
    bucket = new_bucket(s3_server)
    client = s3_server.client()
    other = str(uuid.uuid4())
    directory = f"t/{MAGIC_PATH_PREFIX}{other}/job-{other}/00"
    client.put_object(Bucket=bucket, Key=f"{directory}/task_0000.pendingset", Body=b"{}")
    upload = client.create_multipart_upload(Bucket=bucket, Key=f"t/part-00000-{other}.parquet")["UploadId"]
    left = run_cli("uploads", "sweep", f"s3://{bucket}/t", "--older-than", "1h", "--json")
    assert left.code == 0 and json.loads(left.out)["swept"] == []
    assert "younger than --older-than" in json.loads(left.out)["left"][0]["why"] or not conditional(s3_server)
    let_store_time_pass(s3_server, bucket, 2.5)
    swept = run_cli("uploads", "sweep", f"s3://{bucket}/t", "--older-than", "1s", "--json")
    result = json.loads(swept.out)
    assert [(j["job_id"], j["state"], j["uploads_aborted"]) for j in result["swept"]] == [(other, "unknown", 1)]
    assert_no_pending_uploads(client, bucket)
    assert list_keys(client, bucket, "t/") == []
    assert upload


# --- a committer that generated its own job id ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["magic", "directory", "partitioned"])
def test_a_self_generated_job_id_refuses_task_setup_until_the_job_is_set_up(s3_server, tmp_path, name):
    # Hadoop's AbstractITCommitProtocol.testSelfGeneratedUUID (E_SELF_GENERATED_JOB_UUID).
    bucket = new_bucket(s3_server)
    committer = create_committer(name, f"s3://{bucket}/t", store=S3Store(store_options_for(s3_server)),
                                 staging_dir=str(tmp_path))
    with pytest.raises(CommitStateError, match=r"generated its own job id .* Call setup_job\(\) first .* job_id="):
        committer.setup_task(committer.new_task_attempt_id(0))
    assert list_keys(s3_server.client(), bucket, "") == []
    given = create_committer(name, f"s3://{bucket}/t", store=S3Store(store_options_for(s3_server)),
                             staging_dir=str(tmp_path), job_id=committer.job_id)
    given.setup_task(given.new_task_attempt_id(0))  # a job id given by the caller: the driver set the job up
    committer.setup_job()
    committer.setup_task(committer.new_task_attempt_id(0))  # set up now
    committer.abort_job()
