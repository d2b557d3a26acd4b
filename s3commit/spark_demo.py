"""The PySpark half of ``s3commit demo``: the same DataFrame written through ``S3CommitProtocol`` (magic) and
through Spark's default rename-based protocol (FileOutputCommitter v1) over the same s3a:// FileSystem and
the same simulated S3, with the summary a user wants: time per phase, requests by type, bytes copied,
files committed, and the ``_SUCCESS`` summary.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from s3commit.demo import RunReport, print_report

DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"


def use_protocol(spark: Any, label: str) -> None:
    """Route the session's next writes through ``label``: an s3commit committer name (``magic``,
    ``directory``, ``partitioned``) or ``FileOutputCommitter-v1`` / ``-v2`` (Spark's default protocol)."""
    from s3commit.spark import PROTOCOL_CLASS

    if label.startswith("FileOutputCommitter-v"):
        spark.conf.set("spark.sql.sources.commitProtocolClass", DEFAULT_PROTOCOL)
        spark.conf.set("mapreduce.fileoutputcommitter.algorithm.version", label[-1])
    else:
        spark.conf.set("spark.sql.sources.commitProtocolClass", PROTOCOL_CLASS)
        spark.conf.set("fs.s3a.committer.name", label)


def warm_up(spark: Any, df: Any, dest: str, labels: list[str]) -> float:
    """Write a small sample of ``df`` once through each protocol before anything is measured.

    The first write of a session pays for class loading, JIT compilation and the start of the sidecar
    (a Python process importing boto3); charged to whichever protocol ran first, they would skew the
    comparison. Returns the seconds of that first, cold write.
    """
    sample = df.sample(fraction=0.01, seed=1)
    cold = 0.0
    for i, label in enumerate(labels):
        use_protocol(spark, label)
        started = time.perf_counter()
        sample.write.partitionBy("day").mode("overwrite").parquet(f"{dest}/{label.lower()}")
        if i == 0:
            cold = time.perf_counter() - started
    return cold


def _job_seconds(spark: Any, description: str) -> float:
    """Wall time of the Spark job(s) run under ``description`` (the tasks), from the status store."""
    store = spark.sparkContext._jsc.sc().statusStore()
    for _ in range(50):  # the store is fed asynchronously
        jobs = store.jobsList(None)
        total = 0.0
        for i in range(jobs.size()):
            job = jobs.apply(i)
            if job.description().isDefined() and job.description().get() == description \
                    and job.completionTime().isDefined() and job.submissionTime().isDefined():
                total += (job.completionTime().get().getTime() - job.submissionTime().get().getTime()) / 1000
        if total:
            return total
        time.sleep(0.1)
    return 0.0


def _write(spark: Any, server: Any, df: Any, dest: str, label: str) -> RunReport:
    description = f"s3commit-demo-{label}-{uuid.uuid4().hex[:6]}"
    spark.sparkContext.setJobDescription(description)
    server.reset_stats()
    started = time.perf_counter()
    df.write.partitionBy("day").parquet(dest)
    total = time.perf_counter() - started
    spark.sparkContext.setJobDescription(None)
    stats = server.stats()
    tasks = _job_seconds(spark, description)
    report = RunReport(label)
    report.phases = {"tasks (write)": tasks, "job commit": max(0.0, total - tasks)}  # commit + driver work
    report.requests = dict(stats.requests)
    report.bytes_copied = stats.copy_bytes
    bucket, _, prefix = dest[len("s3a://"):].partition("/")
    client = server.client()
    sizes = [o["Size"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
             for o in page.get("Contents", []) if not o["Key"].endswith("_SUCCESS")]
    report.files, report.bytes = len(sizes), sum(sizes)
    marker = client.get_object(Bucket=bucket, Key=f"{prefix}/_SUCCESS")["Body"].read()
    report.success = json.loads(marker) if marker else None
    return report


def run_spark_demo(args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    from s3commit.spark import configure
    from s3commit.testing.server import S3TestServer

    if args.endpoint_url or args.bucket:
        print("the Spark demo runs against the embedded S3 only; use --engine python for another endpoint")
        return 2
    with S3TestServer(profile=args.profile) as server:
        bucket = server.create_bucket("s3commit-demo")
        print(f"embedded S3 at {server.endpoint_url} (moto on 127.0.0.1, latency profile {args.profile})")
        builder = (SparkSession.builder.master("local[2]").appName("s3commit-demo")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", str(args.tasks)))
        builder = configure(builder, committer="magic", endpoint_url=server.endpoint_url, region="us-east-1",
                            access_key="testing", secret_key="testing", threads=args.threads)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            day = f"concat('2026-11-', lpad(cast(id % {args.partitions} + 1 as string), 2, '0')) as day"
            df = (spark.range(args.rows, numPartitions=args.tasks)
                  .selectExpr("id", day, "id * 0.5 as value", "sha2(cast(id as string), 256) as payload"))
            run = uuid.uuid4().hex[:8]
            labels = ["magic", "FileOutputCommitter-v1"]
            cold = warm_up(spark, df, f"s3a://{bucket}/warm-up-{run}", labels)
            print(f"warmed up (JVM, sidecar start: first small write {cold:.1f} s)", flush=True)
            print(f"writing {args.rows} rows in {args.tasks} tasks x {args.partitions} partitions, twice ...",
                  flush=True)
            reports = []
            for label in labels:
                use_protocol(spark, label)
                reports.append(_write(spark, server, df, f"s3a://{bucket}/demo-{run}/{label.lower()}", label))
        finally:
            spark.stop()
        print()
        print_report(reports)
    return 0
