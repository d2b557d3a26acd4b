"""Structured Streaming per micro-batch: the checkpoint and the file sink's commit, s3commit against Spark's own.

- **Checkpoint**: one query (a ``rate-micro-batch`` source, ``noop`` sink, so every S3 request is the
  checkpoint's) with its checkpoint on ``s3a://`` through s3commit's manager, then through Spark's
  rename-based ``FileContextBasedCheckpointFileManager`` over the same FileSystem (through s3commit's
  ``AbstractFileSystem``; its rename is a COPY and a DELETE). Per batch: the checkpoint's time as Spark
  measures it (``walCommit`` + ``commitOffsets``: the offset log and commit log writes), the batch's time, the
  requests and the bytes copied. Optionally again with a stateful aggregation (its state store files join
  the checkpoint, written by the tasks).
- **Sink commit**: the file sink to ``s3a://`` with the checkpoint on local disk (every S3 request is the
  sink's), through s3commit's protocol (files pending until the batch's log entry) and through Spark's
  ``ManifestFileCommitProtocol`` (files written in place at once). Per batch: ``addBatch`` time, requests,
  bytes copied.

Requests are counted by the simulated S3 between two batches the query finished while idle (the trigger
interval leaves a gap); a batch's figure is the average over the batches in between.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any

SPARK_RENAME_MANAGER = {
    "3": "org.apache.spark.sql.execution.streaming.FileContextBasedCheckpointFileManager",
    "4": "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
}
SPARK_SINK_PROTOCOL = "org.apache.spark.sql.execution.streaming.ManifestFileCommitProtocol"
CHECKPOINT_KEY = "spark.sql.streaming.checkpointFileManagerClass"
SINK_KEY = "spark.sql.streaming.commitProtocolClass"


def _measure(query: Any, server: Any, *, skip: int, batches: int, timeout: float = 600.0) -> dict[str, Any]:
    """Run until ``skip + batches`` batches are done; requests per batch between the first idle boundary after
    ``skip`` and the last idle boundary seen, and each measured batch's durations."""
    boundaries: dict[int, Any] = {}
    durations: dict[int, dict[str, int]] = {}
    deadline = time.monotonic() + timeout
    last = skip + batches
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the measured query failed: {query.exception()}")
        progress = query.lastProgress
        if progress is not None:
            batch = int(progress["batchId"])
            if batch >= skip and batch not in durations:
                durations[batch] = {k: int(v) for k, v in progress["durationMs"].items()}
            if batch >= skip and batch not in boundaries and not query.status["isTriggerActive"] \
                    and query.lastProgress["batchId"] == batch:
                boundaries[batch] = server.stats()
            if batch >= last and len(boundaries) >= 2:
                break
        time.sleep(0.01)
    query.stop()
    if len(boundaries) < 2:
        raise RuntimeError("no two batches were seen between triggers: raise the trigger interval")
    first, end = min(boundaries), max(boundaries)
    used = boundaries[end].minus(boundaries[first])
    count = end - first
    measured = [durations[b] for b in range(first + 1, end + 1) if b in durations]
    checkpoint = [d.get("walCommit", 0) + d.get("commitOffsets", 0) for d in measured]
    return {
        "batches": count,
        "requests_per_batch": {op: n / count for op, n in sorted(used.requests.items())},
        "total_requests_per_batch": used.total_requests / count,
        "bytes_copied_per_batch": used.copy_bytes / count,
        "checkpoint_ms": statistics.median(checkpoint),
        "batch_ms": statistics.median(d.get("triggerExecution", 0) for d in measured),
        "add_batch_ms": statistics.median(d.get("addBatch", 0) for d in measured),
    }


def streaming_runs(server: Any, bucket: str, *, batches: int, rows: int, trigger_seconds: float,
                   stateful: bool, skip: int = 2) -> dict[str, Any]:
    """Measure ``batches`` batches of each query after ``skip`` warm-up ones (the first pay for class loading
    and the sidecar's start); see the module docstring."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from s3commit.spark import CHECKPOINT_MANAGER_CLASS, STREAMING_PROTOCOL_CLASS, configure

    # A bucket of its own: the JVM's s3a FileSystem for a bucket keeps the configuration of the first session
    # that used it (Hadoop's FileSystem cache), which may be an earlier section's.
    bucket = server.create_bucket(f"{bucket}-streaming")
    builder = (SparkSession.builder.master("local[2]").appName("s3commit-bench-streaming")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = configure(builder, endpoint_url=server.endpoint_url, region="us-east-1", access_key="testing",
                      secret_key="testing").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rename_manager = SPARK_RENAME_MANAGER["3" if spark.version.startswith("3.") else "4"]

    def trigger(label: str) -> str:
        # Spark's rename-based manager makes a batch last seconds on s3-standard: a longer interval keeps a gap
        # between its batches (the requests are counted in the gaps; the interval is no part of the figures).
        seconds = trigger_seconds * (2.5 if label.startswith("Spark rename") else 1)
        return f"{int(seconds * 1000)} milliseconds"

    def source() -> Any:
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
                .option("numPartitions", 2).load())

    def aggregated() -> Any:
        df = source()
        return (df.withWatermark("timestamp", "0 seconds").groupBy(F.window("timestamp", "2 seconds"))
                .agg(F.count("*").alias("n")))

    results: dict[str, Any] = {"batches": batches, "rows_per_batch": rows, "trigger_seconds": trigger_seconds,
                               "spark": spark.version, "checkpoint": {}, "stateful": {}, "sink": {}}
    managers = {"s3commit": CHECKPOINT_MANAGER_CLASS, "Spark rename (FileContext)": rename_manager}
    try:
        kinds = [("checkpoint", source, "append")] + ([("stateful", aggregated, "update")] if stateful else [])
        for kind, frame, mode in kinds:
            for label, manager in managers.items():
                print(f"  streaming: {kind}, {label} manager, {batches} batches", flush=True)
                spark.conf.set(CHECKPOINT_KEY, manager)
                name = f"{kind}-{label.split()[0].lower()}"
                query = (frame().writeStream.format("noop").outputMode(mode)
                         .option("checkpointLocation", f"s3a://{bucket}/streaming/{name}/checkpoint")
                         .trigger(processingTime=trigger(label)).start())
                results[kind][label] = _measure(query, server, skip=skip, batches=batches)
        spark.conf.set(CHECKPOINT_KEY, CHECKPOINT_MANAGER_CLASS)
        protocols = {"s3commit": STREAMING_PROTOCOL_CLASS, "Spark manifest": SPARK_SINK_PROTOCOL}
        for label, protocol in protocols.items():
            print(f"  streaming: file sink, {label} protocol, {batches} batches", flush=True)
            spark.conf.set(SINK_KEY, protocol)
            with tempfile.TemporaryDirectory() as local:
                name = f"sink-{label.split()[-1].lower()}"
                query = (source().writeStream.format("parquet")
                         .option("path", f"s3a://{bucket}/streaming/{name}")
                         .option("checkpointLocation", f"{local}/checkpoint")
                         .trigger(processingTime=trigger(label)).start())
                results["sink"][label] = _measure(query, server, skip=skip, batches=batches)
        spark.conf.set(SINK_KEY, STREAMING_PROTOCOL_CLASS)
    finally:
        spark.stop()
    ours, theirs = results["checkpoint"]["s3commit"], results["checkpoint"]["Spark rename (FileContext)"]
    results["ratios"] = {
        "checkpoint_time_rename_over_s3commit": theirs["checkpoint_ms"] / max(ours["checkpoint_ms"], 1),
        "checkpoint_requests_rename_over_s3commit": theirs["total_requests_per_batch"]
        / ours["total_requests_per_batch"],
        "batch_time_rename_over_s3commit": theirs["batch_ms"] / max(ours["batch_ms"], 1),
        "sink_add_batch_s3commit_over_manifest": results["sink"]["s3commit"]["add_batch_ms"]
        / max(results["sink"]["Spark manifest"]["add_batch_ms"], 1),
        "sink_requests_s3commit_over_manifest": results["sink"]["s3commit"]["total_requests_per_batch"]
        / results["sink"]["Spark manifest"]["total_requests_per_batch"],
    }
    if stateful:
        ours, theirs = results["stateful"]["s3commit"], results["stateful"]["Spark rename (FileContext)"]
        results["ratios"]["stateful_batch_time_rename_over_s3commit"] = theirs["batch_ms"] / max(ours["batch_ms"], 1)
    return results
