"""The memory store over botocore's wire (``s3commit.testing.memory_wire``): the semantics the suite checks of S3,
through a real ``S3Store`` and a real botocore client; S3's latency, per-partition limits and partition splits on
injected time."""

from __future__ import annotations

import hashlib

import pytest

from s3commit.config.options import RetryPolicy
from s3commit.errors import NotFoundError, PreconditionFailedError, ThrottledError
from s3commit.model.object_info import multipart_etag
from s3commit.testing import MemoryS3, S3Wire, ThrottleSpec, get_profile, wire_of
from s3commit.testing._sim.classify import S3Operation

BUCKET = "wire"
PART = b"p" * 1024


class Clock:
    """The throttle's clock, moved by the test (and by the store's backoff, where a test says so)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def s3() -> MemoryS3:
    memory = MemoryS3()
    memory.create_bucket(BUCKET)
    return memory


@pytest.fixture
def store(s3):
    return S3Wire(s3).store()


def test_every_request_goes_through_botocore_and_the_model(s3, store) -> None:
    wire = wire_of(store)
    etag = store.objects.put_object(BUCKET, "a/b", b"hello")
    assert etag == f'"{hashlib.md5(b"hello").hexdigest()}"'
    assert store.objects.get_object(BUCKET, "a/b") == b"hello"
    assert store.objects.head_object(BUCKET, "a/b").size == 5
    assert [r.operation for r in wire.process.requests] == ["put_object", "get_object", "head_object"]
    assert store.counters.requests["PutObject"] == 1
    # the store's clock is the model's, through botocore's parsing of the Date header
    assert abs(store.head_bucket(BUCKET).timestamp() - s3.now()) < 1.0
    with pytest.raises(NotFoundError):
        store.objects.get_object(BUCKET, "missing")
    with pytest.raises(NotFoundError):
        store.objects.head_object(BUCKET, "missing")


def test_conditional_writes_answer_412(s3, store) -> None:
    etag = store.objects.put_object(BUCKET, "lease", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.objects.put_object(BUCKET, "lease", b"two", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.conditional.put_if_match(BUCKET, "lease", b"two", '"not-it"')
    renewed = store.conditional.put_if_match(BUCKET, "lease", b"two", etag)
    with pytest.raises(PreconditionFailedError):
        store.conditional.delete_if_match(BUCKET, "lease", etag)
    store.conditional.delete_if_match(BUCKET, "lease", renewed)
    assert s3.objects(BUCKET) == {}


def test_multipart_complete_gives_s3s_etag_and_a_repeated_complete_is_verified(s3, store) -> None:
    upload = store.uploads.create_multipart_upload(BUCKET, "out/file")
    etags = [store.uploads.upload_part(BUCKET, "out/file", upload, n, PART + bytes([n])).etag for n in (1, 2)]
    etag = store.uploads.complete_multipart_upload(BUCKET, "out/file", upload, etags, if_none_match=True)
    assert etag == multipart_etag(etags)
    assert s3.objects(BUCKET)["out/file"] == PART + b"\x01" + PART + b"\x02"
    s3._completed.clear()  # S3 forgets a completed upload: a second Complete meets NoSuchUpload ...
    again = store.uploads.complete_multipart_upload(BUCKET, "out/file", upload, etags)
    assert again == etag  # ... and the store's HEAD finds the object is this upload's
    assert [r.operation for r in wire_of(store).process.requests[-2:]] == ["complete_multipart_upload", "head_object"]


def test_complete_with_a_wrong_part_is_refused(store) -> None:
    from s3commit.errors import StoreError

    upload = store.uploads.create_multipart_upload(BUCKET, "k")
    store.uploads.upload_part(BUCKET, "k", upload, 1, PART)
    with pytest.raises(StoreError) as caught:
        store.uploads.complete_multipart_upload(BUCKET, "k", upload, ['"0000"'])
    assert caught.value.code == "InvalidPart"


def test_paged_listings(s3, store) -> None:
    for key in ("d/1", "d/2", "d/sub/3", "d/sub/4", "d/x y+z", "e/5"):
        store.objects.put_object(BUCKET, key, b"x")
    client = wire_of(store).client()
    pages = list(client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="d/",
                                                                    PaginationConfig={"PageSize": 2}))
    assert len(pages) == 3
    assert [o["Key"] for page in pages for o in page.get("Contents", [])] == ["d/1", "d/2", "d/sub/3", "d/sub/4",
                                                                              "d/x y+z"]
    listed = list(store.objects.list_objects(BUCKET, "d/", delimiter="/"))
    assert sorted(o.key for o in listed) == ["d/1", "d/2", "d/sub/", "d/x y+z"]
    uploads = {store.uploads.create_multipart_upload(BUCKET, f"u/{n % 3}") for n in range(7)}
    store.uploads.page_size = 2
    found = list(store.uploads.list_multipart_uploads(BUCKET, "u/"))
    assert {u.upload_id for u in found} == uploads and len(found) == 7
    assert [u.key for u in found] == sorted(u.key for u in found)
    assert sum(r.operation == "list_multipart_uploads" for r in wire_of(store).process.requests) == 4


def test_delete_objects_with_and_without_etags(s3, store) -> None:
    etags = {key: store.objects.put_object(BUCKET, key, key.encode()) for key in ("a", "b", "c", "d")}
    assert store.objects.delete_objects(BUCKET, ["a", "missing"]) == 2
    deleted, kept = store.conditional.delete_objects_if_match(BUCKET, [("b", etags["b"]), ("c", '"changed"')])
    assert (deleted, kept) == (1, ["c"])
    assert sorted(s3.objects(BUCKET)) == ["c", "d"]


def test_ranged_gets_botocores_and_the_streamed_ones(store) -> None:
    data = bytes(range(256)) * 4
    store.objects.put_object(BUCKET, "r", data)
    assert store.objects.get_object(BUCKET, "r", start=10, end=20) == data[10:20]
    assert b"".join(store.objects.stream_object(BUCKET, "r", start=100, end=700, chunk_size=128)) == data[100:700]
    assert store.objects.copy_object(BUCKET, "r", "r2") == store.objects.head_object(BUCKET, "r").etag


def test_slowdown_above_the_rate_and_the_stores_retries(s3) -> None:
    clock = Clock()
    wire = S3Wire(s3, throttle=ThrottleSpec(writes_per_second=5, burst_seconds=1), clock=clock)
    store = wire.store(retry=RetryPolicy(max_attempts=3, initial_delay=0, max_delay=0), sleep=lambda _s: None)
    for n in range(5):  # the burst the partition holds
        store.objects.put_object(BUCKET, f"hot/{n}", b"x")
    with pytest.raises(ThrottledError):  # no time passes: every attempt is refused
        store.objects.put_object(BUCKET, "hot/5", b"x")
    assert wire.throttled["PutObject"] == 3
    store.objects.put_object(BUCKET, "cold/0", b"x")  # another partition has its own rate
    assert store.objects.get_object(BUCKET, "hot/0") == b"x"  # and reads theirs
    # with the backoff moving the clock, the store's retries get through
    backing_off = wire.store(retry=RetryPolicy(max_attempts=5, initial_delay=1, max_delay=1), sleep=clock.advance)
    backing_off.objects.put_object(BUCKET, "hot/5", b"x")
    assert backing_off.counters.retries["PutObject"] >= 1
    assert "hot/5" in s3.objects(BUCKET)


def test_latency_is_waited_per_operation(s3) -> None:
    waits: list[float] = []
    store = S3Wire(s3, profile="s3-standard", sleep=waits.append).store()
    profile = get_profile("s3-standard")
    upload = store.uploads.create_multipart_upload(BUCKET, "k")
    etag = store.uploads.upload_part(BUCKET, "k", upload, 1, PART).etag
    store.uploads.complete_multipart_upload(BUCKET, "k", upload, [etag])
    first_bytes = [w for w in waits if w >= 0.001]  # (the rest: answers' bodies, moved at 80 MB/s)
    assert first_bytes == [profile.first_byte(S3Operation.CREATE_MULTIPART_UPLOAD),
                           pytest.approx(profile.first_byte(S3Operation.UPLOAD_PART)
                                         + profile.transfer_seconds(len(PART))),
                           pytest.approx(0.050, abs=1e-5)]  # a Complete: 50 ms, its request body's transfer
    assert sum(waits) == pytest.approx(0.110, abs=0.001)
