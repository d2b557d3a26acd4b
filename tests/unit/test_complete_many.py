"""Many Completes from one event loop (UploadRequests.complete_many, s3commit.store.lean_http) against S3Wire on a
loopback socket: each upload's outcome is the one it has when completed alone (completed, read back after
NoSuchUpload, a conflict not sent twice, a throttle or a 500 retried under the store's policy), every attempt counted,
the adaptive limit shared and lowered by throttles, the first failure stopping what was not sent; and the job commit
sending its Completes this way where it may."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from s3commit.commit.engine import CommitEngine
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.upload_actions import complete_call
from s3commit.config.options import CommitterOptions, RetryPolicy
from s3commit.errors import (
    CommitConflictError,
    InvalidRequestError,
    JobCommitError,
    LeaseLostError,
    PreconditionFailedError,
    ThrottledError,
)
from s3commit.model.manifests import PendingSet, PendingUpload
from s3commit.model.paths import JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store.uploads import CompleteCall
from s3commit.testing import MemoryS3, S3Wire
from s3commit.testing._sim.profiles import Throttle, ThrottleSpec, get_profile
from s3commit.testing.memory import s3_error

BUCKET = "many"
NO_WAIT = RetryPolicy(max_attempts=5, initial_delay=0, max_delay=0)


class RefusesLean(S3Wire):
    """A store that refuses what s3commit's lean path builds (as a store whose signature check it failed would:
    403 SignatureDoesNotMatch, not acted on) and answers botocore's requests."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.refusals = 0
        self._refusals_lock = threading.Lock()

    def respond(self, method, url, headers, body, **kwargs):
        agent = {str(name).lower(): value for name, value in headers.items()}.get("user-agent", "")
        if (agent.decode() if isinstance(agent, bytes) else str(agent)).endswith(" lean"):
            with self._refusals_lock:
                self.refusals += 1
            return self._error("SignatureDoesNotMatch", 403, "The request signature we calculated does not match "
                               "the signature you provided.", urlsplit(url).path, method)
        return super().respond(method, url, headers, body, **kwargs)


def listening(*, fail=None, throttle=None, profile=None, lean=True, wire_class=S3Wire):
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    wire = wire_class(s3, fail=fail, throttle=throttle, profile=profile)
    wire.listen()
    return s3, wire, wire.store(lean_requests=lean, retry=NO_WAIT)


def uploads(store, n, prefix="out/day=1/part"):
    """``n`` uploads of one small part each, as ``(key, CompleteCall)``."""
    made = []
    for i in range(n):
        key = f"{prefix}-{i:04d} x+.parquet"
        upload_id = store.uploads.create_multipart_upload(BUCKET, key)
        part = store.uploads.upload_part(BUCKET, key, upload_id, 1, b"data %d" % i)
        made.append((key, CompleteCall(BUCKET, key, upload_id, (part.etag,),
                                       checksum_algorithm=store.uploads.checksum_algorithm(BUCKET),
                                       part_checksums=(part.checksum,) if part.checksum else ())))
    return made


def run(store, calls, **kwargs):
    done = {}
    lock = threading.Lock()

    def record(tag, etag):
        with lock:
            done[tag] = etag

    failures = store.uploads.complete_many(calls, done=record, **kwargs)
    return done, failures


def test_every_upload_is_completed_once_with_the_etag_a_single_complete_gives():
    s3, wire, store = listening()
    assert store.uploads.can_complete_many(BUCKET)
    calls = uploads(store, 40)
    before = store.counters.snapshot()["requests"].get("CompleteMultipartUpload", 0)
    done, failures = run(store, calls)
    assert failures == []
    assert set(done) == {key for key, _ in calls}
    for key, _ in calls:
        assert store.objects.head_object(BUCKET, key).etag == done[key]
        assert done[key].endswith('-1"')
    assert s3.uploads(BUCKET) == []
    counted = store.counters.snapshot()
    assert counted["requests"]["CompleteMultipartUpload"] - before == 40
    assert not counted["retries"] and not counted["failures"]
    wire.close()


def test_not_on_connections_of_its_own_where_the_lean_path_is_off():
    _, wire, store = listening(lean=False)
    assert not store.uploads.can_complete_many(BUCKET)
    wire.close()


def test_an_upload_completed_already_is_read_back_and_counts_as_done():
    _, wire, store = listening()
    (key, call), = uploads(store, 1)
    first = store.uploads.complete_multipart_upload(BUCKET, key, call.upload_id, call.etags,
                                                    checksum_algorithm=call.checksum_algorithm,
                                                    part_checksums=call.part_checksums)
    done, failures = run(store, [(key, call)])  # NoSuchUpload, then a HEAD: the object is this upload's
    assert failures == [] and done == {key: first}
    wire.close()


def test_a_conflict_is_a_failure_sent_once_and_stops_what_was_not_sent():
    _, wire, store = listening()
    calls = uploads(store, 3)
    taken, call = calls[0]
    store.objects.put_object(BUCKET, taken, b"someone else's")
    conflicted = [(taken, CompleteCall(**{**call.__dict__, "if_none_match": True}))]
    before = store.counters.snapshot()["requests"].get("CompleteMultipartUpload", 0)
    done, failures = run(store, conflicted + calls[1:], most=1)
    assert [(tag, type(err)) for tag, err in failures] == [(taken, PreconditionFailedError)]
    assert done == {}  # most=1: nothing else was in flight, and nothing more was sent
    counted = store.counters.snapshot()
    assert counted["requests"]["CompleteMultipartUpload"] - before == 1
    assert counted["failures"]["CompleteMultipartUpload"] == 1
    wire.close()


def test_throttles_and_server_errors_are_retried_under_the_stores_policy_and_lower_the_limit():
    answered = []
    lock = threading.Lock()

    def flaky(request):  # each key's first attempt: every fifth throttled, every fifth but one a 500
        if request.operation == "complete_multipart_upload":
            with lock:
                answered.append(request)
                first = [r.key for r in answered].count(request.key) == 1
            index = int(request.key.split("part-")[1][:4])
            if first and index % 5 == 1:
                return s3_error("SlowDown", 503, "Please reduce your request rate.")
            if first and index % 5 == 2:
                return s3_error("InternalError", 500)  # ambiguous: the retry may meet its own completion
        return None

    s3, wire, store = listening(fail=flaky)
    calls = uploads(store, 30)
    limit = store.requests.limit(BUCKET, calls[0][0])
    done, failures = run(store, calls)
    assert failures == [] and len(done) == 30 and s3.uploads(BUCKET) == []
    counted = store.counters.snapshot()
    assert counted["throttles"]["CompleteMultipartUpload"] >= 6
    assert counted["retries"]["CompleteMultipartUpload"] == 12
    assert counted["requests"]["CompleteMultipartUpload"] == len(answered) == 42
    assert limit.state().decreases >= 1 and limit.state().in_flight == 0
    wire.close()


def test_a_complete_that_keeps_failing_is_sent_the_policys_attempts_in_all_with_its_back_offs():
    """The first attempt from the loop and the store's retries share one budget (``fs.s3a.attempts.maximum``), and
    the first retry waits the back-off the first attempt earned, as a throttled request's retry must."""
    def down(request):
        return s3_error("SlowDown", 503, "Please reduce your request rate.") \
            if request.operation == "complete_multipart_upload" else None

    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    wire = S3Wire(s3, fail=down)
    wire.listen()
    slept: list[float] = []
    store = wire.store(lean_requests=True, retry=RetryPolicy(max_attempts=4, initial_delay=0.5, max_delay=10),
                       sleep=slept.append)
    calls = uploads(store, 1)
    done, failures = run(store, calls)
    assert done == {} and [type(err).__name__ for _, err in failures] == [ThrottledError.__name__]
    assert failures[0][1].attempts == 4
    assert store.counters.snapshot()["requests"]["CompleteMultipartUpload"] == 4
    assert len(slept) == 3 and all(0 <= delay <= 0.5 * 2 ** n for n, delay in enumerate(slept))
    wire.close()


def test_a_store_refusing_the_lean_signature_gets_every_complete_from_botocore(caplog):
    _, wire, store = listening(wire_class=RefusesLean)
    calls = uploads(store, 40)
    with caplog.at_level(logging.WARNING, logger="s3commit.store.lean_complete"):
        done, failures = run(store, calls)
    assert failures == [] and set(done) == {key for key, _ in calls}
    for key, _ in calls:
        assert store.objects.head_object(BUCKET, key).etag == done[key]
    assert 1 <= wire.refusals <= 40  # those sent before the first refusal came back, and none after
    assert store.uploads.lean.was_refused(BUCKET) and not store.uploads.can_complete_many(BUCKET)
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == len(caplog.records) == 1
    assert "SignatureDoesNotMatch" in caplog.records[0].getMessage()
    refusals = wire.refusals
    done, failures = run(store, uploads(store, 3, prefix="out/day=2/part"))
    assert failures == [] and len(done) == 3 and wire.refusals == refusals
    wire.close()


def test_a_definite_refusal_is_not_sent_again():
    def refused(request):
        return s3_error("InvalidPart", 400, "bad part") if request.operation == "complete_multipart_upload" else None

    _, wire, store = listening(fail=refused)
    calls = uploads(store, 2)
    done, failures = run(store, calls, stop_on_failure=False)
    assert done == {} and sorted(type(err).__name__ for _, err in failures) == [InvalidRequestError.__name__] * 2
    assert store.counters.snapshot()["requests"]["CompleteMultipartUpload"] == 2
    wire.close()


def test_a_throttling_store_is_met_at_its_rate_with_none_failed():
    _, wire, _ = listening()
    store = wire.store(lean_requests=True, retry=RetryPolicy())  # a user's policy: its back-off, 7 attempts
    calls = uploads(store, 300)  # (made before S3's latencies and rate apply: 600 requests one at a time)
    # The first wave (256 at once) meets a bucket of a second's worth, 100: it is throttled however slowly this
    # machine sends it (unless sending 256 took it 1.5 s).
    wire.profile, wire.throttle = get_profile("s3-standard"), Throttle(ThrottleSpec(writes_per_second=100))
    done, failures = run(store, calls)
    assert failures == [] and len(done) == 300
    assert sum(wire.throttled.values()) >= 1  # the limit found the rate
    assert store.requests.limit(BUCKET, calls[0][0]).state().low < store.options.concurrency_max
    wire.close()


def test_the_calls_own_failure_is_raised_once_those_in_flight_end():
    s3, wire, store = listening()
    calls = uploads(store, 5)

    def lease_lost():
        yield from calls[:3]
        raise LeaseLostError("lost")

    with pytest.raises(LeaseLostError):
        run(store, lease_lost())
    left = {key for key, _ in s3.uploads(BUCKET)}
    assert {calls[3][0], calls[4][0]} <= left  # none after the failure (of those read before it, some may be sent)
    wire.close()


def job_uploads(store, job_id, n):
    """``n`` uploads of a magic job's files under ``table/``, one small part each, as pendingset entries."""
    commits = []
    for i in range(n):
        key = f"table/day={i % 3}/part-{i:04d}-{job_id}.parquet"
        upload_id = store.uploads.create_multipart_upload(BUCKET, key)
        part = store.uploads.upload_part(BUCKET, key, upload_id, 1, b"x" * (i + 1))
        commits.append(PendingUpload(bucket=BUCKET, destination_key=key, upload_id=upload_id, etags=(part.etag,),
                                     length=i + 1, uri=f"s3a://{BUCKET}/{key}"))
    return commits


def _job(store, job_id, n, *, create_only=False):
    """A magic job of ``n`` files in one pendingset, and its engine: ``(engine, pendingset key, uploads)``."""
    dest = S3Uri(BUCKET, "table")
    layout = JobLayout(dest.key, job_id)
    commits = job_uploads(store, job_id, n)
    key = layout.pendingset_key("task_0001")
    store.objects.put_object(BUCKET, key, PendingSet(commits=tuple(commits)).with_job(job_id, "attempt_1").to_json())
    engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic",
                          options=CommitterOptions(journal=True), create_only=create_only)
    return engine, key, commits


def test_the_job_commit_sends_its_completes_from_one_loop_where_it_may():
    s3, wire, store = listening()
    engine, key, commits = _job(store, "0f0e0d0c-0000-4000-8000-000000000001", 25)
    sent = []
    real = store.uploads.complete_many
    store.uploads.complete_many = lambda *a, **k: sent.append(1) or real(*a, **k)  # type: ignore[method-assign]
    success = engine.run([key], OverwritePlan())
    assert sent == [1] and engine.stats.completed == 25
    assert sorted(success.filenames) == sorted(f"/{c.destination_key}" for c in commits)
    assert s3.uploads(BUCKET) == [] and store.counters.snapshot()["requests"]["CompleteMultipartUpload"] == 25
    wire.close()


def test_a_conflict_in_the_job_commit_rolls_it_back():
    s3, wire, store = listening()
    engine, key, commits = _job(store, "0f0e0d0c-0000-4000-8000-000000000002", 10, create_only=True)
    store.objects.put_object(BUCKET, commits[4].destination_key, b"appeared")
    with pytest.raises(JobCommitError, match="appeared after the job's conflict check") as raised:
        engine.run([key], OverwritePlan())
    assert isinstance(raised.value.__cause__, CommitConflictError)
    visible = s3.objects(BUCKET, "table/")
    assert [k for k in visible if "/part-" in k] == [commits[4].destination_key]  # only what was there
    assert store.objects.read_object(BUCKET, commits[4].destination_key)[0] == b"appeared"
    assert complete_call(commits[0]).key == commits[0].destination_key
    wire.close()


@pytest.mark.parametrize("bodies", ["kept", "read again"])
def test_a_job_past_the_cache_budget_parses_its_pendingsets_again_ahead_of_the_completes(monkeypatch, bodies):
    """Past CACHE_BUDGET uploads the pendingsets not held parsed are parsed again as the Completes go, from the bodies
    validated (kept compressed up to BODIES_BUDGET: no GET) or, past that too, read again: PENDINGSETS_AHEAD at once,
    on threads of their own (one at a time, a GET's latency each paced a commit of 100,000 files)."""
    from s3commit.commit import engine as engine_module

    monkeypatch.setattr(engine_module, "CACHE_BUDGET", 6)  # the first two pendingsets (3 files each) held
    if bodies == "read again":
        monkeypatch.setattr(engine_module, "BODIES_BUDGET", 0)
    s3, wire, store = listening()
    job_id = "0f0e0d0c-0000-4000-8000-000000000003"
    engine, first, commits = _job(store, job_id, 3)
    keys = [first]
    for task in range(2, 13):
        more = [replace(c, destination_key=c.destination_key.replace(".parquet", f"-{task}.parquet"),
                        upload_id=store.uploads.create_multipart_upload(BUCKET, c.destination_key.replace(
                            ".parquet", f"-{task}.parquet"))) for c in commits]
        more = [replace(c, etags=(store.uploads.upload_part(BUCKET, c.destination_key, c.upload_id, 1,
                                                            b"x" * c.length).etag,)) for c in more]
        key = engine.layout.pendingset_key(f"task_{task:04d}")
        store.objects.put_object(BUCKET, key, PendingSet(commits=tuple(more)).with_job(job_id, "a").to_json())
        keys.append(key)
    together = threading.Barrier(2, timeout=30)  # the first two reads again must be under way at once
    again: list[str] = []
    load = engine._load

    def counted(key):
        if engine._cache.get(key) is None:
            again.append(threading.current_thread().name)
            if len(again) <= 2:
                together.wait()
        return load(key)

    monkeypatch.setattr(engine, "_load", counted)
    gets = store.counters.snapshot()["requests"].get("GetObject", 0)
    engine.run(keys, OverwritePlan())
    read = store.counters.snapshot()["requests"].get("GetObject", 0) - gets
    assert read == {"kept": 12, "read again": 22}[bodies]  # each once to validate; again past both budgets
    assert engine.stats.completed == 36 and s3.uploads(BUCKET) == []
    assert len([k for k in s3.objects(BUCKET, "table/") if "/part-" in k]) == 36
    assert len(again) == 10 and all(name.startswith("s3commit-reread") for name in again)
    wire.close()


def test_a_subclass_that_sees_each_complete_is_called_for_each(monkeypatch):
    _, wire, store = listening()
    seen = []

    class Audited(type(store.uploads)):
        def complete_multipart_upload(self, bucket, key, upload_id, etags, **kwargs):
            seen.append(key)
            return super().complete_multipart_upload(bucket, key, upload_id, etags, **kwargs)

    plain = store.uploads.can_complete_many(BUCKET)
    monkeypatch.setattr(store.uploads, "__class__", Audited)
    assert plain and not store.uploads.can_complete_many(BUCKET)

    class AuditedBoth(Audited):
        def complete_many(self, calls, **kwargs):
            return super().complete_many(calls, **kwargs)

    monkeypatch.setattr(store.uploads, "__class__", AuditedBoth)
    assert store.uploads.can_complete_many(BUCKET)
    wire.close()
