"""The Spark engine of ``s3commit demo``: the same DataFrame written through ``S3CommitProtocol`` (magic) and
through Spark's default rename-based protocol (FileOutputCommitter v1) over the same s3a:// FileSystem and
the same S3 (the embedded, simulated one, or a real one), with the summary a user wants: time per phase,
requests by type, bytes copied, files committed, and the ``_SUCCESS`` summary.
"""

from __future__ import annotations

import argparse
import contextlib
import uuid

from s3commit.config.options import StoreOptions
from s3commit.demo.measure import ServerMeter, SidecarMeter, measured_write, use_protocol, warm_up
from s3commit.demo.report import print_report
from s3commit.store.s3store import S3Store


def run_spark_demo(args: argparse.Namespace) -> int:
    """The demo on the embedded S3, or with ``args.bucket`` on the S3 at ``args.endpoint_url`` (AWS when
    unset), with credentials from boto3's chain in the sidecar. Returns the exit code."""
    from pyspark.sql import SparkSession

    from s3commit.spark import configure
    from s3commit.testing.server import S3TestServer

    with contextlib.ExitStack() as stack:
        if args.bucket:
            bucket, endpoint, region = args.bucket, args.endpoint_url, args.region
            store_options = StoreOptions(endpoint_url=endpoint, region=region, path_style=bool(endpoint))
            access_key = secret_key = None  # boto3's chain, in the sidecar and here
            server = None
            print(f"S3 at {endpoint or 'AWS'}, bucket {bucket} (requests counted by the client)")
        else:
            server = stack.enter_context(S3TestServer(profile=args.profile))
            bucket, endpoint, region = server.create_bucket("s3commit-demo"), server.endpoint_url, "us-east-1"
            access_key = secret_key = "testing"
            store_options = StoreOptions(endpoint_url=endpoint, region=region, path_style=True,
                                         access_key=access_key, secret_key=secret_key)
            print(f"embedded S3 at {endpoint} (moto on 127.0.0.1, latency profile {args.profile})")
        store = S3Store(store_options)
        builder = (SparkSession.builder.master("local[2]").appName("s3commit-demo")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", str(args.tasks)))
        builder = configure(builder, committer="magic", endpoint_url=endpoint, region=region,
                            access_key=access_key, secret_key=secret_key, threads=args.threads)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        meter = ServerMeter(server) if server is not None else SidecarMeter(spark)
        run = uuid.uuid4().hex[:8]
        try:
            day = f"concat('2026-11-', lpad(cast(id % {args.partitions} + 1 as string), 2, '0')) as day"
            df = (spark.range(args.rows, numPartitions=args.tasks)
                  .selectExpr("id", day, "id * 0.5 as value", "sha2(cast(id as string), 256) as payload"))
            labels = ["magic", "FileOutputCommitter-v1"]
            warm = warm_up(spark, df, f"s3a://{bucket}/warm-up-{run}", labels)
            print(f"warmed up (JVM, sidecar start: first small write {warm.cold_seconds:.1f} s; Spark's code: the "
                  f"whole write once to local disk, {warm.local_seconds:.1f} s)", flush=True)
            print(f"writing {args.rows} rows in {args.tasks} tasks x {args.partitions} partitions, twice ...",
                  flush=True)
            reports = []
            for label in labels:
                use_protocol(spark, label)
                dest = f"s3a://{bucket}/demo-{run}/{label.lower()}"
                reports.append(measured_write(spark, meter, store, df, dest, label))
        finally:
            spark.stop()
        print()
        print_report(reports)
        if args.bucket:
            print(f"\noutput left in s3://{bucket}/demo-{run}/ and s3://{bucket}/warm-up-{run}/")
    return 0
