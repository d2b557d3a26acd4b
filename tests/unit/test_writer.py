"""MultipartWriter against an in-memory fake store: parts, memory bound, completion policy, aborts."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from s3commit.config.options import MIB, StoreOptions
from s3commit.errors import ConfigError, TransientError
from s3commit.model.checksums import SentPart
from s3commit.transfer.parts import PIECE_MIN, BufferPart, BufferPool, FilePart, split_part, staged_part_size
from s3commit.transfer.writer import CompletionPolicy, MultipartWriter, TooManyPartsError

PART = 5 * MIB


class FakeStore:
    """Records uploads; optionally blocks or fails part uploads. The store's uploads and objects (a small file's
    PUT) are both this one recorder."""

    def __init__(self, *, fail_part=None, gate=None, open_at=None):
        self.options = StoreOptions(checksum_algorithm=None)
        self.open_uploads = {}
        self.completed = {}
        self.aborted = []
        self.puts = {}
        self.fail_part = fail_part
        self.gate = gate
        self.open_at = open_at  # the gate opens once this many part uploads are in flight at once
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self.uploads = self.objects = self

    def checksum_algorithm(self, bucket):
        return None

    def create_multipart_upload(self, bucket, key, *, content_type=None, on_possible_orphan=None,
                                checksum_algorithm=None):
        upload_id = f"u{len(self.open_uploads) + 1}"
        self.open_uploads[upload_id] = {}
        return upload_id

    def upload_part(self, bucket, key, upload_id, part_number, body, *, checksum_algorithm=None):
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.open_at is not None and self.in_flight >= self.open_at:
                self.gate.set()
        try:
            if self.gate is not None:
                self.gate.wait(5)
            if self.fail_part == part_number:
                raise TransientError("boom", operation="UploadPart", bucket=bucket, key=key, upload_id=upload_id)
            self.open_uploads[upload_id][part_number] = bytes(body)
            return SentPart(f'"etag-{part_number}"', None)
        finally:
            with self._lock:
                self.in_flight -= 1

    def complete_multipart_upload(self, bucket, key, upload_id, etags, *, expected_length=None, created_ms=0,
                                  checksum_algorithm=None, part_checksums=(), if_none_match=False):
        parts = self.open_uploads.pop(upload_id)
        assert [f'"etag-{n}"' for n in sorted(parts)] == list(etags)
        self.completed[key] = b"".join(parts[n] for n in sorted(parts))
        return '"final"'

    def abort_multipart_upload(self, bucket, key, upload_id):
        self.open_uploads.pop(upload_id, None)
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
    assert store.puts == {"k": b"hello"} and store.open_uploads == {} and store.completed == {}


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
    assert store.completed == {} and store.puts == {} and store.aborted == ["u1"] and store.open_uploads == {}


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
    import s3commit.transfer.writer as writer_module

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


def test_a_large_last_part_goes_up_in_pieces_side_by_side_and_the_file_is_exact():
    store, policy = FakeStore(), Deferring()
    part = 4 * PIECE_MIN
    data = (bytes(range(251)) * (part // 100))[:part + 3 * PIECE_MIN + 7]  # a whole part, then a last of 24 MiB
    writer = MultipartWriter(store, "b", "k", part_size=part, max_in_flight=4, policy=policy,
                             executor=ThreadPoolExecutor(8))
    writer.write(data)
    writer.close()
    pending = policy.ready[0]
    sizes = [len(store.open_uploads[pending.upload_id][n]) for n in sorted(store.open_uploads[pending.upload_id])]
    # the whole part in its 4 pieces of 8 MiB, the last one in 3
    assert sizes[:4] == [PIECE_MIN] * 4 and len(sizes) == 4 + 3 and all(s >= PIECE_MIN for s in sizes[4:-1])
    assert b"".join(store.open_uploads[pending.upload_id][n] for n in range(1, 8)) == data
    assert pending.length == len(data) and pending.part_count == 7


def test_full_parts_go_as_pieces_within_the_same_bytes_in_flight_then_whole_past_the_split_limit(monkeypatch):
    import s3commit.transfer.writer as writer_module

    monkeypatch.setattr(writer_module, "SPLIT_PARTS", 4)
    gate = threading.Event()
    # The first uploads hold until 4 pieces are in flight (the writer must wait for slots), whatever the machine's load.
    store, policy = FakeStore(gate=gate, open_at=4), Deferring()
    part = 2 * PIECE_MIN  # two pieces of 8 MiB a part
    data = (bytes(range(253)) * (5 * part // 200))[:4 * part + 1]
    writer = MultipartWriter(store, "b", "k", part_size=part, max_in_flight=2, policy=policy,
                             executor=ThreadPoolExecutor(16))
    writer.write(data)
    writer.close()
    pending = policy.ready[0]
    sizes = [len(store.open_uploads[pending.upload_id][n]) for n in sorted(store.open_uploads[pending.upload_id])]
    # parts 1-2 in pieces (part numbers 1-4: the limit), parts 3-4 whole, then the last byte
    assert sizes == [PIECE_MIN] * 4 + [part, part, 1], sizes
    assert b"".join(store.open_uploads[pending.upload_id][n] for n in range(1, 8)) == data
    # never more than max_in_flight parts' worth of bytes in flight: 4 pieces, or 2 whole parts
    assert store.max_in_flight == 4


def test_a_failed_piece_aborts_the_upload_and_releases_every_block_file_and_slot(tmp_path):
    # Block files handed over whole (as the JVM bridge does), each cut in two pieces; the third piece fails.
    store = FakeStore(fail_part=3)
    part = 2 * PIECE_MIN
    writer = MultipartWriter(store, "b", "k", part_size=part, max_in_flight=2, executor=ThreadPoolExecutor(4))
    paths = []
    with pytest.raises(TransientError):
        for index in range(4):
            path = tmp_path / f"block-{index}"
            path.write_bytes(bytes([index]) * part)
            paths.append(path)
            writer.write_part(FilePart(str(path), owned=True))
        writer.close()
    assert store.aborted == ["u1"] and store.completed == {}
    assert not [p for p in paths if p.exists()]  # every block file deleted, sent or not
    assert writer._slots._value == 2 * 2  # every slot back: nothing is held by the failed file


def test_parts_below_two_pieces_go_whole():
    from s3commit.transfer.parts import pieces_per_part

    assert [pieces_per_part(mib * 1024 * 1024) for mib in (5, 8, 15, 16, 32, 100, 1024)] == [1, 1, 1, 2, 4, 8, 8]


def test_the_last_part_is_cut_in_no_more_pieces_than_parts_in_flight_nor_past_the_part_limit(monkeypatch):
    import s3commit.transfer.writer as writer_module

    store, policy = FakeStore(), Deferring()
    writer = MultipartWriter(store, "b", "k", part_size=8 * PIECE_MIN, max_in_flight=2, policy=policy)
    writer.write(b"x" * (8 * PIECE_MIN - 1))
    writer.close()
    assert policy.ready[0].part_count == 2  # one piece per part in flight
    monkeypatch.setattr(writer_module, "MAX_PARTS", 2)
    writer = MultipartWriter(store, "b", "k2", part_size=4 * PIECE_MIN, max_in_flight=4, policy=policy)
    writer.write(b"x" * (4 * PIECE_MIN + 3 * PIECE_MIN))
    writer.close()
    assert policy.ready[1].part_count == 2  # the limit leaves room for one: the last part goes whole
    monkeypatch.undo()
    small = MultipartWriter(store, "b", "k3", part_size=PART, policy=policy)
    small.write(b"x" * (2 * PIECE_MIN - 1))
    small.close()
    assert policy.ready[2].part_count == 4  # three parts of 5 MiB, and a last of 1 MiB below two pieces' minimum


def test_pieces_of_a_block_file_delete_it_once_every_piece_is_released(tmp_path):
    path = tmp_path / "block"
    path.write_bytes(bytes(range(256)) * 4096)
    pieces = split_part(FilePart(str(path), owned=True), 3)
    assert [p.size for p in pieces] == [349526, 349525, 349525]
    assert b"".join(bytes(p.load()) for p in pieces) == path.read_bytes()
    pieces[0].release()
    pieces[0].release()  # idempotent: counted once
    pieces[1].release()
    assert path.exists()
    pieces[2].release()
    assert not path.exists()


def test_pieces_of_a_buffer_are_views_of_it_not_copies():
    buffer = bytearray(b"abcdefghij")
    pieces = split_part(BufferPart(buffer), 2)
    assert [bytes(p.load()) for p in pieces] == [b"abcde", b"fghij"]
    buffer[0:1] = b"A"
    assert bytes(pieces[0].load()) == b"Abcde"
    for piece in pieces:
        piece.release()
    with pytest.raises(ValueError, match="released"):
        pieces[0].load()


@pytest.mark.parametrize(("length", "part_size", "slots", "expected"), [
    (128 * MIB, 32 * MIB, 32, 8 * MIB),  # 4 parts for 32 threads: 16 parts of 8 MiB
    (128 * MIB, 32 * MIB, 8, 16 * MIB),  # its share is 8 threads: 8 parts
    (128 * MIB, 32 * MIB, 4, 32 * MIB),  # as many parts as threads already
    (100 * MIB + 1, 64 * MIB, 32, -(-(100 * MIB + 1) // 12)),  # 12 nearly equal parts, none under 8 MiB
    (24 * MIB, 32 * MIB, 32, 8 * MIB),  # one part of 24 MiB: three of 8
    (12 * MIB, 32 * MIB, 32, 32 * MIB),  # under two pieces' worth: one part
    (1024, 32 * MIB, 32, 32 * MIB),  # a small file: one part
    (0, 32 * MIB, 32, 32 * MIB),  # empty
    (128 * MIB, 8 * MIB, 32, 8 * MIB),  # the configured size is already the smallest
    (128 * MIB, 6 * MIB, 64, 6 * MIB),  # ...or below it: never raised
    (4096 * MIB, 32 * MIB, 32, 32 * MIB),  # many parts: as configured
])
def test_a_staged_file_with_few_parts_uploads_in_its_share_of_the_threads(length, part_size, slots, expected):
    size = staged_part_size(length, part_size, slots)
    assert size == expected
    assert size <= part_size and (size >= PIECE_MIN or size == part_size)
    assert max(1, -(-length // size)) <= max(slots, -(-length // part_size))  # never more parts than threads


# --- part buffers are filled again once their parts are uploaded -------------------------------------------------


def test_a_pool_gives_back_its_spares_up_to_keep_and_unmaps_the_rest_and_after_close():
    pool = BufferPool(PART, keep=2)
    first, second, third = pool.take(), pool.take(), pool.take()
    for buffer in (first, second, third):
        pool.give(buffer)
    assert third.closed and not first.closed and not second.closed  # two spares kept, the third unmapped
    assert {id(pool.take()), id(pool.take())} == {id(first), id(second)}
    pool.give(first)
    pool.close()
    assert first.closed
    pool.give(second)  # given back after the close: unmapped at once
    assert second.closed
    assert not pool.take().closed  # a new buffer still, after the close


def record_buffers(monkeypatch) -> list:
    """The part buffers this test's thread maps (a writer takes its buffers in the thread that writes): a thread an
    earlier test left running in this worker may map buffers of its own meanwhile, and those are not counted."""
    import s3commit.transfer.parts as parts

    mapped: list = []
    real, here = parts.populated_buffer, threading.get_ident()

    def record(size):
        buffer = real(size)
        if threading.get_ident() == here:
            mapped.append(buffer)
        return buffer

    monkeypatch.setattr(parts, "populated_buffer", record)
    return mapped


def test_a_large_file_fills_its_uploaded_parts_buffers_again_within_the_memory_bound(monkeypatch):
    mapped = record_buffers(monkeypatch)
    store = FakeStore()
    data = bytes(range(256)) * (PART * 12 // 256 + 7)  # 12 full parts and a few bytes
    with MultipartWriter(store, "b", "k", part_size=PART, max_in_flight=2, executor=ThreadPoolExecutor(2)) as f:
        for i in range(0, len(data), 1_000_003):
            f.write(data[i:i + 1_000_003])
    assert store.completed["k"] == data  # a buffer filled again never changed a part already sent
    # The first part grows in a bytearray; the next 11 full parts need at most max_in_flight + 1 mappings.
    assert 1 <= len(mapped) <= 3
    assert all(buffer.closed for buffer in mapped)  # the close unmapped every spare


def test_an_aborted_writer_unmaps_every_part_buffer(monkeypatch):
    mapped = record_buffers(monkeypatch)
    store = FakeStore()
    writer = MultipartWriter(store, "b", "k", part_size=PART, max_in_flight=2, executor=ThreadPoolExecutor(2))
    writer.write(b"x" * (PART * 5 + 3))  # parts 2-5 and a partial sixth in mapped buffers, some filled again
    assert mapped
    writer.abort()
    assert store.aborted and store.completed == {}
    assert all(buffer.closed for buffer in mapped)
