"""Spark end to end: one DataFrame written through S3CommitProtocol (magic, directory) and through Spark's
default protocol (FileOutputCommitter v1, v2) over the same s3a:// FileSystem and simulated S3."""

from __future__ import annotations

from typing import Any

from s3commit.config.options import StoreOptions
from s3commit.demo.measure import ServerMeter, measured_write, use_protocol, warm_up
from s3commit.store.s3store import S3Store


def spark_runs(server: Any, bucket: str, *, rows: int, tasks: int) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from s3commit.spark import configure

    builder = (SparkSession.builder.master("local[2]").appName("s3commit-bench")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false"))
    spark = configure(builder, committer="magic", endpoint_url=server.endpoint_url, region="us-east-1",
                      access_key="testing", secret_key="testing", threads=32).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    store = S3Store(StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing"))
    results: dict[str, Any] = {"rows": rows, "tasks": tasks}
    try:
        df = (spark.range(rows, numPartitions=tasks)
              .selectExpr("id", "cast(id % 4 as int) as day", "sha2(cast(id as string), 256) as payload"))
        labels = ["magic", "directory", "FileOutputCommitter-v1", "FileOutputCommitter-v2"]
        print("  spark: warm-up (a 1% sample through each protocol, the whole write to local disk)", flush=True)
        warm = warm_up(spark, df, f"s3a://{bucket}/spark-warm-up", labels)
        results["cold_first_write_seconds"], results["local_disk_warm_up_seconds"] = warm
        for label in labels:
            print(f"  spark: {label}", flush=True)
            use_protocol(spark, label)
            report = measured_write(spark, ServerMeter(server), store, df, f"s3a://{bucket}/spark-{label.lower()}",
                                    label)
            results[label] = {"phases": report.phases, "total_seconds": report.total, "files": report.files,
                              "bytes": report.bytes, "bytes_copied": report.bytes_copied,
                              "requests": report.requests, "total_requests": sum(report.requests.values())}
    finally:
        spark.stop()
    results["ratios"] = {
        "total_v1_over_magic": results["FileOutputCommitter-v1"]["total_seconds"] / results["magic"]["total_seconds"],
        "total_v1_over_directory": results["FileOutputCommitter-v1"]["total_seconds"]
        / results["directory"]["total_seconds"],
        "job_commit_v1_over_magic": results["FileOutputCommitter-v1"]["phases"]["job commit"]
        / max(1e-9, results["magic"]["phases"]["job commit"]),
        "tasks_magic_over_v1": results["magic"]["phases"]["tasks (write)"]
        / max(1e-9, results["FileOutputCommitter-v1"]["phases"]["tasks (write)"]),
        "requests_per_file_magic": results["magic"]["total_requests"] / max(1, results["magic"]["files"]),
        "requests_per_file_v1": results["FileOutputCommitter-v1"]["total_requests"]
        / max(1, results["FileOutputCommitter-v1"]["files"]),
    }
    return results
