"""The Spark engine of ``s3commit demo``: the same DataFrame written through ``S3CommitProtocol`` (magic) and
through Spark's default rename-based protocol (FileOutputCommitter v1) over the same s3a:// FileSystem and
the same S3 (the embedded, simulated one, or a real one), with the summary a user wants: time per phase,
requests by type, bytes copied, files committed, and the ``_SUCCESS`` summary.

On the embedded S3, S3A's magic committer writes the same DataFrame third, in a Spark application of its own
(:mod:`~s3commit.demo.s3a_write`), when S3A's jars are at hand (:func:`s3a_plan`): ``--peers s3a`` resolves them
(once, from Maven Central), ``--peers auto`` (the default) uses them when they are already in the cache and
otherwise says in one line that S3A is not shown and how to get it, ``--peers none`` leaves S3A out.
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from pathlib import Path

from s3commit.config.options import StoreOptions
from s3commit.demo.measure import ServerMeter, SidecarMeter, demo_frame, measured_write, use_protocol, warm_up
from s3commit.demo.report import print_report
from s3commit.store.s3store import S3Store

NOT_SHOWN = ("S3A's magic committer is not shown: its jars are not in the cache (`s3commit demo --peers s3a` "
             "resolves them once from Maven Central, ~690 MB, with mvn)")
"""The summary's line when S3A could be shown but its jars are not at hand."""


def s3a_plan(peers: str, *, embedded: bool) -> tuple[list[Path] | None, str | None]:
    """S3A's jars to write with, or ``None`` and the line the summary says instead (``None`` for ``--peers
    none``). ``peers`` is ``--peers``: ``s3a`` resolves the jars (Maven, once), ``auto`` only looks in the cache."""
    if peers == "none":
        return None, None
    if not embedded:
        return None, "S3A's magic committer is not shown: the demo writes it beside on the embedded S3 only"
    from s3commit.demo.s3a import S3AJarsError, cached_s3a_jars, s3a_cache_dir, s3a_jars

    try:
        if peers == "s3a":
            jars = cached_s3a_jars()
            if jars is None:
                print(f"resolving S3A's jars from Maven Central once (~690 MB) into {s3a_cache_dir()} ...", flush=True)
                jars = s3a_jars()
            return jars, None
        jars = cached_s3a_jars()
    except S3AJarsError as err:
        return None, f"S3A's magic committer is not shown: {err}"
    return (jars, None) if jars else (None, NOT_SHOWN)


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
        s3a, s3a_note = s3a_plan(getattr(args, "peers", "auto"), embedded=server is not None)
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
            df = demo_frame(spark, args.rows, args.tasks, args.partitions)
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
        if s3a is not None and server is not None:
            from s3commit.demo.s3a_write import S3AWriteError, run_s3a_write

            print("the same through S3A's magic committer, in a Spark application of its own ...", flush=True)
            try:
                reports.append(run_s3a_write(server, store, bucket=bucket, dest=f"s3a://{bucket}/demo-{run}/s3a-magic",
                                             warm_dest=f"s3a://{bucket}/warm-up-{run}/s3a-magic", rows=args.rows,
                                             tasks=args.tasks, partitions=args.partitions))
            except S3AWriteError as err:
                s3a_note = f"S3A's magic committer is not shown: {err}"
        print()
        print_report(reports, notes=[s3a_note] if s3a_note else [])
        if args.bucket:
            print(f"\noutput left in s3://{bucket}/demo-{run}/ and s3://{bucket}/warm-up-{run}/")
    return 1 if getattr(args, "peers", "auto") == "s3a" and s3a_note else 0
