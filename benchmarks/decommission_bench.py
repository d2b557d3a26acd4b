"""Executors that come and go: a shuffle of hundreds of MiB across the two executors of a standalone cluster (two
Workers of one core on 127.0.0.1), one executor decommissioned (SIGPWR) between the map and the reduce stage.

Variants, each an application of its own on the same cluster and simulated S3:

- ``recompute``: decommissioning without block migration (``spark.storage.decommission.enabled=false``): the
  executor leaves with its map output, the next job runs those map tasks again;
- ``fallback-s3``: its shuffle blocks migrate through s3commit to S3 fallback storage
  (``configure(fallback_storage=...)``); the surviving executor takes none
  (``spark.storage.decommission.shuffleBlocks.maxDiskSize``: it has no room to spare), so the reduce stage reads
  the departed executor's blocks from S3;
- ``peer``: the surviving executor has room. Spark counts the fallback storage as one more peer: each peer gets
  a migration thread taking blocks from one queue, so the blocks go to the survivor and to S3 side by side.

Measured from Spark's event log (map tasks run, the stages' times) and the simulated S3's counters (requests
and bytes of the migration and of the reduce stage's reads); the migration's seconds from SIGPWR to the executor's
exit and as the executor's log reports each block's copy.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from testbed.standalone import StandaloneCluster, executor_pids, wait_gone

VARIANTS = ("recompute", "fallback-s3", "peer")
MIGRATED = re.compile(r"Migrated \S+ \(size: [^)]*\) to BlockManagerId\((\w+)[^)]*\) in (\d+) ms")


def stages_of(event_log: Path) -> dict[int, list[dict[str, Any]]]:
    """What an application's event log says about its jobs' stages: per job, each stage attempt that ran in it (a
    stage a later job reuses belongs to the job that ran it), with its tasks that succeeded, its seconds, and the
    shuffle bytes it wrote and read (local, remote)."""
    # A rolling event log is a directory of events_<n>_<app> files (and an appstatus marker); else one file.
    files = [event_log]
    if event_log.is_dir():
        rolled = [f for f in event_log.iterdir() if f.name.startswith("events_")]
        files = sorted(rolled, key=lambda f: int(f.name.split("_")[1]))
    stages: dict[tuple[int, int], dict[str, Any]] = {}
    jobs: dict[int, list[int]] = {}

    def stage(sid: int, attempt: int) -> dict[str, Any]:
        if (sid, attempt) not in stages:  # first seen: the latest job started that has it
            job = max((j for j, ids in jobs.items() if sid in ids), default=-1)
            stages[(sid, attempt)] = {"job": job, "stage": sid, "attempt": attempt, **_stage()}
        return stages[(sid, attempt)]

    for line in (line for f in files for line in f.read_text().splitlines()):
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            jobs[event["Job ID"]] = list(event["Stage IDs"])
        elif kind in ("SparkListenerStageSubmitted", "SparkListenerStageCompleted"):
            info = event["Stage Info"]
            entry = stage(info["Stage ID"], info["Stage Attempt ID"])
            if kind == "SparkListenerStageCompleted":
                entry["seconds"] = (info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000
        elif kind == "SparkListenerTaskEnd" and event.get("Task End Reason", {}).get("Reason") == "Success":
            entry = stage(event["Stage ID"], event["Stage Attempt ID"])
            metrics = event.get("Task Metrics") or {}
            read = metrics.get("Shuffle Read Metrics") or {}
            entry["tasks"] += 1
            entry["written"] += (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
            entry["read_local"] += read.get("Local Bytes Read", 0)
            entry["read_remote"] += read.get("Remote Bytes Read", 0)
    by_job: dict[int, list[dict[str, Any]]] = {job: [] for job in sorted(jobs)}
    for key in sorted(stages):
        entry = dict(stages[key])
        by_job.setdefault(entry.pop("job"), []).append(entry)
    return by_job


def _stage() -> dict[str, Any]:
    return {"tasks": 0, "seconds": 0.0, "written": 0, "read_local": 0, "read_remote": 0}


def _session(cluster: StandaloneCluster, server: Any, bucket: str, variant: str, events: Path, reduces: int) -> Any:
    from pyspark.sql import SparkSession

    from s3commit.spark import configure

    builder = (SparkSession.builder.master(cluster.url).appName(f"s3commit-bench-decommission-{variant}")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.pyspark.python", sys.executable)
               .config("spark.cores.max", "2").config("spark.executor.memory", "1g")
               .config("spark.sql.adaptive.enabled", "false").config("spark.sql.shuffle.partitions", str(reduces))
               .config("spark.shuffle.compress", "false")  # the shuffle's bytes as written, whatever the data
               .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", events.as_uri())
               .config("spark.eventLog.compress", "false")  # JSON lines, read by stages_of
               .config("spark.storage.decommission.replicationReattemptInterval", "1s"))
    fallback = None
    if variant == "recompute":
        builder = (builder.config("spark.decommission.enabled", "true")
                   .config("spark.storage.decommission.enabled", "false"))
    else:
        fallback = f"s3a://{bucket}/fallback/"
        if variant == "fallback-s3":  # the survivor holds its own map output: over this, it takes no block
            builder = builder.config("spark.storage.decommission.shuffleBlocks.maxDiskSize", "1m")
    return configure(builder, endpoint_url=server.endpoint_url, region="us-east-1", access_key="testing",
                     secret_key="testing", fallback_storage=fallback).getOrCreate()


def run_variant(cluster: StandaloneCluster, server: Any, bucket: str, variant: str, *, rows: int, maps: int,
                reduces: int, workdir: Path) -> dict[str, Any]:
    """One application: the map stage, an executor decommissioned, the same shuffle read again."""
    events = workdir / f"events-{variant}"
    events.mkdir(parents=True, exist_ok=True)
    spark = _session(cluster, server, bucket, variant, events, reduces)
    app = spark.sparkContext.applicationId
    try:
        # ~170 bytes a row in the shuffle (an id, a key and 128 hex characters), spread over both executors. One
        # RDD in the JVM for both jobs, so that the second reuses the first's shuffle: its reduce stage reads it
        # (each DataFrame action would plan a shuffle of its own).
        shuffled = (spark.range(0, rows, 1, maps)
                    .selectExpr("id", "id % 1009 AS k", "sha2(cast(id AS string), 512) AS pad")
                    .repartition(reduces, "k"))
        jrdd = shuffled._jdf.rdd()
        started = time.perf_counter()
        first = int(jrdd.count())
        first_seconds = time.perf_counter() - started
        victims = executor_pids(app)
        before = server.stats()
        signalled = time.perf_counter()
        os.kill(victims[0], signal.SIGPWR)
        gone = wait_gone(victims[:1], 600)
        migration_seconds = time.perf_counter() - signalled
        migrated = server.stats().minus(before)
        started = time.perf_counter()
        second = int(jrdd.count())
        second_seconds = time.perf_counter() - started
        reads = server.stats().minus(before).minus(migrated)
    finally:
        spark.stop()
    copies = [int(ms) for log in Path(cluster.workdir).glob(f"work-*/{app}/*/stderr")
              for _, ms in MIGRATED.findall(log.read_text())]
    # map outputs migrated to S3: their index files' PUTs (a copy after a peer refused is not in the executor's log)
    to_s3 = sum(1 for r in server.request_log() if r["operation"] == "PutObject" and r["key"].endswith(".index")
                and f"/{app}/" in f"/{r['key']}")
    by_job = stages_of(next(events.iterdir()))
    jobs = {job: stages for job, stages in by_job.items() if job >= 0}
    map_runs = sum(s["tasks"] for stages in jobs.values() for s in stages if s["written"] > 0)
    # the second job's stage reading the large shuffle (its last attempt), and the map tasks it ran first
    reading = [s for s in jobs[max(jobs)] if s["tasks"] and s["read_local"] + s["read_remote"] > 0]
    reduce_stage: dict[str, Any] = max(reading, key=lambda s: (s["read_local"] + s["read_remote"], s["attempt"]),
                                       default={})
    rerun_seconds = sum(s["seconds"] for s in jobs[max(jobs)] if s["written"] > 0 and s is not reduce_stage)
    shuffle_bytes = sum(s["written"] for s in jobs[min(jobs)])
    first_map = next((s for s in jobs[min(jobs)] if s["written"] > 0), {})
    first_reduce = max((s for s in jobs[min(jobs)] if s["tasks"]), key=lambda s: s["read_local"] + s["read_remote"],
                       default={})
    return {"exact": second == first == rows, "gone": gone, "first_job_seconds": first_seconds,
            "first_map_stage_seconds": first_map.get("seconds"),
            "first_reduce_stage_seconds": first_reduce.get("seconds"),
            "load_average": os.getloadavg(),
            "second_job_seconds": second_seconds, "reduce_stage_seconds": reduce_stage.get("seconds"),
            "reduce_stage_bytes_read": reduce_stage.get("read_local", 0) + reduce_stage.get("read_remote", 0),
            "map_rerun_seconds": rerun_seconds,
            "map_tasks": maps, "map_tasks_run_again": map_runs - maps, "shuffle_bytes": shuffle_bytes,
            "migration_seconds": migration_seconds if variant != "recompute" else None,
            "map_outputs_to_s3": to_s3, "copy_seconds": sum(copies) / 1000,
            "migration_requests": dict(migrated.requests), "migration_bytes_to_s3": sum(migrated.bytes_in.values()),
            "reduce_requests": dict(reads.requests), "reduce_bytes_from_s3": sum(reads.bytes_out.values()),
            "second_job_stages": jobs[max(jobs)]}


def decommission_runs(server: Any, bucket: str, *, mib: int, maps: int, reduces: int, workdir: Path,
                      variants: tuple[str, ...] = VARIANTS) -> dict[str, Any]:
    """Every variant on one cluster; ratios of the second job's time and of its reduce stage to recompute's."""
    rows = mib * (1 << 20) // 170
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "S3COMMIT_PYTHON", "PYSPARK_PYTHON")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    results: dict[str, Any] = {"rows": rows, "maps": maps, "reduces": reduces, "executors": 2}
    with StandaloneCluster(workdir / "cluster", memory="1536m", env=env) as cluster:
        for variant in variants:
            print(f"  decommission: {variant} ({mib} MiB of shuffle, {maps} map and {reduces} reduce tasks, "
                  "2 executors, one decommissioned after the map stage)", flush=True)
            results[variant] = run_variant(cluster, server, bucket, variant, rows=rows, maps=maps, reduces=reduces,
                                           workdir=workdir)
    baseline = results.get("recompute", {}).get("second_job_seconds")
    results["ratios"] = {f"second_job_{v.replace('-', '_')}_over_recompute": results[v]["second_job_seconds"] / baseline
                         for v in variants if v != "recompute" and baseline}
    return results
