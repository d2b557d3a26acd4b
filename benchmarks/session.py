"""A long session: many consecutive writes in one SparkSession, with the memory of the driver JVM and of its
sidecar read at checkpoints (10, 100, 1,000 jobs...), so that a leak shows as growth between them.

Each job writes a small DataFrame through the magic committer (every tenth a partitioned one through
``directory``, read back), the way a notebook or a streaming driver runs for days. Reported per checkpoint:
the JVM's RSS and its heap after a full GC, the sidecar's RSS and thread count, and the bridge's bounded
tables (write handles open in the sidecar, magic file lengths and configurations remembered by the JVM).
"""

from __future__ import annotations

import json
import time
from typing import Any


def _jvm_rss(jvm: Any) -> int:
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def snapshot(spark: Any, jobs: int, seconds: float) -> dict[str, Any]:
    jvm = spark._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    jvm.java.lang.System.gc()
    health = json.loads(jvm.s3commit.bridge.Sidecar.healthJson())
    return {"jobs": jobs, "seconds": round(seconds, 1), "jvm_rss_bytes": _jvm_rss(jvm),
            "jvm_heap_used_bytes": int(runtime.totalMemory() - runtime.freeMemory()),
            "sidecar_rss_bytes": health["rss_bytes"], "sidecar_threads": health["threads"],
            "sidecar_write_handles": health["write_handles"], "sidecar_magic_attempts": health["magic_attempts"],
            "sidecar_configurations": health["configurations"],
            "jvm_magic_lengths": int(jvm.s3commit.hadoop.S3FileSystem.magicLengthsRemembered()),
            "jvm_configurations": int(jvm.s3commit.bridge.BridgeConf.size()),
            "sidecar_generations": int(jvm.s3commit.bridge.Sidecar.generations())}


def long_session(spark: Any, bucket: str, *, jobs: int, checkpoints: tuple[int, ...]) -> list[dict[str, Any]]:
    """Run ``jobs`` writes; a snapshot after each checkpoint."""
    df = spark.range(200, numPartitions=1).selectExpr("id", "cast(id % 2 as int) as k")
    started = time.perf_counter()
    snapshots = []
    for job in range(1, jobs + 1):
        dest = f"s3a://{bucket}/session/{job % 7}"
        if job % 10 == 0:  # every tenth: a partitioned write through a staging committer, read back
            spark.conf.set("fs.s3a.committer.name", "directory")
            df.repartition(2).write.mode("overwrite").partitionBy("k").parquet(dest)
            spark.conf.set("fs.s3a.committer.name", "magic")
            assert spark.read.parquet(dest).count() == 200
        else:
            df.write.mode("overwrite").parquet(dest)
        if job in checkpoints:
            snapshots.append(snapshot(spark, job, time.perf_counter() - started))
            print(f"  session: {job} jobs, {snapshots[-1]}", flush=True)
    spark.conf.unset("fs.s3a.committer.name")
    return snapshots
