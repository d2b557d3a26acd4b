"""Many whole-object GETs from one event loop (``ObjectRequests.get_many``, :mod:`s3commit.store.many_gets`) over a
wire store on a loopback socket: the bytes in the keys' order, one request each, a failed first attempt carried on by
the store's retry loop within one budget, a missing object's error as ``get_object``'s, a caller that stops early
leaving nothing running, and a job commit that reads its pendingsets this way on the connections its Completes then
use (without its loop, a few through botocore)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from s3commit.commit.engine import CommitEngine
from s3commit.commit.manifest_store import MANY_GETS_FROM, read_pendingsets
from s3commit.commit.overwrite import OverwritePlan
from s3commit.config.options import CommitterOptions
from s3commit.errors import NotFoundError
from s3commit.model.manifests import PendingSet
from s3commit.model.paths import JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store import many_gets
from s3commit.store.lean_http import Connections, Origin
from s3commit.store.uploads import _Many
from s3commit.testing.memory import s3_error
from tests.unit.test_complete_many import BUCKET, RefusesLean, job_uploads, listening


def put(store, n, prefix="p/obj"):
    keys = [f"{prefix}-{i:03d} x+.json" for i in range(n)]
    for key in keys:
        store.objects.put_object(BUCKET, key, key.encode() * 50)
    return keys


def gets_running():
    return [t for t in threading.enumerate() if t.name == "s3commit-gets"]


def test_the_bytes_come_in_the_keys_order_one_request_each():
    _, wire, store = listening()
    keys = put(store, 40)
    assert store.objects.can_get_many(BUCKET)
    before = store.counters.snapshot()["requests"].get("GetObject", 0)
    got = [(key, future.result()) for key, future in store.objects.get_many(BUCKET, keys, ahead=7)]
    assert got == [(key, key.encode() * 50) for key in keys]
    assert store.counters.snapshot()["requests"]["GetObject"] - before == 40
    assert gets_running() == []
    assert store.requests.limit(BUCKET, keys[0]).state().in_flight == 0
    wire.close()


def test_a_failed_first_attempt_is_retried_by_the_stores_loop_within_one_budget():
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def flaky(request):
        if request.operation != "get_object":
            return None
        with lock:
            seen[request.key] = seen.get(request.key, 0) + 1
            first = seen[request.key] == 1
        index = int(request.key.split("-")[1][:3])
        if first and index % 3 == 0:
            return s3_error("SlowDown", 503, "Please reduce your request rate.")
        if first and index % 3 == 1:
            return s3_error("InternalError", 500)
        return None

    _, wire, store = listening(fail=flaky)
    keys = put(store, 30)
    got = [future.result() for _, future in store.objects.get_many(BUCKET, keys, ahead=8)]
    assert got == [key.encode() * 50 for key in keys]
    counted = store.counters.snapshot()
    assert counted["retries"]["GetObject"] == 20 and counted["throttles"]["GetObject"] == 10
    assert counted["requests"]["GetObject"] == sum(seen.values()) == 50
    wire.close()


def test_a_get_that_keeps_failing_is_sent_the_policys_attempts_in_all():
    def down(request):
        return s3_error("InternalError", 500) if request.operation == "get_object" else None

    _, wire, store = listening(fail=down)
    keys = ["p/never"]
    [(_, future)] = list(store.objects.get_many(BUCKET, keys, ahead=4))
    with pytest.raises(Exception) as caught:
        future.result()
    assert getattr(caught.value, "attempts", None) == store.options.retry.max_attempts
    counted = store.counters.snapshot()
    assert counted["requests"]["GetObject"] == store.options.retry.max_attempts
    assert counted["failures"]["GetObject"] == 1
    wire.close()


def test_a_missing_object_is_get_objects_not_found_and_not_retried():
    _, wire, store = listening()
    keys = put(store, 3)
    futures = dict(store.objects.get_many(BUCKET, [keys[0], "p/missing", keys[2]], ahead=2))
    with pytest.raises(NotFoundError):
        futures["p/missing"].result()
    assert futures[keys[2]].result() == keys[2].encode() * 50
    assert store.counters.snapshot()["retries"].get("GetObject", 0) == 0
    wire.close()


def test_a_caller_that_stops_early_leaves_nothing_running():
    _, wire, store = listening()
    keys = put(store, 30)
    reading = store.objects.get_many(BUCKET, keys, ahead=10)
    key, future = next(reading)
    assert future.result() == key.encode() * 50
    reading.close()
    assert gets_running() == []
    assert store.requests.limit(BUCKET, keys[0]).state().in_flight == 0
    wire.close()


def test_a_store_that_refuses_the_lean_gets_is_read_by_botocore():
    _, wire, store = listening(wire_class=RefusesLean)
    keys = put(store, 12)
    got = [future.result() for _, future in store.objects.get_many(BUCKET, keys, ahead=4)]
    assert got == [key.encode() * 50 for key in keys]
    assert wire.refusals >= 1 and not store.objects.can_get_many(BUCKET)
    wire.close()


def test_without_lean_requests_get_many_is_not_offered():
    _, wire, store = listening(lean=False)
    assert not store.objects.can_get_many(BUCKET)
    wire.close()


@pytest.mark.parametrize(("tasks", "files_each"), [(3, 1), (40, 1), (3, 12)])
def test_a_job_commit_reads_its_pendingsets_from_its_loop_whose_connections_its_completes_use(tasks, files_each,
                                                                                            monkeypatch):
    s3, wire, store = listening()
    from_loop: list[str] = []
    submit = many_gets._Gets.submit
    connects: list[Origin] = []
    connect = Connections._connect
    run_many = _Many.run
    at_first_complete: list[int] = []

    def counted(self, key):
        from_loop.append(key)
        return submit(self, key)

    async def counted_connect(self, origin):
        connects.append(origin)
        return await connect(self, origin)

    async def first_complete(self, settle, on):
        at_first_complete.extend(on.connections.alive(origin) for origin in set(connects))
        return await run_many(self, settle, on)

    monkeypatch.setattr(many_gets._Gets, "submit", counted)
    monkeypatch.setattr(Connections, "_connect", counted_connect)
    monkeypatch.setattr(_Many, "run", first_complete)
    job_id = "0f0e0d0c-0000-4000-8000-0000000000aa"
    dest = S3Uri(BUCKET, "table")
    layout = JobLayout(dest.key, job_id)
    keys = []
    commits = job_uploads(store, job_id, tasks * files_each)
    for task in range(tasks):
        keys.append(layout.pendingset_key(f"task_{task:04d}"))
        mine = tuple(commits[task * files_each:(task + 1) * files_each])
        store.objects.put_object(BUCKET, keys[-1], PendingSet(commits=mine).with_job(job_id, "a").to_json())
    engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic",
                          options=CommitterOptions(journal=True))
    engine.run(keys, OverwritePlan())
    assert engine.stats.completed == tasks * files_each and s3.uploads(BUCKET) == []
    assert len(from_loop) == tasks
    assert store.counters.snapshot()["requests"]["GetObject"] == tasks  # each pendingset read once
    # The GETs' connections, and those opened ahead while the pendingsets loaded: as many as the Completes keep in
    # flight (a file each here) are open or opening when the first is sent.
    assert at_first_complete == [tasks * files_each]
    assert gets_running() == [] and not [t for t in threading.enumerate() if t.name == "s3commit-lean"]
    wire.close()


def test_without_a_job_commits_loop_a_few_pendingsets_are_read_by_botocore(monkeypatch):
    _, wire, store = listening()
    from_loop: list[str] = []
    submit = many_gets._Gets.submit
    monkeypatch.setattr(many_gets._Gets, "submit", lambda self, key: from_loop.append(key) or submit(self, key))
    keys = []
    for task in range(3):
        keys.append(f"table/ps-{task}.pendingset")
        store.objects.put_object(BUCKET, keys[-1], PendingSet(commits=()).with_job("j", "a").to_json())
    with ThreadPoolExecutor(4) as pool:
        read = [future.result() for _, future in read_pendingsets(store, BUCKET, keys, pool=pool, ahead=4,
                                                                   then=lambda ps, body: ps.job_id)]
    assert read == ["j"] * 3 and from_loop == [] and MANY_GETS_FROM > 3
    wire.close()
