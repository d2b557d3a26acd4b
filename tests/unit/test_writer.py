"""MultipartWriter against an in-memory fake store: parts, memory bound, completion policy, aborts."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from s3commit.checksums import SentPart
from s3commit.config import MIB, StoreOptions
from s3commit.errors import ConfigError, TransientError
from s3commit.writer import CompletionPolicy, MultipartWriter, TooManyPartsError

PART = 5 * MIB


class FakeStore:
    """Records uploads; optionally blocks or fails part uploads."""

    def __init__(self, *, fail_part=None, gate=None):
        self.options = StoreOptions(checksum_algorithm=None)
        self.uploads = {}
        self.completed = {}
        self.aborted = []
        self.puts = {}
        self.fail_part = fail_part
        self.gate = gate
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def create_multipart_upload(self, bucket, key, *, content_type=None, on_possible_orphan=None):
        upload_id = f"u{len(self.uploads) + 1}"
        self.uploads[upload_id] = {}
        return upload_id

    def upload_part(self, bucket, key, upload_id, part_number, body):
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                self.gate.wait(5)
            if self.fail_part == part_number:
                raise TransientError("boom", operation="UploadPart", bucket=bucket, key=key, upload_id=upload_id)
            self.uploads[upload_id][part_number] = bytes(body)
            return SentPart(f'"etag-{part_number}"', None)
        finally:
            with self._lock:
                self.in_flight -= 1

    def complete_multipart_upload(self, bucket, key, upload_id, etags, *, expected_length=None, created_ms=0,
                                  checksum_algorithm=None, part_checksums=(), if_none_match=False):
        parts = self.uploads.pop(upload_id)
        assert [f'"etag-{n}"' for n in sorted(parts)] == list(etags)
        self.completed[key] = b"".join(parts[n] for n in sorted(parts))
        return '"final"'

    def abort_multipart_upload(self, bucket, key, upload_id):
        self.uploads.pop(upload_id, None)
        self.aborted.append(upload_id)

    def put_object(self, bucket, key, body, *, if_none_match=False, content_type=None):
        self.puts[key] = bytes(body)
        return '"put"'


class Deferring(CompletionPolicy):
    def __init__(self):
        self.started = []
        self.ready = []

    def upload_started(self, *, bucket, key, upload_id):
        self.started.append(upload_id)

    def upload_ready(self, pending):
        self.ready.append(pending)
        return False


def test_small_plain_write_is_a_single_put():
    store = FakeStore()
    with MultipartWriter(store, "b", "k", part_size=PART) as f:
        f.write(b"hello")
    assert store.puts == {"k": b"hello"} and store.uploads == {} and store.completed == {}


def test_large_write_is_split_into_parts_and_completed_in_order():
    store = FakeStore()
    data = bytes(range(256)) * (PART * 2 // 256 + 100)
    with MultipartWriter(store, "b", "k", part_size=PART, executor=ThreadPoolExecutor(4)) as f:
        for i in range(0, len(data), 1_000_003):
            f.write(data[i:i + 1_000_003])
        assert f.tell() == len(data)
    assert store.completed["k"] == data


def test_deferred_write_returns_pending_upload_and_completes_nothing():
    store, policy = FakeStore(), Deferring()
    writer = MultipartWriter(store, "b", "final/key", part_size=PART, policy=policy, uri="s3a://b/magic/key")
    writer.write(b"x" * 10)
    writer.close()
    assert store.completed == {} and store.puts == {}
    pending = policy.ready[0]
    assert (pending.destination_key, pending.length, pending.uri) == ("final/key", 10, "s3a://b/magic/key")
    assert pending.etags == ('"etag-1"',)
    assert writer.result.pending == pending and not writer.result.completed
    assert policy.started == [pending.upload_id]


def test_empty_deferred_file_is_one_empty_part():
    store, policy = FakeStore(), Deferring()
    MultipartWriter(store, "b", "k", part_size=PART, policy=policy).close()
    assert policy.ready[0].length == 0 and policy.ready[0].part_count == 1


def test_exception_inside_with_aborts_and_publishes_nothing():
    store = FakeStore()
    with pytest.raises(RuntimeError), MultipartWriter(store, "b", "k", part_size=PART) as f:
        f.write(b"x" * (PART + 1))
        raise RuntimeError("task failed")
    assert store.completed == {} and store.puts == {} and store.aborted == ["u1"] and store.uploads == {}


def test_failed_part_surfaces_on_close_and_aborts_the_upload():
    store = FakeStore(fail_part=2)
    writer = MultipartWriter(store, "b", "k", part_size=PART, executor=ThreadPoolExecutor(2))
    writer.write(b"x" * (PART * 2))
    with pytest.raises(TransientError):
        writer.write(b"y" * PART)
        writer.close()
    assert store.aborted == ["u1"] and store.completed == {}


def test_in_flight_parts_are_bounded():
    gate = threading.Event()
    store = FakeStore(gate=gate)
    writer = MultipartWriter(store, "b", "k", part_size=PART, max_in_flight=2, executor=ThreadPoolExecutor(8))
    done = threading.Event()

    def produce():
        writer.write(b"x" * (PART * 5))  # blocks once two parts are in flight
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    assert not done.wait(0.5)
    assert store.in_flight == 2
    gate.set()
    thread.join(5)
    writer.close()
    assert store.max_in_flight <= 2
    assert len(store.completed["k"]) == PART * 5


def test_file_needing_more_than_10000_parts_fails_before_publishing(monkeypatch):
    import s3commit.writer as writer_module

    monkeypatch.setattr(writer_module, "MAX_PARTS", 3)  # same rule, small numbers
    store = FakeStore()
    with pytest.raises(TooManyPartsError, match="needs more than 3 parts"), \
            MultipartWriter(store, "b", "k", part_size=PART) as f:
        f.write(b"x" * (PART * 4))
    assert store.completed == {} and store.aborted == ["u1"]


def test_part_size_below_minimum_is_rejected():
    with pytest.raises(ConfigError, match="minimum part size"):
        MultipartWriter(FakeStore(), "b", "k", part_size=MIB)


def test_unclosed_writer_is_aborted_when_collected_not_completed():
    store = FakeStore()
    writer = MultipartWriter(store, "b", "k", part_size=PART)
    writer.write(b"x" * (PART + 1))
    del writer
    import gc

    gc.collect()
    assert store.completed == {} and store.aborted == ["u1"]


def test_pyarrow_can_write_parquet_into_the_writer():
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    store = FakeStore()
    table = pa.table({"x": list(range(1000))})
    with MultipartWriter(store, "b", "t.parquet", part_size=PART) as f:
        pq.write_table(table, f)
    assert pq.read_table(pa.BufferReader(store.puts["t.parquet"])).equals(table)
