"""An overwrite's deletes (``delete_listed``): a prefix listed in ranges split at the keys kept, at once, each
range's batches deleted as it goes; exactly the old objects go, on a store that honours ``start-after`` and on one
that ignores it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from s3commit.commit.prefixes import RANGES, _ranges, delete_listed
from s3commit.errors import StoreError
from s3commit.testing import MemoryS3, S3Wire

BUCKET = "ow"


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


@pytest.mark.parametrize("honours_start_after", [True, False])
def test_the_old_objects_go_and_nothing_else_listed_in_ranges(honours_start_after, monkeypatch):
    s3, store, kept = table(2_500, 3_000)
    if not honours_start_after:
        listed = s3.list_objects_v2
        monkeypatch.setattr(s3, "list_objects_v2", lambda p: listed({k: v for k, v in p.items() if k != "StartAfter"}))
    with ThreadPoolExecutor(32) as pool:
        deleted, changed = delete_listed(store, BUCKET, "t/", keep=set(kept), skip=skip, pool=pool,
                                         kept_in_order=sorted(kept))
    assert (deleted, changed) == (2_500, [])
    left = [c["Key"] for c in remaining(s3)]
    assert left == sorted([*kept, "t/_SUCCESS", "t/__magic_job-1/x.pendingset"])
    lists = store.counters.snapshot()["requests"]["ListObjectsV2"]
    if honours_start_after:  # each range lists its own stretch: a page or so each, not the whole prefix
        assert RANGES <= lists <= RANGES + (2_500 + 3_000) // 1_000 + RANGES
    deletes = store.counters.snapshot()["requests"]["DeleteObjects"]
    assert 3 <= deletes <= 3 + RANGES  # a range's last batch may be short


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
    with ThreadPoolExecutor(32) as pool, pytest.raises(StoreError):
        delete_listed(store, BUCKET, "t/", keep=set(kept), skip=skip, pool=pool, kept_in_order=sorted(kept))
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
