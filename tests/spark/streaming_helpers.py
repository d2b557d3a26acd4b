"""Helpers for the Structured Streaming tests: queries from a ``rate-micro-batch`` source (a fixed number of rows
per batch, with a timestamp that advances one second per batch, so every run is deterministic), waiting for
batches, and reading a file sink both as Spark does (through ``_spark_metadata``) and as a plain lister does."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import unquote

from s3commit.testing.assertions import list_keys

ROWS_PER_BATCH = 10

CHILD_DRIVER = """
    import json, sys, time
    from pyspark.sql import SparkSession
    from s3commit.spark import configure
    sys.path.insert(0, sys.argv[4])
    from tests.spark.streaming_helpers import rate
    endpoint, bucket, name = sys.argv[1:4]
    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = configure(builder, endpoint_url=endpoint, region="us-east-1", access_key="testing",
                      secret_key="testing").getOrCreate()
    query = (rate(spark).writeStream.format("parquet").option("path", f"s3a://{bucket}/{name}/sink")
             .option("checkpointLocation", f"s3a://{bucket}/{name}/checkpoint")
             .trigger(processingTime="100 milliseconds").start())
"""
"""The start of a child driver's script (run with ``python -c`` after ``textwrap.dedent``; argv: endpoint, bucket,
name, the repository root): a rate -> Parquet query on ``s3a://<bucket>/<name>/``, started; what the driver does
then is appended by the test."""


def rate(spark, *, rows: int = ROWS_PER_BATCH, partitions: int = 2):
    """Batch ``b`` holds values ``[b * rows, (b + 1) * rows)`` with timestamp ``b`` seconds."""
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
            .option("numPartitions", partitions).option("startTimestamp", 0)
            .option("advanceMillisPerBatch", 1000).load())


def wait_for_batch(query, batch: int, *, timeout: float = 120.0) -> dict[str, Any]:
    """Wait until ``query`` has finished ``batch`` (or a later one); its progress."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        progress = query.lastProgress
        if progress is not None and progress["batchId"] >= batch:
            return progress
        time.sleep(0.05)
    raise AssertionError(f"batch {batch} not reached in {timeout} s (last progress: {query.lastProgress})")


def between_batches(query, batch: int, *, timeout: float = 120.0) -> None:
    """Wait until ``query`` has finished exactly ``batch`` and is waiting for its next trigger (give it a trigger
    interval well above a batch's time), so that what S3 counts next belongs to the next batches."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        progress = query.lastProgress
        if progress is not None and progress["batchId"] > batch:
            raise AssertionError(f"batch {batch} was not seen between triggers (now at {progress['batchId']}): "
                                 "the trigger interval is too short for this machine")
        if progress is not None and progress["batchId"] == batch and not query.status["isTriggerActive"]:
            return
        time.sleep(0.02)
    raise AssertionError(f"batch {batch} not reached in {timeout} s (last progress: {query.lastProgress})")


def run_available_now(df_writer) -> Any:
    """Start a query with ``availableNow`` (one batch of ``rate-micro-batch``) and wait for it to end."""
    query = df_writer.trigger(availableNow=True).start()
    query.awaitTermination(180)
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")
    return query


def sink_log_paths(s3_client, bucket: str, sink_key: str) -> set[str]:
    """Every file the sink's log names (its batch files and compactions), as keys."""
    named: set[str] = set()
    for key in list_keys(s3_client, bucket, f"{sink_key}/_spark_metadata/"):
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
        for line in body.splitlines()[1:]:
            path = json.loads(line)["path"]  # a URI: s3a://bucket/key, the key percent-encoded
            named.add(unquote(path.split("://", 1)[1].split("/", 1)[1]))
    return named


def visible_data_keys(s3_client, bucket: str, sink_key: str) -> list[str]:
    """What a reader listing the directory sees: every object outside ``_``-prefixed directories."""
    return [k for k in list_keys(s3_client, bucket, f"{sink_key}/")
            if not any(part.startswith(("_", ".")) for part in k[len(sink_key) + 1:].split("/"))]


def assert_exactly_once(spark, s3_client, bucket: str, sink_key: str, *, rows: int = ROWS_PER_BATCH) -> int:
    """Read through Spark: every value once, a whole number of batches from 0; listed directly: no visible file
    the log does not name. Returns how many batches the sink holds."""
    values = [r.value for r in spark.read.parquet(f"s3a://{bucket}/{sink_key}").select("value").collect()]
    assert len(values) == len(set(values)), "a value was written twice"
    assert sorted(values) == list(range(len(values))), "a value is missing"
    assert len(values) % rows == 0
    visible = visible_data_keys(s3_client, bucket, sink_key)
    assert set(visible) == sink_log_paths(s3_client, bucket, sink_key), "a visible file is not in the sink's log"
    return len(values) // rows
