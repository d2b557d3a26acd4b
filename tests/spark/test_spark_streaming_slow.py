"""Structured Streaming, the long cases (slow tier): the driver JVM killed mid-batch, after its batch's log entry
or while its tasks upload, then the query restarted; and the RocksDB state store with its checkpoint on S3."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from s3commit.testing._sim.profiles import LatencyProfile
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys, list_pending_uploads
from tests.spark.streaming_helpers import (
    CHILD_DRIVER,
    assert_exactly_once,
    rate,
    run_available_now,
    wait_for_batch,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRIVER = CHILD_DRIVER + """
    query.awaitTermination(600)
"""


def log_entry(s3_client, bucket: str, key: str) -> list[str] | None:
    try:
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    except s3_client.exceptions.NoSuchKey:
        return None
    return [json.loads(line)["path"].split("://", 1)[1].split("/", 1)[1] for line in body.splitlines()[1:]]


def exists(s3_client, bucket: str, key: str) -> bool:
    return bool(s3_client.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount"))


def after_log_entry(s3_client, bucket: str, name: str) -> bool:
    """A batch (2 or later) is in the sink's log and one of its files is not visible yet."""
    for batch in range(2, 50):
        files = log_entry(s3_client, bucket, f"{name}/sink/_spark_metadata/{batch}")
        if files is None:
            return False
        if files and not all(exists(s3_client, bucket, f) for f in files):
            return True
    return False


def during_tasks(s3_client, bucket: str, name: str) -> bool:
    """A batch (2 or later) is planned (offsets written), not in the sink's log, and its tasks are uploading, while
    every file of the batch before it is visible (the sink may still be completing that batch's files as the next
    one is planned: its pending uploads are not this batch's tasks; a batch's files carry ``-b<batch>-``)."""
    keys = list_keys(s3_client, bucket, f"{name}/checkpoint/offsets/")
    planned = max((int(k.rsplit("/", 1)[1]) for k in keys if k.rsplit("/", 1)[1].isdigit()), default=-1)
    if planned < 2 or exists(s3_client, bucket, f"{name}/sink/_spark_metadata/{planned}"):
        return False
    if not any(f"-b{planned}-" in u.key for u in list_pending_uploads(s3_client, bucket, f"{name}/sink/")):
        return False
    before = log_entry(s3_client, bucket, f"{name}/sink/_spark_metadata/{planned - 1}") or []
    return all(exists(s3_client, bucket, f) for f in before)


@pytest.mark.parametrize(("moment", "slow_operation"), [
    (after_log_entry, "CompleteMultipartUpload"),  # the batch is committed, its files not yet complete
    (during_tasks, "UploadPart"),                  # the batch's tasks are writing: nothing is committed
], ids=["after-the-log-entry", "during-the-tasks"])
def test_driver_killed_mid_batch_then_restarted_is_exactly_once(spark, s3_sim, s3_server, s3_bucket, s3_client,
                                                                moment, slow_operation):
    name = f"kill-{slow_operation.lower()}"
    # 1. A driver runs the query in its own process group (its JVM and sidecar with it).
    driver = subprocess.Popen([sys.executable, "-c", textwrap.dedent(DRIVER), s3_server.endpoint_url, s3_bucket,
                               name, ROOT], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ), start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not exists(s3_client, s3_bucket, f"{name}/sink/_spark_metadata/1"):
            assert driver.poll() is None and time.monotonic() < deadline, "the driver did not commit batch 1"
            time.sleep(0.2)
        # 2. S3 turns slow for one operation, so that a batch stays at the chosen moment for seconds.
        s3_sim.configure(profile=LatencyProfile(name="slow", first_byte_seconds={slow_operation: 8.0}))
        deadline = time.monotonic() + 120  # a few batches at 8 s a request, however long the driver took to start
        while not moment(s3_client, s3_bucket, name):
            assert driver.poll() is None and time.monotonic() < deadline, "the moment to kill never came"
            time.sleep(0.1)
        # 3. Killed: no clean-up of any kind runs.
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    s3_sim.reset_simulator()
    # What the kill left: a batch in the log whose files are not all visible, or uploads of a batch not in it.
    named = {k for b in range(50) for k in log_entry(s3_client, s3_bucket, f"{name}/sink/_spark_metadata/{b}") or ()}
    invisible = {k for k in named if not exists(s3_client, s3_bucket, k)}
    if moment is after_log_entry:
        assert invisible, "the kill came after the batch's files were complete"
    else:
        assert not invisible and list_pending_uploads(s3_client, s3_bucket, f"{name}/")

    # 4. The query runs again (one batch, then it ends): the killed batch is settled as the log says.
    writer = (rate(spark).writeStream.format("parquet").option("path", f"s3a://{s3_bucket}/{name}/sink")
              .option("checkpointLocation", f"s3a://{s3_bucket}/{name}/checkpoint"))
    run_available_now(writer)
    assert all(exists(s3_client, s3_bucket, k) for k in invisible)  # finished, not redone
    assert assert_exactly_once(spark, s3_client, s3_bucket, f"{name}/sink") >= 3
    assert [k for k in list_keys(s3_client, s3_bucket, f"{name}/") if "__magic_job-" in k] == []
    assert_no_pending_uploads(s3_client, s3_bucket, f"{name}/")


def test_rocksdb_state_store_on_s3_gives_the_right_windows_across_restarts(spark, s3_sim, s3_bucket, s3_client):
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    try:
        def writer():
            df = rate(spark).withWatermark("timestamp", "0 seconds").groupBy(F.window("timestamp", "2 seconds"))
            out = df.agg(F.count("*").alias("n"), F.sum("value").alias("s")).select(
                F.col("window.start").cast("long").alias("start"), "n", "s")
            return (out.writeStream.format("parquet").option("path", f"s3a://{s3_bucket}/rocks/sink")
                    .option("checkpointLocation", f"s3a://{s3_bucket}/rocks/checkpoint"))

        query = writer().trigger(processingTime="200 milliseconds").start()
        wait_for_batch(query, 5)
        query.stop()
        for _ in range(2):
            run_available_now(writer())
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")

    rows = sorted((r.start, r.n, r.s) for r in spark.read.parquet(f"s3a://{s3_bucket}/rocks/sink").collect())
    assert len(rows) >= 3
    assert rows == [(2 * w, 20, sum(range(20 * w, 20 * w + 20))) for w in range(len(rows))]
    state = list_keys(s3_client, s3_bucket, "rocks/checkpoint/state/")
    assert any(k.endswith(".zip") for k in state), state[:20]
    assert s3_sim.stats().copy_bytes == 0 and not s3_sim.stats().requests.get("CopyObject")
