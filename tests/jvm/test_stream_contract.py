"""s3commit's ``s3a://`` streams against the bytes written, through the JVM (``StreamOracle``).

Reads: property tests (hypothesis) of random sequences of seek, read, positioned read, readFully and
readVectored, under every read policy, checked against a model of Hadoop's ``FSDataInputStream`` contract
(short reads allowed, -1 at the end, EOFException for a negative or past-the-end seek, a positioned read past
the end or a readFully that would cross it, overlapping vectored ranges refused, the position never moved by
a positioned or vectored read). Blocks are small here (64 KiB) so that reads cross block boundaries.
Writes: files of every shape through ``S3OutputStream`` in both buffer modes; an aborted stream leaves
nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys

pytestmark = pytest.mark.integration

KIB = 1024
MIB = 1024 * KIB
SIZES = {"empty": 0, "one": 1, "small": 1000, "blocks": 300 * KIB + 17}
POLICIES = ["sequential", "random", "normal", None]


class Oracle:
    def __init__(self, classpath: str, conf: dict[str, str]) -> None:
        env = {**os.environ, "S3COMMIT_ORACLE_CONF": json.dumps(conf),
               "S3COMMIT_PYTHON": os.environ.get("S3COMMIT_PYTHON") or sys.executable}
        self.process = subprocess.Popen(["java", "-Xmx512m", "-cp", classpath, "s3commit.testing.StreamOracle"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def __call__(self, **command):
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the oracle JVM died"
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture(scope="module")
def bucket(s3_server):
    return s3_server.create_bucket("stream-contract")


class Files(dict):
    """The test files' bytes (a short repr: hypothesis prints its arguments)."""

    def __repr__(self) -> str:
        return f"Files({', '.join(f'{k}: {len(v)} bytes' for k, v in self.items())})"


@pytest.fixture(scope="module")
def data(s3_server, bucket):
    client = s3_server.client()
    files = Files()
    for name, size in SIZES.items():
        body = os.urandom(size)
        client.put_object(Bucket=bucket, Key=f"data/{name}", Body=body)
        files[name] = body
    return files


@pytest.fixture(scope="module")
def oracle(java_classpath, s3_server):
    conf = {"fs.s3a.endpoint": s3_server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.multipart.size": "5M", "fs.s3a.prefetch.block.size": "64K", "fs.s3a.prefetch.block.count": "3",
            "fs.s3a.readahead.range": "8K", "fs.s3a.vectored.read.min.seek.size": "1K",
            "fs.s3a.vectored.read.max.merged.size": "64K",
            "s3commit.prefetch.max-block-size": "256K", "s3commit.prefetch.max-ahead": "512K"}
    process = Oracle(java_classpath, conf)
    yield process
    process.close()


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def vectored_supported() -> bool:
    import pyspark

    from s3commit.spark.jarbuild import _jars_have_class

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    from pathlib import Path

    return _jars_have_class(Path(jars), "org/apache/hadoop/fs/FileRange.class")


def ops_strategy(size: int):
    position = st.integers(min_value=-3, max_value=size + 3)
    length = st.integers(min_value=0, max_value=max(1, size // 2 + 5))
    ranges = st.lists(st.tuples(st.integers(min_value=-1, max_value=size + 2), st.integers(min_value=0,
                                                                                           max_value=70 * KIB)),
                      min_size=0, max_size=5)
    op = st.one_of(
        st.tuples(st.just("seek"), position),
        st.tuples(st.just("read"), length),
        st.tuples(st.just("read"), length),
        st.tuples(st.just("pread"), position, length),
        st.tuples(st.just("readFully"), position, length),
        st.tuples(st.just("readVectored"), ranges),
    )
    return st.lists(op, min_size=1, max_size=12)


class Model:
    """Hadoop's input stream contract over ``data``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def check(self, op: tuple, answer: dict) -> None:
        name, size = op[0], len(self.data)
        error = answer.get("error")
        if name == "seek":
            target = op[1]
            if target < 0 or target > size:
                assert error == "EOFException", (op, answer)
            else:
                assert error is None, (op, answer)
                self.pos = target
        elif name == "read":
            length = op[1]
            assert error is None, (op, answer)
            n = answer["n"]
            if length == 0:
                assert n == 0
            elif self.pos >= size:
                assert n == -1, (op, answer)
            else:
                assert 1 <= n <= min(length, size - self.pos), (op, answer)
                assert answer["md5"] == md5(self.data[self.pos:self.pos + n]), (op, answer)
                self.pos += n
        elif name == "pread":
            where, length = op[1], op[2]
            if where < 0:
                assert error == "EOFException", (op, answer)
            else:
                assert error is None, (op, answer)
                n = answer["n"]
                if length == 0:
                    assert n == 0
                elif where >= size:
                    assert n == -1, (op, answer)
                else:
                    assert 1 <= n <= min(length, size - where), (op, answer)
                    assert answer["md5"] == md5(self.data[where:where + n]), (op, answer)
        elif name == "readFully":
            where, length = op[1], op[2]
            if where < 0 or (length > 0 and where + length > size):
                assert error == "EOFException", (op, answer)
            else:
                assert error is None, (op, answer)
                assert answer["md5"] == md5(self.data[where:where + length]), (op, answer)
        elif name == "readVectored":
            ranges = op[1]
            ordered = sorted(ranges)
            overlap = any(b[0] < a[0] + a[1] for a, b in itertools.pairwise(ordered))
            if any(off < 0 for off, _ in ranges) or any(off + n > size for off, n in ranges):
                assert error == "EOFException", (op, answer)
            elif overlap:
                assert error == "IllegalArgumentException", (op, answer)
            else:
                assert error is None, (op, answer)
                got = answer["ranges"]
                assert [r["md5"] for r in got] == [md5(self.data[o:o + n]) for o, n in ranges], (op, answer)
        if error is None:
            assert answer["pos"] == self.pos, (op, answer, self.pos)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests): 100 sequences each
@pytest.mark.parametrize("open_file", [False, True], ids=["open", "openFile"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(st.data())
def test_random_operation_sequences_follow_the_contract(oracle, bucket, data, open_file, draw):
    name = draw.draw(st.sampled_from(sorted(SIZES)), label="file")
    policy = draw.draw(st.sampled_from(POLICIES), label="policy")
    ops = draw.draw(ops_strategy(SIZES[name]), label="ops")
    if not vectored_supported():
        ops = [op for op in ops if op[0] != "readVectored"]
    opened = oracle(cmd="open", path=f"s3a://{bucket}/data/{name}", policy=policy, openFile=open_file)
    assert "error" not in opened, opened
    model = Model(data[name])
    for op in ops:
        model.check(op, oracle(cmd="op", op=list(op)))
    closed = oracle(cmd="op", op=["close"])
    assert "error" not in closed
    after = oracle(cmd="op", op=["read", 1])
    assert after.get("error") == "IOException" and "closed" in after["message"].lower()


def test_policies_from_configuration_and_open_file_are_what_the_stream_uses(oracle, bucket, data):
    assert "policy=RANDOM" in oracle(cmd="open", path=f"s3a://{bucket}/data/blocks", policy="parquet, columnar",
                                     openFile=True)["stream"]
    assert "policy=SEQUENTIAL" in oracle(cmd="open", path=f"s3a://{bucket}/data/blocks", policy="whole-file",
                                         openFile=True)["stream"]
    assert "policy=NORMAL" in oracle(cmd="open", path=f"s3a://{bucket}/data/blocks")["stream"]
    # adaptive: sequential until the first backward seek, random after
    model = Model(data["blocks"])
    for op in (("read", 100), ("seek", 200 * KIB)):
        model.check(op, oracle(cmd="op", op=list(op)))
    assert "now random" not in oracle(cmd="op", op=["describe"])["stream"]
    for op in (("seek", 10), ("read", 5)):
        model.check(op, oracle(cmd="op", op=list(op)))
    assert "now random" in oracle(cmd="op", op=["describe"])["stream"]


def test_a_sequential_read_fetches_blocks_that_grow_while_it_reads_in_order(oracle, s3_server, bucket):
    # Blocks of 64 KiB doubling up to 256 KiB (the oracle's configuration): 2 MiB + 5 bytes in 10 GETs, not 33
    # (a store may read the whole object for each ranged GET: moto does); never more than 512 KiB in flight
    # ahead of the reader. A seek out of the blocks in hand starts again from 64 KiB.
    size = 2 * MIB + 5
    body = os.urandom(size)
    s3_server.client().put_object(Bucket=bucket, Key="growing/file", Body=body)
    s3_server.reset_stats()
    assert "error" not in oracle(cmd="open", path=f"s3a://{bucket}/growing/file", policy="sequential", openFile=True)
    model = Model(body)
    for op in [("read", 1000)] + [("read", 64 * KIB)] * 40:
        model.check(op, oracle(cmd="op", op=list(op)))
    described = oracle(cmd="op", op=["describe"])["stream"]
    fetched = sorted((int(r["range"][6:].split("-")[0]), int(r["range"].split("-")[1]))
                     for r in s3_server.request_log() if r["key"] == "growing/file" and r["range"])
    sizes = [end - start + 1 for start, end in fetched]
    assert sizes == [64 * KIB, 128 * KIB] + [256 * KIB] * 7 + [size - 64 * KIB - 128 * KIB - 7 * 256 * KIB], sizes
    assert [start for start, _ in fetched] == list(itertools.accumulate([0, *sizes[:-1]]))  # contiguous, once each
    most_ahead = int(described.rsplit("most ahead=", 1)[1].rstrip("}"))
    assert 256 * KIB < most_ahead <= 512 * KIB, described
    # back to the start: a new run, from the first size again
    s3_server.reset_stats()
    for op in (("seek", 100), ("read", 200 * KIB)):
        model.check(op, oracle(cmd="op", op=list(op)))
    # The read returns the first block; the next is fetched ahead on another thread and may reach the server after
    # the read has returned: its GET is waited for (the log read again until it is there, or 60 s have passed).
    deadline = time.monotonic() + 60
    while True:
        again = sorted(int(r["range"].split("-")[1]) - int(r["range"][6:].split("-")[0]) + 1
                       for r in s3_server.request_log() if r["key"] == "growing/file" and r["range"])
        if len(again) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert again[:2] == [64 * KIB, 128 * KIB] and max(again) <= 256 * KIB, again
    oracle(cmd="op", op=["close"])


@pytest.mark.parametrize("buffer", ["disk", pytest.param("array", marks=pytest.mark.slow)])  # disk: the default
@pytest.mark.parametrize("chunks", [[], pytest.param([1], marks=pytest.mark.slow), [5 * MIB], [5 * MIB, 1],
                                    [3 * MIB] * 5 + [123], pytest.param([64 * KIB] * 80 + [7], marks=pytest.mark.slow)],
                         ids=["empty", "one-byte", "exactly-one-part", "a-part-and-a-byte", "three-parts-and-some",
                              "many-small-writes"])  # two shapes in the slow tier for the default tier's budget
def test_files_written_through_the_output_stream_arrive_exact(java_classpath, s3_server, bucket, buffer, chunks):
    conf = {"fs.s3a.endpoint": s3_server.endpoint_url, "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": "testing", "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.multipart.size": "5M", "fs.s3a.fast.upload.buffer": buffer}
    writer = Oracle(java_classpath, conf)
    client = s3_server.client()
    try:
        key = f"written/{buffer}-{len(chunks)}-{sum(chunks)}"
        answer = writer(cmd="write", path=f"s3a://{bucket}/{key}", chunks=chunks)
        assert "error" not in answer, answer
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert len(body) == sum(chunks) == answer["n"] and md5(body) == answer["md5"]
        parts = -(-sum(chunks) // (5 * MIB))
        if parts > 1:
            assert client.head_object(Bucket=bucket, Key=key)["ETag"].endswith(f'-{parts}"')
        # abort half way: nothing visible, no upload left
        aborted = writer(cmd="write", path=f"s3a://{bucket}/aborted/{key}", chunks=[*chunks, 1, 1],
                         abortAfter=len(chunks) + 1)
        assert aborted.get("aborted"), aborted
        assert list_keys(client, bucket, "aborted/") == []
        assert_no_pending_uploads(client, bucket)
    finally:
        writer.close()


def shuffle_files(client, bucket: str, prefix: str, sizes: list[int]) -> tuple[bytes, list[int]]:
    """A map output as Spark's fallback storage holds it: ``.data`` (the reduce partitions' blocks, one after
    another) and ``.index`` (their offsets, big-endian longs, one more than there are partitions)."""
    offsets = [sum(sizes[:n]) for n in range(len(sizes) + 1)]
    data = os.urandom(offsets[-1])
    client.put_object(Bucket=bucket, Key=f"{prefix}.index", Body=b"".join(o.to_bytes(8, "big") for o in offsets))
    client.put_object(Bucket=bucket, Key=f"{prefix}.data", Body=data)
    return data, offsets


def read_like_fallback_storage(oracle, path: str, start: int, end: int) -> tuple[int, int, str]:
    """What Spark's ``FallbackStorage.read`` does for reduce partitions ``[start, end)`` of one map output: skip to
    the two offsets in the index, then read exactly the block from the data file."""
    assert "error" not in oracle(cmd="open", path=f"{path}.index")
    assert oracle(cmd="op", op=["skip", start * 8])["n"] == start * 8
    offset = oracle(cmd="op", op=["readLong"])["value"]
    oracle(cmd="op", op=["skip", (end - start - 1) * 8])
    next_offset = oracle(cmd="op", op=["readLong"])["value"]
    assert "error" not in oracle(cmd="open", path=f"{path}.data")
    oracle(cmd="op", op=["seek", offset])
    block = oracle(cmd="op", op=["readFullyHere", next_offset - offset])
    assert "error" not in block, block
    oracle(cmd="op", op=["close"])
    return offset, next_offset, block["md5"]


def test_spark_shuffle_blocks_are_read_from_fallback_storage_with_a_ranged_get_of_exactly_the_block(
        oracle, s3_server, bucket):
    # The reads of a decommissioned executor's map output from S3: per block one GET of the two offsets in the
    # index and one GET of exactly the block, however large the data file around it (no prefetching: 64 KiB
    # blocks here, 8 MiB by default, for a block that may be a few bytes).
    prefix = "fallback/app-1/3/1234/shuffle_3_17_0"
    sizes = [1000, 150 * KIB, 7, 0, 200 * KIB]
    data, offsets = shuffle_files(s3_server.client(), bucket, prefix, sizes)
    path = f"s3a://{bucket}/{prefix}"
    s3_server.reset_stats()
    for start, end in ((1, 2), (0, 1), (2, 3), (1, 4)):  # (1, 4): a batch of three partitions, as AQE asks
        got = read_like_fallback_storage(oracle, path, start, end)
        assert got == (offsets[start], offsets[end], md5(data[offsets[start]:offsets[end]]))
    gets = [(r["key"].rsplit(".", 1)[1], r["range"]) for r in s3_server.request_log()
            if r["operation"] == "GetObject" and r["key"].startswith(prefix)]
    assert gets == [
        ("index", "bytes=8-23"), ("data", f"bytes={offsets[1]}-{offsets[2] - 1}"),
        ("index", "bytes=0-15"), ("data", "bytes=0-999"),
        ("index", "bytes=16-31"), ("data", f"bytes={offsets[2]}-{offsets[2] + 15}"),  # 7 bytes: read as 16
        ("index", "bytes=8-23"), ("index", "bytes=32-47"), ("data", f"bytes={offsets[1]}-{offsets[4] - 1}"),
    ]
    # The same reads of a file that is not one of Spark's shuffle files prefetch as usual (the default policy).
    client = s3_server.client()
    client.copy_object(Bucket=bucket, Key="fallback/other.data", CopySource={"Bucket": bucket, "Key": f"{prefix}.data"})
    s3_server.reset_stats()
    assert "error" not in oracle(cmd="open", path=f"s3a://{bucket}/fallback/other.data")
    oracle(cmd="op", op=["seek", offsets[1]])
    assert oracle(cmd="op", op=["readFullyHere", 1000])["md5"] == md5(data[offsets[1]:offsets[1] + 1000])
    # blocks of 64 KiB from the position, fetched ahead in parallel (their GETs in any order): the read returns the
    # first; the next is fetched on another thread and may reach the server after the read returned (or never, once
    # the stream is closed), so its GET is waited for before the close (the log read again until it is there, or 60
    # s have passed)
    deadline = time.monotonic() + 60
    while True:
        fetched = [r["range"] for r in s3_server.request_log() if r["key"] == "fallback/other.data" and r["range"]]
        if len(fetched) > 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    oracle(cmd="op", op=["close"])
    assert f"bytes={offsets[1]}-{offsets[1] + 64 * KIB - 1}" in fetched and len(fetched) > 1, fetched
