"""Every crash point of the commit engine: the driver "dies" at each request of a commit in turn, then ``recover``,
``recover --abort``, or the next job (and the sweep) runs in another process; every end state must be one that a
serial order of the jobs allows.

The store is :class:`s3commit.testing.memory.MemoryS3`: S3 in memory, shared by the simulated processes, whose
client stops a process at its Nth request, before the request is applied (``before``) or after it was applied and
before its answer arrived (``after``). The dead process's threads die with it (their requests raise
:class:`ProcessStopped`); each simulated process has its own :class:`ProcessState` (its task registry, the liveness
records it keeps fresh), which ends with it. Time passes on the store's clock (:meth:`MemoryS3.advance`), so leases
and liveness records of the dead expire without anyone sleeping.

End states checked after each follow-up:

- the visible files (the destination less ``_SUCCESS`` and scratch keys) are exactly the old data, or exactly what
  the job's commit makes of it (appended, replacing everything, replacing the partitions it wrote), byte for byte;
- ``_SUCCESS`` names the job whose files are visible (the job that wrote the old data, or the crashed job, or the
  next job);
- after the follow-ups, no upload is pending and no job directory is left, and no lease is held.

The same scenarios run through moto, with real processes SIGKILLed at named points, in ``test_crash_matrix.py``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from s3commit import create_committer
from s3commit.commit.lease import lease_for, release_by_hand
from s3commit.commit.process_state import ProcessState
from s3commit.commit.recovery import recover
from s3commit.commit.recovery_result import AlreadyCommittedError, RecoveryAction, RecoveryError
from s3commit.commit.snapshot_admin import enable_snapshots
from s3commit.commit.snapshots import SnapshotLog
from s3commit.commit.sweep import job_statuses, sweep_dead_jobs
from s3commit.committers.base import Committer
from s3commit.committers.sink_batches import SINK_LOG_DIR, BatchCommit, batch_job_id, recover_sink
from s3commit.config.options import CommitterOptions
from s3commit.errors import S3CommitError
from s3commit.model.paths import JOURNAL_FILE, LEASE_NAME, is_scratch_key
from s3commit.model.uri import S3Uri
from s3commit.testing.memory import MemoryS3, ProcessStopped, client_of, s3_error

BUCKET = "b"
DEST = f"s3://{BUCKET}/t"
OPTIONS = CommitterOptions(threads=4, lease_wait=5)
"""A follow-up that waits for a lease fails in seconds, naming the holder, instead of hanging."""
LATER = OPTIONS.job_liveness + OPTIONS.lease_duration + 1
"""Seconds of the store's clock after which the dead job's lease and liveness record have both expired."""


def visible(s3: MemoryS3, prefix: str = "t/") -> dict[str, bytes]:
    """What a reader sees: on a snapshot destination the current snapshot's files (as a reader of its log reads
    them, each file read from the store); elsewhere what a listing finds: every object but scratch keys and
    ``_SUCCESS``."""
    objects = s3.objects(BUCKET, prefix)
    snapshot = SnapshotLog(s3.store(), S3Uri.parse(DEST)).current()
    if snapshot is not None:
        return {f"t/{f.relative}": objects[f"t/{f.relative}"] for f in snapshot.files}
    return {k: v for k, v in objects.items()
            if not is_scratch_key(k) and not k.endswith("/_SUCCESS") and SINK_LOG_DIR not in k}


def success_job(s3: MemoryS3) -> str | None:
    body = s3.objects(BUCKET, "t/_SUCCESS").get("t/_SUCCESS")
    return json.loads(body)["jobId"] if body else None


def assert_clean(s3: MemoryS3, why: str) -> None:
    assert s3.uploads(BUCKET) == [], f"{why}: uploads left {s3.uploads(BUCKET)}"
    scratch = [k for k in s3.objects(BUCKET) if is_scratch_key(k) and not k.endswith(LEASE_NAME)]
    assert scratch == [], f"{why}: scratch objects left {scratch}"
    lease = s3.objects(BUCKET).get(f"t/{LEASE_NAME}")
    assert lease is None or json.loads(lease).get("holder") is None, f"{why}: a lease is still held"


def die(committer: Committer) -> None:
    """The committer's process dies: its state (task registry, liveness keepers) ends with it."""
    committer.process.end()


# --- jobs ------------------------------------------------------------------------------------------------------


@dataclass
class Job:
    """A job written through ``committer``: its files (relative -> bytes), then how its commit is called."""

    name: str
    files: dict[str, bytes]
    commit_args: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    def run_tasks(self, s3: MemoryS3, job_id: str) -> tuple[Committer, list[Any]]:
        """Set the job up in a driver process and run its tasks in an executor process; returns the driver's
        committer (its store a process of its own) and the task commit messages."""
        options = CommitterOptions(threads=4, **self.options)
        driver = create_committer(self.name, DEST, job_id=job_id, store=s3.store(), options=options,
                                  process=ProcessState())
        driver.setup_job()
        executor = create_committer(self.name, DEST, job_id=job_id, store=s3.store(), options=options,
                                    process=ProcessState())
        by_task: dict[int, list[tuple[str, bytes]]] = {}
        for i, (relative, body) in enumerate(sorted(self.files.items())):
            by_task.setdefault(i % 3, []).append((relative, body))
        messages = []
        for task, files in sorted(by_task.items()):
            attempt = executor.setup_task(executor.new_task_attempt_id(task))
            for relative, body in files:
                with attempt.open(relative) as out:
                    out.write(body)
            messages.append(executor.commit_task(attempt))
        return driver, messages

    def final(self, committer: Committer) -> dict[str, bytes]:
        """Final key -> bytes of the job's files (staging committers put the job id in each name)."""
        from s3commit.model.paths import add_uuid

        name = (lambda r: r) if committer.name == "magic" else (lambda r: add_uuid(r, committer.job_id))
        return {f"t/{name(r)}": b for r, b in self.files.items()}

    def after(self, old: dict[str, bytes], committer: Committer) -> dict[str, bytes]:
        """What the destination holds once this job committed over ``old``."""
        new = self.final(committer)
        replaces_all = self.options.get("conflict_mode") == "replace" and committer.name == "directory"
        if self.commit_args.get("delete_paths") == [""] or replaces_all:
            return new
        if self.commit_args.get("replace_partitions") or self.options.get("conflict_mode") == "replace":
            written = {k.rsplit("/", 1)[0] for k in new}
            return {**{k: v for k, v in old.items() if k.rsplit("/", 1)[0] not in written}, **new}
        return {**old, **new}


def files(tag: str, partitions: tuple[str, ...] = ("p=0", "p=1"), *, big: bool = True) -> dict[str, bytes]:
    """Two files a partition and, if ``big``, one large enough that the writer sends two parts (5 MiB + a tail)."""
    out = {f"{p}/part-{i}-{tag}.txt": f"{tag}:{p}:{i}".encode() * 20 for p in partitions for i in range(2)}
    if big:
        out[f"{partitions[0]}/big-{tag}.bin"] = tag.encode()[:1] * (5 * 1024 * 1024 + 17)
    return out


SCENARIOS: dict[str, Callable[[], Job]] = {
    "magic-append": lambda: Job("magic", files("new")),
    "magic-overwrite": lambda: Job("magic", files("new"), commit_args={"delete_paths": [""]}),
    "magic-dynamic-overwrite": lambda: Job("magic", files("new"), commit_args={"replace_partitions": True}),
    "directory-replace": lambda: Job("directory", files("new"), options={"conflict_mode": "replace"}),
    "partitioned-replace": lambda: Job("partitioned", files("new"), options={"conflict_mode": "replace"}),
}

AT_JOB_COMMIT = "-at-job-commit"
"""A scenario's name with this suffix: its tasks leave their uploads pending on a snapshot destination too
(``s3commit.snapshot.complete-at-task-commit=false``)."""


def scenario_job(scenario: str) -> Job:
    """The job of a scenario (of :data:`SCENARIOS`, or one with :data:`AT_JOB_COMMIT` added)."""
    if scenario.endswith(AT_JOB_COMMIT):
        job = SCENARIOS[scenario.removesuffix(AT_JOB_COMMIT)]()
        return replace(job, options={**job.options, "complete_at_task_commit": False})
    return SCENARIOS[scenario]()


def old_data(s3: MemoryS3, *, snapshots: bool = False) -> tuple[dict[str, bytes], str]:
    """The table before the job: three partitions written by a first job (its ``_SUCCESS``); ``snapshots``: then
    made a snapshot destination (a second job commits snapshot 1 over it, so that the log has history)."""
    job = Job("magic", files("old", ("p=0", "p=1", "p=2"), big=False))
    committer, messages = job.run_tasks(s3, str(uuid.uuid4()))
    committer.commit_job(messages)
    if snapshots:
        enable_snapshots(DEST, store=s3.store(), options=OPTIONS)
        job = Job("magic", files("older", ("p=2",), big=False), commit_args={"replace_partitions": True})
        committer, messages = job.run_tasks(s3, str(uuid.uuid4()))
        committer.commit_job(messages, **job.commit_args)
    return visible(s3), committer.job_id


@dataclass
class Crash:
    """One crashed commit: the store, the table before, the job and its driver, where it died."""

    s3: MemoryS3
    old: dict[str, bytes]
    old_job: str
    job: Job
    driver: Committer
    point: str

    def allowed(self) -> dict[str, tuple[dict[str, bytes], str]]:
        """The end states a serial order allows: name -> (visible files, the job ``_SUCCESS`` names)."""
        return {"old": (self.old, self.old_job),
                "new": (self.job.after(self.old, self.driver), self.driver.job_id)}

    def check(self, when: str, *, allowed: dict[str, tuple[dict[str, bytes], str]] | None = None) -> str:
        """The end state is one of ``allowed``; returns its name."""
        now, named = visible(self.s3), success_job(self.s3)
        for name, (expected, job) in (allowed or self.allowed()).items():
            if now == expected and named == job:
                return name
        raise AssertionError(
            f"{self.point}, {when}: not a serial state. Visible {len(now)} files, _SUCCESS names {named}; "
            f"differs from old by {sorted(set(now) ^ set(self.old))[:6]}, from new by "
            f"{sorted(set(now) ^ set(self.job.after(self.old, self.driver)))[:6]}")


def crash_at(scenario: str, stop_at: int | None, stop: str, end: Callable[[Committer, list[Any]], object],
             what: str = "", *, snapshots: bool = False) -> tuple[Crash, int]:
    """Write the old data, run the scenario's job to its end (``end``: its commit or abort, called with its driver and
    the task messages), the driver dying at the ``stop_at``-th request of that end (None: it does not die). Returns
    the crash and how many requests the end sent. ``snapshots``: on a snapshot destination."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    old, old_job = old_data(s3, snapshots=snapshots)
    job = scenario_job(scenario)
    driver, messages = job.run_tasks(s3, str(uuid.uuid4()))
    client = client_of(driver.store)
    before = len(client.requests)
    if stop_at is not None:
        client.stop_at, client.stop = before + stop_at, stop
    point = f"{what}no crash"
    try:
        end(driver, messages)
    except ProcessStopped:
        assert client.stopped is not None
        point = f"{what}{stop} request {stop_at} ({client.stopped.operation} {client.stopped.key})"
        die(driver)
    return Crash(s3, old, old_job, job, driver, point), len(client.requests) - before


def crash_commit(scenario: str, stop_at: int | None, stop: str, *, snapshots: bool = False) -> tuple[Crash, int]:
    """The scenario's job commit, its driver dying at the ``stop_at``-th request of the commit."""
    commit_args = scenario_job(scenario).commit_args
    return crash_at(scenario, stop_at, stop, lambda driver, messages: driver.commit_job(messages, **commit_args),
                    snapshots=snapshots)


def commit_requests(scenario: str, *, snapshots: bool = False) -> int:
    crash, sent = crash_commit(scenario, None, "before", snapshots=snapshots)
    assert crash.check("a commit that does not die") == "new"
    assert_clean(crash.s3, "a commit that does not die")
    return sent


# --- the follow-ups --------------------------------------------------------------------------------------------


def follow_recover(crash: Crash) -> None:
    """An operator runs ``s3commit recover`` (finish), then ``recover --abort`` for a job it could not finish."""
    s3, job_id = crash.s3, crash.driver.job_id
    s3.advance(LATER)  # the operator comes after the dead driver's lease expired
    report = recover(s3.store(), DEST, job_id, options=OPTIONS)
    state = crash.check(f"after recover ({report.action.value})")
    if state == "old":
        recover(s3.store(), DEST, job_id, abort=True, options=OPTIONS)
        crash.check("after recover --abort")
    assert_clean(s3, f"{crash.point}, after recover")


def follow_abort(crash: Crash) -> None:
    """An operator runs ``s3commit recover --abort``; where it refuses (the job had committed, or its overwrite may
    have begun), ``recover`` finishes it."""
    s3, job_id = crash.s3, crash.driver.job_id
    s3.advance(LATER)
    try:
        report = recover(s3.store(), DEST, job_id, abort=True, options=OPTIONS)
        state = crash.check("after recover --abort")
        # A job that had committed (only its lease's release was cut short) is left committed, and the report says so.
        assert state == "old" or (report.action is RecoveryAction.NOTHING and "has committed" in report.message), (
            f"{crash.point}: recover --abort left the new data: {report}")
    except (AlreadyCommittedError, RecoveryError):
        recover(s3.store(), DEST, job_id, options=OPTIONS)
        assert crash.check("after recover (--abort refused)") == "new"
    assert_clean(s3, f"{crash.point}, after recover --abort")


def follow_next_job(crash: Crash) -> None:
    """Later (the dead job's lease and liveness record expired on the store's clock), the next job overwrites the
    table in another process: it settles the dead commit under the lease and sweeps the dead job; then the sweep
    runs. The table is then exactly the next job's."""
    s3 = crash.s3
    s3.advance(LATER)
    nxt = Job("magic", files("next", ("p=1", "p=3"), big=False), commit_args={"delete_paths": [""]})
    driver, messages = nxt.run_tasks(s3, str(uuid.uuid4()))
    driver.commit_job(messages, **nxt.commit_args)
    crash.check("after the next job", allowed={"next": (nxt.final(driver), driver.job_id)})
    s3.advance(LATER)
    sweep_dead_jobs(s3.store(), S3Uri.parse(DEST), liveness=OPTIONS.job_liveness, sweeper="test", conditional=True)
    assert_clean(s3, f"{crash.point}, after the next job and the sweep")


FOLLOW_UPS = {"recover": follow_recover, "abort": follow_abort, "next-job": follow_next_job}


@pytest.mark.parametrize("follow_up", list(FOLLOW_UPS))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_commit_killed_at_every_request_ends_in_a_serial_state(scenario, follow_up, tally) -> None:
    total = commit_requests(scenario)
    assert total > 10
    seen: dict[str, int] = {}
    for stop in ("before", "after"):
        for n in range(1, total + 1):
            crash, _ = crash_commit(scenario, n, stop)
            FOLLOW_UPS[follow_up](crash)
            seen[stop] = seen.get(stop, 0) + 1
    tally["crash points (memory store)"] += sum(seen.values())
    assert seen == {"before": total, "after": total}


def crash_waiting_for_the_lease(scenario: str) -> Crash:
    """The scenario's job commit while another job holds the lease: its journal is written beside the lease's
    taking, and its driver dies at its first request for the lease after that journal's PUT was applied."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    old, old_job = old_data(s3)
    job = scenario_job(scenario)
    driver, messages = job.run_tasks(s3, str(uuid.uuid4()))
    holder = lease_for(s3.store(), S3Uri.parse(DEST), str(uuid.uuid4()), OPTIONS).acquire()
    client = client_of(driver.store)
    journalled = threading.Event()

    def die_after_the_journal(request: Any) -> Exception | None:
        if request.key.endswith(JOURNAL_FILE) and request.operation == "put_object":
            journalled.set()
        elif journalled.is_set() and request.key.endswith(LEASE_NAME):
            client.stopped = request
            return ProcessStopped(f"the process died at request {request.number} ({request.operation})")
        return None

    client.fail = die_after_the_journal
    with pytest.raises(ProcessStopped):
        driver.commit_job(messages, **job.commit_args)
    die(driver)
    holder.release()
    assert journalled.is_set() and any(k.endswith(JOURNAL_FILE) for k in s3.objects(BUCKET))
    assert visible(s3) == old, "a commit that never held the lease changed the table"
    return Crash(s3, old, old_job, job, driver, "waiting for the lease, its journal written")


@pytest.mark.parametrize("follow_up", list(FOLLOW_UPS))
@pytest.mark.parametrize("scenario", ["magic-append", "magic-overwrite", "directory-replace"])
def test_a_commit_killed_while_it_waits_for_the_lease_is_settled_by_the_next_sweep(scenario, follow_up) -> None:
    """A commit writes its journal beside the lease's taking: one that dies while another job holds the lease
    leaves a journal naming uploads none of which is complete. ``recover`` finishes it, ``recover --abort`` rolls
    it back, and where neither runs the next job's sweep of dead jobs rolls it back (no lease's taker would)."""
    FOLLOW_UPS[follow_up](crash_waiting_for_the_lease(scenario))


def test_the_sweep_never_rolls_back_a_dead_commit_that_completed_a_file():
    """A dead job's journalled commit that completed some of its files and no longer holds the lease (an operator
    freed it by hand) is left by the sweep (its files are visible: rolling back is `recover --abort`'s to decide),
    and ``recover`` then finishes it."""
    commits = 0

    def completes(driver: Committer, messages: list[Any]) -> None:
        client = client_of(driver.store)

        def die_after_two(request: Any) -> Exception | None:
            nonlocal commits
            if request.operation == "complete_multipart_upload":
                commits += 1
                if commits > 2:
                    client.stopped = request
                    return ProcessStopped("the process died after its second Complete")
            return None

        client.fail = die_after_two
        driver.commit_job(messages)

    crash, _ = crash_at("magic-append", None, "before", completes)
    s3 = crash.s3
    assert 0 < len(set(visible(s3)) - set(crash.old)) < len(crash.job.final(crash.driver))  # half committed
    s3.advance(LATER)
    release_by_hand(s3.store(), S3Uri.parse(DEST))
    result = sweep_dead_jobs(s3.store(), S3Uri.parse(DEST), liveness=OPTIONS.job_liveness, sweeper="test",
                             conditional=True)
    assert [status.job_id for status, _ in result.left] == [crash.driver.job_id] and not result.swept
    assert any(k.endswith(JOURNAL_FILE) for k in s3.objects(BUCKET))
    recover(s3.store(), DEST, crash.driver.job_id, options=OPTIONS)
    assert crash.check("after recover") == "new"
    assert_clean(s3, "after recover")


@pytest.mark.parametrize("later_commit", ["overwrite", "snapshot-append"])
def test_a_journal_left_after_its_commit_never_rewrites_a_later_jobs_success(later_commit):
    """A commit whose journal's DELETE never landed (its lease released, every other step done) leaves a journal
    naming pendingsets already deleted. A later job commits over the table (on a snapshot destination, appending:
    its snapshot still lists the first job's files); ``recover`` of the first then only finishes its clean-up: the
    ``_SUCCESS`` naming the later job stays (the lease recorded the first as committed, so its own ``_SUCCESS`` had
    been written)."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    snapshots = later_commit.startswith("snapshot")
    old_data(s3, snapshots=snapshots)
    first = Job("magic", files("first", big=False))
    driver, messages = first.run_tasks(s3, str(uuid.uuid4()))
    client_of(driver.store).fail = lambda request: s3_error("InternalError", 500) if (
        request.operation == "delete_object" and request.key.endswith(JOURNAL_FILE)) else None
    driver.commit_job(messages)  # (its clean-up's failure is a warning: the job committed)
    die(driver)
    assert any(k.endswith(JOURNAL_FILE) for k in s3.objects(BUCKET)) and success_job(s3) == driver.job_id
    # (its sweep off: a sweep deletes such a journal, below)
    later = Job("magic", files("later", ("p=1", "p=3"), big=False),
                commit_args={} if snapshots else {"delete_paths": [""]}, options={"sweep_dead_jobs": False})
    after, messages = later.run_tasks(s3, str(uuid.uuid4()))
    after.commit_job(messages, **later.commit_args)
    seen = visible(s3)
    if snapshots:
        assert set(first.final(driver)) <= set(seen)  # (the later snapshot lists the first job's files)
    report = recover(s3.store(), DEST, driver.job_id, options=OPTIONS)
    assert report.action is RecoveryAction.CLEANED_UP, report
    assert success_job(s3) == after.job_id and visible(s3) == seen
    assert_clean(s3, "after recover of the first job")


@pytest.mark.parametrize("lease_remembers", [True, False], ids=["lease-remembers-it", "lease-forgot-it"])
def test_a_journal_left_after_its_commit_is_deleted_by_the_next_jobs_sweep(lease_remembers):
    """The journal a committed job left (its DELETE lost once everything else was done, the liveness record with the
    rest) is its directory's only object. Where the commit lease records the job as committed it is listed as
    committed and the next job's sweep deletes it at once: no window, since nothing of the job is left to do.
    Where the lease does not (its record gone), it stays a job of unknown liveness, never swept without an age."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    old_data(s3)
    first = Job("magic", files("first", big=False))
    driver, messages = first.run_tasks(s3, str(uuid.uuid4()))
    client_of(driver.store).fail = lambda request: s3_error("InternalError", 500) if (
        request.operation == "delete_object" and request.key.endswith(JOURNAL_FILE)) else None
    driver.commit_job(messages)
    die(driver)
    [journal] = [k for k in s3.objects(BUCKET) if is_scratch_key(k) and not k.endswith(LEASE_NAME)]
    assert journal.endswith(JOURNAL_FILE)
    if not lease_remembers:
        lease = next(k for k in s3.objects(BUCKET) if k.endswith(LEASE_NAME))
        s3.store().objects.delete_object(BUCKET, lease)
    dest = S3Uri.parse(DEST)
    [status] = job_statuses(s3.store(), dest, liveness=60)
    assert (status.job_id, status.state) == (driver.job_id, "committed" if lease_remembers else "unknown"), status
    later = Job("magic", files("later", ("p=1", "p=3"), big=False), commit_args={"delete_paths": [""]})
    after, messages = later.run_tasks(s3, str(uuid.uuid4()))
    success = after.commit_job(messages, **later.commit_args)
    assert success_job(s3) == after.job_id and visible(s3) == later.final(after)
    if lease_remembers:
        assert success.metrics.get("committer_dead_jobs_swept") == 1, success.metrics
        assert_clean(s3, "after the next job's commit")
        assert job_statuses(s3.store(), dest, liveness=60) == []
    else:
        assert journal in s3.objects(BUCKET), "a journal the lease does not vouch for was deleted"


def in_no_snapshot(crash: Crash) -> list[str]:
    """The crashed job's files still in the store that no snapshot of the log lists (a job that never published
    must leave none: its abort, the sweep or the next job's settling deletes what its task commits completed)."""
    s3 = crash.s3
    snapshots = SnapshotLog(s3.store(), S3Uri.parse(DEST))
    listed = {f"t/{r}" for i, _ in snapshots.state().entries for r in snapshots.read(i).relatives}
    objects = s3.objects(BUCKET, "t/")
    return sorted(k for k in crash.job.final(crash.driver) if k in objects and k not in listed)


@pytest.mark.parametrize("early", [True, pytest.param(False, marks=pytest.mark.slow)],
                         ids=["completed-at-task-commit", "completed-at-job-commit"])
@pytest.mark.parametrize("follow_up", [f if f == "recover" else pytest.param(f, marks=pytest.mark.slow)  # budget
                                       for f in FOLLOW_UPS])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_snapshot_commit_killed_at_every_request_never_shows_a_reader_anything_but_one_snapshot(
        scenario, follow_up, early, tally) -> None:
    """On a snapshot destination the reader's guarantee holds at the crash itself, not only once a follow-up ran:
    a reader of the log sees exactly the old snapshot or exactly the new one whatever request the driver died at
    (a lister of the plain directory would see the new files beside the old ones from the first Complete). With the
    tasks' uploads completed at task commit (the job commit is then its journal, the log entry and ``_SUCCESS``),
    too; and once the follow-up ran no file of the job is left in the store unless a snapshot lists it."""
    scenario = scenario if early else f"{scenario}{AT_JOB_COMMIT}"
    total = commit_requests(scenario, snapshots=True)
    assert total > 10 if not early else total > 5
    for stop in ("before", "after"):
        for n in range(1, total + 1):
            crash, _ = crash_commit(scenario, n, stop, snapshots=True)
            now = visible(crash.s3)
            assert now in (crash.old, crash.job.after(crash.old, crash.driver)), (
                f"{crash.point}: a reader of the log sees {sorted(now)[:6]}, neither snapshot")
            FOLLOW_UPS[follow_up](crash)
            assert in_no_snapshot(crash) == [], f"{crash.point}, after {follow_up}: the job's files left behind"
            tally["crash points (memory store)"] += 1


# --- an abort killed at every request --------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["magic-overwrite", "directory-replace"])
def test_an_abort_killed_at_every_request_leaves_the_old_data_and_recover_abort_clears_it(scenario, tally) -> None:
    def run(stop_at: int | None, stop: str) -> tuple[Crash, int]:
        return crash_at(scenario, stop_at, stop, lambda driver, _messages: driver.abort_job(), what="abort ")

    _, total = run(None, "before")
    for stop in ("before", "after"):
        for n in range(1, total + 1):
            crash, _ = run(n, stop)
            assert crash.check("after the killed abort") == "old"
            crash.s3.advance(LATER)
            recover(crash.s3.store(), DEST, crash.driver.job_id, abort=True, options=OPTIONS)
            assert crash.check("after recover --abort") == "old"
            assert_clean(crash.s3, crash.point)
            tally["crash points (memory store)"] += 1


# --- a recovery killed at every request ------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["magic-overwrite", "partitioned-replace"])
def test_a_recovery_killed_at_every_request_is_finished_by_the_next_recovery(scenario, tally) -> None:
    """The commit dies after its journal (half its Completes done), then ``recover`` dies at each of its requests;
    a second ``recover`` finishes the commit."""
    total = commit_requests(scenario)
    recover_requests = None
    for n in [None, *range(1, 200)]:
        crash, _ = crash_commit(scenario, total // 2, "after")
        crash.s3.advance(LATER)
        store = crash.s3.store()
        client = client_of(store)
        client.stop_at = n
        with contextlib.suppress(ProcessStopped):
            recover(store, DEST, crash.driver.job_id, options=OPTIONS)
        if n is None:
            recover_requests = len(client.requests)
            assert crash.check("after an undisturbed recovery") == "new"
            continue
        assert recover_requests is not None
        if n > recover_requests:
            break
        crash.s3.advance(LATER)
        recover(crash.s3.store(), DEST, crash.driver.job_id, options=OPTIONS)
        assert crash.check(f"recovery killed at request {n}, then recovered again") == "new"
        assert_clean(crash.s3, f"recovery killed at request {n}")
        tally["crash points (memory store)"] += 1
    assert recover_requests and recover_requests > 5


# --- a streaming batch killed at every request -----------------------------------------------------------------


def test_a_streaming_batch_killed_at_every_request_ends_committed_once(tally) -> None:
    """A batch's commit (prepare, the sink's log entry: its commit point, then finish) dies at each request; the next
    run of the query commits the batch again (a new job) unless the log has it, then settles the sink
    (``recover_sink``). The log names exactly one job's files, those files are visible, and no upload is left."""
    def run(stop_at: int | None, stop: str) -> tuple[MemoryS3, str, int, int]:
        s3 = MemoryS3()
        s3.create_bucket(BUCKET)
        job_id = batch_job_id(0)
        driver_store = s3.store()
        # Spark's sink names each file with the batch job's id: what the sink's recovery matches the log on.
        _, messages = Job("magic", files(job_id)).run_tasks(s3, job_id)
        client = client_of(driver_store)
        if stop_at is not None:
            client.stop_at, client.stop = stop_at, stop
        driver = ProcessState()
        try:
            commit_batch(driver_store, job_id, messages, driver)
        except ProcessStopped:
            driver.end()
        return s3, job_id, len(client.requests), len(messages)

    _, _, total, _ = run(None, "before")
    for stop in ("before", "after"):
        for n in range(1, total + 1):
            s3, _, _, _ = run(n, stop)
            log_key = f"t/{SINK_LOG_DIR}/0"
            if log_key not in s3.objects(BUCKET):  # the batch is not committed: the next run redoes it
                again = batch_job_id(0)
                _, messages = Job("magic", files(again)).run_tasks(s3, again)
                commit_batch(s3.store(), again, messages)
            recover_sink(s3.store(), DEST, process=ProcessState())
            entry = s3.objects(BUCKET)[log_key].decode()
            named = sorted(json.loads(line)["path"].split(f"{BUCKET}/", 1)[1] for line in entry.splitlines()[1:])
            assert sorted(visible(s3)) == named, f"batch killed {stop} request {n}: visible files differ from the log"
            assert_clean(s3, f"batch killed {stop} request {n}")
            tally["crash points (memory store)"] += 1


def commit_batch(store: Any, job_id: str, messages: list[Any], process: ProcessState | None = None) -> None:
    """What the JVM's streaming commit protocol does in its sidecar (``process``): prepare, write the log entry with
    If-None-Match, finish (or roll back where another run wrote the entry first)."""
    batch = BatchCommit(store, DEST, job_id, options=OPTIONS, process=process or ProcessState())
    uploads = batch.prepare(messages)
    entry = "v1\n" + "\n".join(json.dumps({"path": f"s3a://{BUCKET}/{u.destination_key}", "size": u.length,
                                           "isDir": False, "modificationTime": 0, "blockReplication": 1,
                                           "blockSize": 0, "action": "add"}) for u in uploads)
    try:
        store.objects.put_object(BUCKET, f"t/{SINK_LOG_DIR}/{batch.batch_id}", entry.encode(), if_none_match=True)
    except S3CommitError:
        batch.roll_back()
        return
    batch.finish()
