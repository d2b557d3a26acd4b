"""Structured Streaming on s3a:// through s3commit, end to end: checkpoints written in place (no rename, no COPY,
If-None-Match where Spark forbids overwriting), the file sink exactly once across stops, restarts, a second run
of the same query and injected faults, a stateful aggregation across a restart, and the request counts per
batch. ``configure()`` alone sets it all up (the session of ``conftest.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT
from testbed.fixtures import every_server_fixture
from tests.spark.streaming_helpers import (
    CHILD_DRIVER,
    assert_exactly_once,
    between_batches,
    rate,
    run_available_now,
    sink_log_paths,
    visible_data_keys,
    wait_for_batch,
)

pytestmark = pytest.mark.spark
s3_server = every_server_fixture()


@pytest.fixture
def streaming(spark):
    """The session, with the streaming keys any test changed restored after it."""
    keys = ("spark.sql.streaming.checkpointFileManagerClass", "spark.sql.streaming.commitProtocolClass",
            "spark.sql.streaming.fileSink.log.compactInterval")
    saved = {k: spark.conf.get(k, None) for k in keys}
    yield spark
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    for query in spark.streams.active:
        query.stop()


def parquet_sink(df, bucket: str, name: str):
    return (df.writeStream.format("parquet").option("path", f"s3a://{bucket}/{name}/sink")
            .option("checkpointLocation", f"s3a://{bucket}/{name}/checkpoint"))


def test_rate_to_parquet_is_exactly_once_across_stops_and_restarts(streaming, s3_bucket, s3_client):
    spark = streaming
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "3")  # compactions through s3commit too
    # 1. A first run, stopped at any moment (maybe mid-batch: its tasks are cancelled).
    query = parquet_sink(rate(spark), s3_bucket, "restart").trigger(processingTime="200 milliseconds").start()
    wait_for_batch(query, 2)
    query.stop()
    # 2. A second run from the same checkpoint, stopped again.
    query = parquet_sink(rate(spark), s3_bucket, "restart").trigger(processingTime="200 milliseconds").start()
    first = query.lastProgress
    wait_for_batch(query, (first["batchId"] if first else 3) + 2)
    query.stop()
    # 3. A last run that ends on its own after one batch.
    run_available_now(parquet_sink(rate(spark), s3_bucket, "restart"))

    batches = assert_exactly_once(spark, s3_client, s3_bucket, "restart/sink")
    assert batches >= 6
    keys = list_keys(s3_client, s3_bucket, "restart/")
    assert [k for k in keys if "__magic_job-" in k] == []  # every batch job finished or rolled back
    assert any(k.endswith(".compact") for k in keys)
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_checkpoint_of_a_batch_is_two_puts_and_two_lists_and_no_copy(streaming, s3_sim, s3_bucket, s3_client):
    spark = streaming
    query = (rate(spark).writeStream.format("noop").option("checkpointLocation", f"s3a://{s3_bucket}/cost/ckpt")
             .trigger(processingTime="5 seconds").start())
    between_batches(query, 1)
    before = s3_sim.stats()
    between_batches(query, 4)
    per_three = s3_sim.stats().minus(before)
    query.stop()
    # Each batch: offsets/N and commits/N, each one exists() (one LIST) and one PUT with If-None-Match.
    assert dict(per_three.requests) == {"ListObjectsV2": 6, "PutObject": 6}
    assert per_three.copy_bytes == 0
    keys = list_keys(s3_client, s3_bucket, "cost/ckpt/")
    assert not [k for k in keys if k.endswith((".tmp", "/")) or "/." in k]  # no temp object, no marker


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_sink_commit_of_a_batch_completes_its_uploads_and_copies_nothing(streaming, s3_sim, s3_bucket, tmp_path):
    spark = streaming
    query = (rate(spark).writeStream.format("parquet").option("path", f"s3a://{s3_bucket}/sinkcost")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="5 seconds").start())
    between_batches(query, 1)
    before = s3_sim.stats()
    between_batches(query, 4)
    per_three = dict(s3_sim.stats().minus(before).requests)
    query.stop()
    # Two tasks, one file each, per batch: an upload per file, completed by the driver after the log entry.
    assert per_three.get("CreateMultipartUpload") == per_three.get("CompleteMultipartUpload") == 6, per_three
    assert "CopyObject" not in per_three and "HeadObject" not in per_three
    assert sum(per_three.values()) <= 3 * 30, per_three


def test_spark_own_checkpoint_manager_works_through_the_abstract_filesystem_and_copies(streaming, s3_sim,
                                                                                       s3_bucket):
    # Spark's default (FileContext, write a temp file then rename) needs fs.AbstractFileSystem.s3a.impl; on S3
    # each rename is a COPY and a DELETE: what s3commit's manager avoids.
    spark = streaming
    package = ("org.apache.spark.sql.execution.streaming.checkpointing"
               if spark.version >= "4" else "org.apache.spark.sql.execution.streaming")
    spark.conf.set("spark.sql.streaming.checkpointFileManagerClass",
                   f"{package}.FileContextBasedCheckpointFileManager")
    before = s3_sim.stats()
    run_available_now(rate(spark).writeStream.format("noop")
                      .option("checkpointLocation", f"s3a://{s3_bucket}/renames/ckpt"))
    used = s3_sim.stats().minus(before)
    assert used.requests.get("CopyObject", 0) >= 2 and used.copy_bytes > 0


def test_checkpoint_writes_are_atomic_refuse_to_overwrite_and_leave_nothing_when_cancelled(streaming, s3_bucket,
                                                                                           s3_client):
    spark = streaming
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    root = jvm.org.apache.hadoop.fs.Path(f"s3a://{s3_bucket}/atomic")
    manager = jvm.s3commit.spark.S3CheckpointFileManager(root, conf)
    path = jvm.org.apache.hadoop.fs.Path(f"s3a://{s3_bucket}/atomic/offsets/0")

    # 1. Written and closed: visible, whole.
    out = manager.createAtomic(path, False)
    out.write(bytearray(b"v1\nfirst"))
    assert list_keys(s3_client, s3_bucket, "atomic/") == []  # nothing visible before close
    out.close()
    assert s3_client.get_object(Bucket=s3_bucket, Key="atomic/offsets/0")["Body"].read() == b"v1\nfirst"
    assert manager.exists(path) and manager.exists(jvm.org.apache.hadoop.fs.Path(f"s3a://{s3_bucket}/atomic/offsets"))

    # 2. Without overwrite, an existing file is refused at close and kept as it was.
    out = manager.createAtomic(path, False)
    out.write(bytearray(b"v1\nsecond"))
    with pytest.raises(Exception, match="FileAlreadyExistsException"):
        out.close()
    assert s3_client.get_object(Bucket=s3_bucket, Key="atomic/offsets/0")["Body"].read() == b"v1\nfirst"

    # 3. With overwrite (state store files), it is replaced.
    out = manager.createAtomic(path, True)
    out.write(bytearray(b"v1\nthird"))
    out.close()
    assert s3_client.get_object(Bucket=s3_bucket, Key="atomic/offsets/0")["Body"].read() == b"v1\nthird"

    # 4. Cancelled, small or larger than a part (a multipart upload already under way): nothing is left.
    for name, size in (("small", 100), ("large", 6 * 1024 * 1024)):
        out = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(f"s3a://{s3_bucket}/atomic/{name}"), False)
        out.write(bytearray(size))
        out.cancel()
    assert list_keys(s3_client, s3_bucket, "atomic/") == ["atomic/offsets/0"]
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_stateful_aggregation_with_a_watermark_is_right_across_a_restart(streaming, s3_bucket, s3_client):
    from pyspark.sql import functions as F

    spark = streaming

    def windows(df):
        # Two batches per 2-second window; a window is final (appended) once the watermark passes it.
        return (df.withWatermark("timestamp", "0 seconds")
                .groupBy(F.window("timestamp", "2 seconds")).agg(F.count("*").alias("n"), F.sum("value").alias("s"))
                .select(F.col("window.start").cast("long").alias("start"), "n", "s"))

    writer = lambda: parquet_sink(windows(rate(spark)), s3_bucket, "stateful")  # noqa: E731
    query = writer().trigger(processingTime="200 milliseconds").start()
    wait_for_batch(query, 5)
    query.stop()  # maybe mid-batch, maybe mid-window
    for _ in range(2):  # restarts, each from the state on S3
        run_available_now(writer())

    rows = sorted((r.start, r.n, r.s) for r in spark.read.parquet(f"s3a://{s3_bucket}/stateful/sink").collect())
    assert len(rows) >= 3
    # Window starting at second 2w holds batches 2w and 2w+1: values [20w, 20w + 20).
    assert rows == [(2 * w, 20, sum(range(20 * w, 20 * w + 20))) for w in range(len(rows))]
    assert set(visible_data_keys(s3_client, s3_bucket, "stateful/sink")) == sink_log_paths(
        s3_client, s3_bucket, "stateful/sink")
    state = [k for k in list_keys(s3_client, s3_bucket, "stateful/checkpoint/state/") if k.endswith(".delta")]
    assert state, "the state store's files are on S3"


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_faults_on_checkpoint_requests_are_retried_without_a_duplicate(streaming, s3_sim, s3_bucket, s3_client):
    from pyspark.sql import functions as F

    spark = streaming

    def writer():  # partitioned, with a value that needs escaping in a URI
        df = rate(spark).withColumn("p", F.concat(F.lit("a b="), (F.col("value") % 2).cast("string")))
        return parquet_sink(df, s3_bucket, "faults").partitionBy("p")

    run_available_now(writer())
    # A PUT that reaches S3 but whose answer is lost: the retry meets the object (412 under If-None-Match) and
    # must recognise it as its own; then throttling and server errors on PUTs and LISTs.
    s3_sim.fail_next("PutObject", "reset", after_forward=True)
    s3_sim.fail_next("PutObject", "503", count=2)
    s3_sim.fail_next("ListObjectsV2", "500", count=2)
    s3_sim.fail_next("CompleteMultipartUpload", "200-error")
    # In each run the first PUT is the offset log's entry for the batch, and its first LISTs the checkpoint's.
    for _ in range(2):
        run_available_now(writer())
    stats = s3_sim.stats()
    assert stats.faults_of("reset") == 1 and stats.faults_of("503") == 2 and stats.faults_of("500") == 2
    assert assert_exactly_once(spark, s3_client, s3_bucket, "faults/sink") == 3
    # Spark escapes "=" in a partition value; the log names the keys as URIs (a space and "%" escaped again).
    assert {k.split("/")[2] for k in visible_data_keys(s3_client, s3_bucket, "faults/sink")} == {"p=a b%3D0",
                                                                                                 "p=a b%3D1"}
    assert_no_pending_uploads(s3_client, s3_bucket)


CONCURRENT_RUN = CHILD_DRIVER + """
    try:
        query.awaitTermination(float(sys.argv[5]))
    except Exception:
        pass  # the query failed: its exception is read below
    error = query.exception()
    print(json.dumps({"failed": error is not None, "error": str(error)[:2000] if error else None}))
    query.stop()
    spark.stop()
"""


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_two_runs_of_one_query_on_one_checkpoint_one_fails_cleanly(streaming, s3_server, s3_bucket, s3_client):
    spark = streaming
    # 1. Run A (this driver) is under way.
    first = parquet_sink(rate(spark), s3_bucket, "twice").trigger(processingTime="100 milliseconds").start()
    wait_for_batch(first, 2)
    # 2. Run B, the same query in another driver on the same checkpoint, starts while A runs.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    second = subprocess.run([sys.executable, "-c", textwrap.dedent(CONCURRENT_RUN), s3_server.endpoint_url,
                             s3_bucket, "twice", root, "40"], capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                            env=dict(os.environ), check=False)
    lines = [line for line in second.stdout.splitlines() if line.startswith("{")]
    assert lines, second.stdout[-2000:] + second.stderr[-4000:]
    outcome = json.loads(lines[-1])
    first_error = first.exception()
    first.stop()
    # 3. One of them failed on the checkpoint's conditional writes, with a clear error.
    errors = [str(e) for e in (first_error, outcome["error"]) if e]
    assert errors, "neither run failed: two runs committed batches on one checkpoint"
    assert any("concurrent" in e.lower() or "another run" in e.lower() for e in errors), errors
    # 4. The output is exact: every value once, every visible file in the log.
    run_available_now(parquet_sink(rate(spark), s3_bucket, "twice"))
    assert assert_exactly_once(spark, s3_client, s3_bucket, "twice/sink") >= 3
    assert [k for k in list_keys(s3_client, s3_bucket, "twice/") if "__magic_job-" in k] == []
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_a_batch_whose_sink_log_entry_another_run_wrote_first_is_rolled_back(streaming, s3_sim, s3_bucket,
                                                                             s3_client):
    spark = streaming
    run_available_now(parquet_sink(rate(spark), s3_bucket, "lost"))  # batch 0
    # 1. Batch 1's commit is held as it reads the tasks' pendingsets (by order: slow GETs of 1 s, then 4 s, once let
    # the commit pass before step 2's PUT on a machine at a load of 9)...
    s3_sim.hold("GetObject", ending=".pendingset")
    query = parquet_sink(rate(spark), s3_bucket, "lost").trigger(availableNow=True).start()
    deadline = time.monotonic() + 120
    while not s3_sim.held():
        assert time.monotonic() < deadline and query.isActive, "batch 1's commit never read a pendingset"
        time.sleep(0.02)
    # 2. ...and meanwhile another run of the query commits batch 1 into the sink's log.
    s3_client.put_object(Bucket=s3_bucket, Key="lost/sink/_spark_metadata/1", Body=b"v1")
    s3_sim.release()
    with contextlib.suppress(Exception):  # the failure is read below
        query.awaitTermination(120)
    s3_sim.reset_simulator()
    # 3. This run's batch 1 lost: it failed with a clear error, and its files were discarded, never visible.
    assert query.exception() is not None and "committed by another run" in str(query.exception())
    assert [k for k in list_keys(s3_client, s3_bucket, "lost/sink/") if "__magic_job-" in k] == []
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert assert_exactly_once(spark, s3_client, s3_bucket, "lost/sink") == 1
