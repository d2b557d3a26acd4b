"""``s3commit demo``: write a partitioned dataset to an embedded, simulated S3 through the magic committer
and through the rename baseline, and show what each cost.

The embedded S3 is moto on 127.0.0.1 behind the latency simulator (profile ``s3-standard``: tens of ms per
request, server-side COPY at ~66 MB/s), so the comparison shows the real shape of the difference: the magic
commit costs one Complete per file and copies nothing; the rename commit copies every byte twice.

Engines: ``spark`` (PySpark through ``S3CommitProtocol`` vs Spark's default FileOutputCommitter protocol;
needs pyspark and a JDK) and ``python`` (pyarrow Parquet through the Python API). ``auto`` picks Spark when
it is usable. With ``--bucket`` (and ``--endpoint-url`` for an S3 other than AWS's) it runs against that S3
instead, with credentials from boto3's chain; requests are then counted at the client.

Beside S3A (``--peers``, Spark on the embedded S3): S3A's magic committer (hadoop-aws's ``S3AFileSystem`` and
spark-hadoop-cloud's ``PathOutputCommitProtocol``) writes the same DataFrame third, in a Spark application of its
own, when S3A's jars are at hand: ``--peers s3a`` resolves them once from Maven Central into s3commit's cache
(``mvn`` on PATH), ``auto`` (the default) uses them when cached and otherwise says how to get them, ``none``
leaves S3A out.

The package: this module parses the options and picks the engine; :mod:`~s3commit.demo.spark_engine` and
:mod:`~s3commit.demo.python_engine` run the writes; :mod:`~s3commit.demo.measure` measures one write (time, requests,
bytes copied); :mod:`~s3commit.demo.report` prints the summary; :mod:`~s3commit.demo.s3a` holds S3A's jars (resolved
once, cached) and settings, for the demo and the repository's tests and benchmarks; :mod:`~s3commit.demo.s3a_write`
runs S3A's write in its own Spark application.

May import: everything of s3commit, the test API's server included (the embedded S3). Nothing imports the demo but
the CLI, by name.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence


def _spark_usable() -> bool:
    import importlib.util

    needed = ("pyspark", "s3commit.spark")
    return all(importlib.util.find_spec(m) is not None for m in needed) and shutil.which("java") is not None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="s3commit demo", description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["auto", "spark", "python"], default="auto")
    parser.add_argument("--profile", default="s3-standard", help="latency profile of the embedded S3")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None,
                        help="fs.s3a.committer.threads of s3commit's committer (default: its own, 32, and the job "
                        "commit's Completes as many at once as the store's adaptive limit allows; S3A's committer "
                        "beside keeps its own default, 32 in Hadoop 3.4+)")
    parser.add_argument("--endpoint-url", help="use this S3 endpoint instead of the embedded one")
    parser.add_argument("--bucket",
                        help="a bucket of a real S3 to write to (AWS unless --endpoint-url) instead of the embedded S3")
    parser.add_argument("--region")
    parser.add_argument("--peers", choices=["auto", "s3a", "none"], default="auto",
                        help="S3A's magic committer beside (Spark, embedded S3): s3a resolves S3A's jars once from "
                        "Maven Central (~690 MB, needs mvn); auto (default) shows it when they are cached; none: not")
    args = parser.parse_args(argv)

    if args.endpoint_url and not args.bucket:
        parser.error("--bucket is required with --endpoint-url")
    if args.peers == "s3a" and args.bucket:
        parser.error("--peers s3a writes beside on the embedded S3 only: not with --bucket")
    engine = args.engine
    if engine == "auto":
        engine = "spark" if _spark_usable() else "python"
    if args.peers == "s3a" and engine != "spark":
        parser.error("--peers s3a needs the Spark engine (pyspark and a JDK)")
    if engine == "spark":
        from s3commit.demo.spark_engine import run_spark_demo

        return run_spark_demo(args)

    from s3commit.demo.python_engine import run_python_demo

    return run_python_demo(args)
