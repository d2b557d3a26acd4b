"""Readers of a snapshot destination during overwrites (issue 55): a writer process runs full overwrites, dynamic
partition overwrites and appends (one of its drivers SIGKILLed mid-commit, the next job settling it), while readers
in this process read the table in a loop: through its log (``s3commit.arrow.dataset``) and, beside it, by a plain
listing (pyarrow over the same store), as Athena, Trino, Hive and DuckDB read a directory.

A read is **torn** if it fails, or a partition holds other than one job's ``ROWS`` rows, or its partitions are not a
state some serial order of the jobs leaves. Reads by the log must never be torn; the plain listing's torn reads are
counted and reported beside them (on a snapshot destination an overwrite deletes nothing: a lister reads the old
and new files at once)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import s3commit
import s3commit.arrow
from testbed import CHILD_TIMEOUT
from testbed.fixtures import every_server_fixture
from tests.conftest import store_options_for
from tests.reliability.snapshot_writer_child import ROWS, job_data

pytestmark = pytest.mark.integration
s3_server = every_server_fixture()
CHILD = Path(__file__).with_name("snapshot_writer_child.py")
ROOT = Path(__file__).resolve().parents[2]


def apply(state: dict[int, int], i: int) -> dict[int, int]:
    """The partitions (day -> job) after job ``i`` committed over ``state``."""
    table, mode = job_data(i)
    days = set(table["day"].to_pylist())
    if mode == "overwrite":
        return dict.fromkeys(days, i)
    return {**state, **dict.fromkeys(days, i)}


def serial_states(jobs: int, killed: int) -> list[dict[int, int]]:
    """Every state a serial order of jobs ``0..jobs-1`` leaves, with the killed job committed or not."""
    states = []
    for skip in (None, killed):
        state: dict[int, int] = {}
        for i in range(jobs):
            if i != skip:
                state = apply(state, i)
                states.append(state)
    return states


def summary(table: Any) -> dict[int, tuple[int, frozenset[int]]]:
    days, jobs = table["day"].to_pylist(), table["job"].to_pylist()
    seen: dict[int, tuple[int, set[int]]] = {}
    for day, job in zip(days, jobs, strict=True):
        count, owners = seen.setdefault(day, (0, set()))
        seen[day] = (count + 1, owners | {job})
    return {d: (c, frozenset(o)) for d, (c, o) in seen.items()}


def torn(read: dict[int, tuple[int, frozenset[int]]], valid: list[dict[int, int]]) -> bool:
    if any(count != ROWS or len(owners) != 1 for count, owners in read.values()):
        return True
    return {d: next(iter(o)) for d, (_, o) in read.items()} not in valid


def run_writer(server: Any, dest: str, first: int, last: int, kill_at: int = -1) -> int:
    env = {**os.environ, **server.env(), "PYTHONPATH": str(ROOT)}
    args = [sys.executable, str(CHILD), dest, str(first), str(last), "--kill-at", str(kill_at)]
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_TIMEOUT).returncode


def read_loop(server: Any, dest: str, bucket: str, jobs: int, kill_at: int, *, min_reads: int) -> Counter[str]:
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    store = s3commit.S3Store(store_options_for(server))
    plain_fs = pafs.S3FileSystem(endpoint_override=server.endpoint_url.removeprefix("http://"), scheme="http",
                                 access_key="testing", secret_key="testing", region="us-east-1")
    reads: list[tuple[str, Any]] = []
    done = threading.Event()

    def by_log() -> None:
        while not done.is_set() or sum(1 for kind, _ in reads if kind == "log") < min_reads:
            try:
                reads.append(("log", summary(s3commit.arrow.dataset(dest, store=store).to_table(
                    columns=["day", "job"]))))
            except Exception as err:  # a torn read, counted below
                reads.append(("log", err))

    def by_listing() -> None:
        while not done.is_set():
            try:
                table = ds.dataset(f"{bucket}/t", filesystem=plain_fs, partitioning="hive").to_table(
                    columns=["day", "job"])
                reads.append(("listing", summary(table)))
            except Exception as err:
                reads.append(("listing", err))
            time.sleep(0.01)

    readers = [threading.Thread(target=by_log), threading.Thread(target=by_listing)]
    for reader in readers:
        reader.start()
    try:
        assert run_writer(server, dest, 1, kill_at, kill_at) == -9, "the writer was to be SIGKILLed mid-commit"
        assert run_writer(server, dest, kill_at + 1, jobs - 1) == 0
    finally:
        done.set()
        for reader in readers:
            reader.join()
    valid = serial_states(jobs, kill_at)
    counts: Counter[str] = Counter()
    for kind, read in reads:
        counts[f"{kind} reads"] += 1
        if isinstance(read, Exception) or torn(read, valid):
            counts[f"{kind} torn"] += 1
    return counts


@pytest.mark.parametrize("jobs, kill_at, min_reads", [
    (7, 4, 100),
    pytest.param(21, 10, 1000, marks=pytest.mark.slow),
], ids=["7-jobs", "21-jobs"])
def test_readers_of_the_log_never_see_a_torn_table(s3_server, s3_bucket, tally, jobs, kill_at, min_reads):
    dest = f"s3://{s3_bucket}/t"
    store = s3commit.S3Store(store_options_for(s3_server))
    table, _ = job_data(0)
    s3commit.arrow.write_dataset(table, dest, partitioning=["day"], store=store)
    s3commit.enable_snapshots(dest, store=store)
    counts = read_loop(s3_server, dest, s3_bucket, jobs, kill_at, min_reads=min_reads)
    for key, n in counts.items():
        tally[f"snapshot readers, {jobs} jobs: {key}"] += n
    assert counts["log reads"] >= min_reads
    assert counts["log torn"] == 0, counts
    history = s3commit.snapshot_history(dest, store=store)[1]
    assert len(history) in (jobs - 1, jobs)  # snapshot 0, then one a job (the killed one's, if it was settled)


def spark_reader_loop(mode: str, server: Any, bucket: str, tmp: Path, *, jobs: int, kill_at: int,
                      min_reads: int) -> Counter[str]:
    """A stock Spark reader (``mode``: ``s3commit`` or ``s3a``, tests/spark/snapshot_reader_child.py) reading the
    snapshot destination ``s3a://bucket/t`` in a loop while the writer runs; its reads counted and judged."""
    import json

    dest = f"s3://{bucket}/t"
    store = s3commit.S3Store(store_options_for(server))
    table, _ = job_data(0)
    s3commit.arrow.write_dataset(table, dest, partitioning=["day"], store=store)
    s3commit.enable_snapshots(dest, store=store)
    stop = tmp / "stop"
    child = ROOT / "tests" / "spark" / "snapshot_reader_child.py"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    reader = subprocess.Popen([sys.executable, str(child), mode, server.endpoint_url, f"s3a://{bucket}/t",
                               str(stop), str(min_reads)], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert reader.stdout is not None
    try:
        ready = reader.stdout.readline()
        assert "ready" in ready, f"the {mode} reader did not start: {ready!r}"
        assert run_writer(server, dest, 1, kill_at, kill_at) == -9, "the writer was to be SIGKILLed mid-commit"
        assert run_writer(server, dest, kill_at + 1, jobs - 1) == 0
        stop.touch()
        out, _ = reader.communicate(timeout=CHILD_TIMEOUT)
    finally:
        if reader.poll() is None:
            reader.kill()
    valid = serial_states(jobs, kill_at)
    counts: Counter[str] = Counter()
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        read = json.loads(line)
        counts["reads"] += 1
        if "error" in read:
            counts["torn"] += 1
            counts[f"error: {read['error'][:80]}"] += 1
            continue
        seen: dict[int, tuple[int, frozenset[int]]] = {}
        for day, job, n in read["rows"]:
            count, owners = seen.get(day, (0, frozenset()))
            seen[day] = (count + n, owners | {job})
        counts["torn"] += torn(seen, valid)
    return counts
