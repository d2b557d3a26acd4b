"""An overwrite's deletes (``OldObjects``): a prefix listed in ranges split at the keys kept, at once, ahead of the
deletes (up to a budget, the rest listed as it is deleted) or as they go; exactly the old objects go, on a store that
honours ``start-after`` and on one that ignores it, after the listing ahead failed, and with several prefixes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from s3commit.commit import overwrite
from s3commit.commit.overwrite import DELETES_AT_MOST, RANGES, DeleteGate, OldObjects, OverwritePlan, _ranges
from s3commit.commit.prefixes import DELETES_IN_FLIGHT, delete_listed
from s3commit.errors import StoreError
from s3commit.model.uri import S3Uri
from s3commit.testing import MemoryS3, S3Wire

BUCKET = "ow"
DEST = S3Uri(BUCKET, "t")
WHOLE = OverwritePlan(delete_paths=("",))


def table(old: int, new: int, *, lean: bool = True):
    """A table of ``old`` old files and ``new`` new ones interleaved in S3's order (as a job's part files fall
    between the old ones), odd names among them: the model, a store over its wire, and the new keys."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    wire = S3Wire(s3)
    store = wire.store(lean_requests=lean)
    kept = []
    for n in range(old):
        s3.put_object({"Bucket": BUCKET, "Key": f"t/p={n % 7}/part-{n:05d}-old ü+%.csv", "Body": b"o"})
    for n in range(new):
        key = f"t/p={n % 7}/part-{n:05d}-new ü+%.csv"
        s3.put_object({"Bucket": BUCKET, "Key": key, "Body": b"n"})
        kept.append(key)
    s3.put_object({"Bucket": BUCKET, "Key": "t/_SUCCESS", "Body": b""})
    s3.put_object({"Bucket": BUCKET, "Key": "t/__magic_job-1/x.pendingset", "Body": b""})
    return s3, store, kept


def remaining(s3):
    return sorted(s3.list_objects_v2({"Bucket": BUCKET, "Prefix": "t/", "MaxKeys": 100_000}).get("Contents", []),
                  key=lambda c: c["Key"])


def skip(key: str) -> bool:
    return key.endswith("_SUCCESS") or "/__magic_job-" in key


def old_objects(store, kept, plan=WHOLE, *, ahead: bool, conditional: str | None = None):
    old = OldObjects(store, DEST, plan, set(kept), skip=skip)
    if conditional is not None:  # (as the store's capabilities would say)
        old.conditional = conditional
    if ahead:
        old.list_ahead()
    return old


@pytest.mark.parametrize("conditional", ["", "batch", "single"], ids=["unconditional", "batch-if-match",
                                                                        "single-if-match"])
@pytest.mark.parametrize("ahead", [True, False], ids=["listed-ahead", "listed-as-deleted"])
@pytest.mark.parametrize("honours_start_after", [True, False])
def test_the_old_objects_go_and_nothing_else_listed_in_ranges(honours_start_after, ahead, conditional, monkeypatch):
    s3, store, kept = table(2_500, 3_000)
    if not honours_start_after:
        listed = s3.list_objects_v2
        monkeypatch.setattr(s3, "list_objects_v2", lambda p: listed({k: v for k, v in p.items() if k != "StartAfter"}))
    assert old_objects(store, kept, ahead=ahead, conditional=conditional).delete(threads=32) == (2_500, 0)
    left = [c["Key"] for c in remaining(s3)]
    assert left == sorted([*kept, "t/_SUCCESS", "t/__magic_job-1/x.pendingset"])
    lists = store.counters.snapshot()["requests"]["ListObjectsV2"]
    if honours_start_after:  # each range lists its own stretch: a page or so each, not the whole prefix
        assert RANGES <= lists <= RANGES + (2_500 + 3_000) // 1_000 + RANGES
    requests = store.counters.snapshot()["requests"]
    if conditional == "single":
        assert requests["DeleteObject"] == 2_500 and "DeleteObjects" not in requests
    else:
        assert 3 <= requests["DeleteObjects"] <= 3 + RANGES  # a range's last batch may be short


def test_without_kept_keys_or_a_pool_the_prefix_is_listed_once_in_order():
    for pool in (None, ThreadPoolExecutor(8)):
        s3, store, _ = table(2_345, 0)
        assert delete_listed(store, BUCKET, "t/", skip=skip, pool=pool) == (2_345, [])
        assert [c["Key"] for c in remaining(s3)] == ["t/_SUCCESS", "t/__magic_job-1/x.pendingset"]
        assert store.counters.snapshot()["requests"]["ListObjectsV2"] == 3
        assert store.counters.snapshot()["requests"]["DeleteObjects"] == 3
        if pool is not None:
            pool.shutdown()


def test_a_range_that_fails_fails_the_overwrite_and_loses_no_kept_file(monkeypatch):
    s3, store, kept = table(3_000, 2_000)
    deleting = s3.delete_objects

    def fail_one(p):
        if any("part-00100-" in o["Key"] for o in p["Delete"]["Objects"]):
            raise RuntimeError("the store fell over")
        return deleting(p)

    monkeypatch.setattr(s3, "delete_objects", fail_one)
    with pytest.raises(StoreError):
        old_objects(store, kept, ahead=True).delete(threads=32)
    assert set(kept) <= {c["Key"] for c in remaining(s3)}


def test_ranges_split_at_kept_keys_of_the_prefix_only():
    keys = sorted([f"a/{n:04d}" for n in range(100)] + ["b/1", "a0", "a/\U00010000", "a/\uffff"])
    ranges = _ranges("a/", keys, 4)
    assert ranges[0][0] is None and ranges[-1][1] is None and len(ranges) == 4
    splits = [after for after, _ in ranges[1:]]
    assert all(key.startswith("a/") for key in splits) and splits == sorted(splits)
    assert [before for _, before in ranges[:-1]] == splits
    assert _ranges("a/", ["b/1"], 4) == [(None, None)]
    assert _ranges("a/", ["a/1"], 4) == [(None, "a/1"), ("a/1", None)]
    assert len(_ranges("", keys, RANGES)) == RANGES
    # S3's order is the keys' UTF-8 bytes': a code point's order
    assert "a/\uffff".encode() < "a/\U00010000".encode() and "a/\uffff" < "a/\U00010000"


def test_what_is_listed_ahead_is_deleted_only_when_asked_and_past_the_budget_listed_then(monkeypatch):
    monkeypatch.setattr(overwrite, "AHEAD", 1_600)  # most of the old files are listed after
    monkeypatch.setattr(overwrite, "RANGES", 2)  # (ranges of three pages: held a page at a time)
    s3, store, kept = table(2_500, 3_000)
    old = old_objects(store, kept, ahead=True)
    old._started.result()
    for future in old._listing:
        future.result()
    counts = store.counters.snapshot()["requests"]
    assert counts.get("DeleteObjects", 0) == 0 and len(remaining(s3)) == 2_500 + 3_000 + 2  # nothing deleted yet
    assert 1_600 <= sum(len(listed.keys) for listed in old.ranges) < 1_600 + 2 * 1_000  # (a page a range past it)
    assert not all(listed.done for listed in old.ranges)
    assert old.delete(threads=8) == (2_500, 0)
    assert sorted(c["Key"] for c in remaining(s3)) == sorted([*kept, "t/_SUCCESS", "t/__magic_job-1/x.pendingset"])


def test_a_listing_ahead_that_fails_is_listed_again_and_a_stopped_one_deletes_nothing(monkeypatch):
    s3, store, kept = table(2_500, 3_000)
    listed = s3.list_objects_v2
    failing = [True]

    def list_or_fail(p):
        if failing[0]:
            raise RuntimeError("the store fell over")
        return listed(p)

    monkeypatch.setattr(s3, "list_objects_v2", list_or_fail)
    old = old_objects(store, kept, ahead=True)
    old._started.result()
    for future in old._listing:
        future.result()  # (a range's failure is its own: held nothing, listed again)
    assert not any(r.keys or r.done for r in old.ranges)
    failing[0] = False
    assert old.delete(threads=8) == (2_500, 0)
    s3, store, kept = table(300, 300)
    stopped = old_objects(store, kept, ahead=True)
    stopped.stop()
    assert len(remaining(s3)) == 602 and store.counters.snapshot()["requests"].get("DeleteObjects", 0) == 0


def test_several_prefixes_share_the_ranges_and_their_deletes_are_batched_together():
    s3, store, kept = table(2_100, 700)  # 7 partitions, 300 old files each
    plan = OverwritePlan(delete_paths=tuple(f"p={n}" for n in range(7)))
    old = old_objects(store, kept, plan, ahead=True)
    assert len(old.ranges) == 7 * (RANGES // 7)
    assert old.delete(threads=8) == (2_100, 0)
    assert store.counters.snapshot()["requests"]["DeleteObjects"] == 3  # 1,000 a batch across partitions
    assert sorted(c["Key"] for c in remaining(s3)) == sorted([*kept, "t/_SUCCESS", "t/__magic_job-1/x.pendingset"])


def test_the_delete_gate_grows_while_nothing_is_throttled_and_goes_to_one_at_the_first_throttle():
    _, store, _ = table(0, 0)
    gate = DeleteGate(store, BUCKET, "t/")
    assert gate.most == DELETES_IN_FLIGHT
    with gate:
        assert gate.most == DELETES_IN_FLIGHT  # (grown by an answer, not by a request sent)
    assert gate.most == DELETES_IN_FLIGHT + 1
    with pytest.raises(StoreError), gate:
        raise StoreError("failed")
    assert gate.most == DELETES_IN_FLIGHT + 1  # a failure grows nothing
    for _ in range(2 * DELETES_AT_MOST):
        with gate:
            pass
    assert gate.most == DELETES_AT_MOST
    store.counters.add("throttles", "CompleteMultipartUpload")  # a throttle answered to anything, after the gate
    with gate:
        assert gate.most == 1
    assert gate.most == 1
    later = DeleteGate(store, BUCKET, "t/")  # (what came before a gate is not its business)
    assert later.most == DELETES_IN_FLIGHT
    with later:
        store.counters.add("throttles", "DeleteObjects")  # answered while one is in flight: no growth from it
    assert later.most == 1
