"""A long session keeps the JVM's and the sidecar's memory flat: 1,000 consecutive writes in one SparkSession
(slow tier), with both processes' memory reported at 10, 100 and 1,000 jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.longest, pytest.mark.timeout(2700)]

MB = 1_000_000


def test_a_thousand_writes_keep_both_processes_flat(s3_server, s3_bucket):
    code = textwrap.dedent("""
        import json, sys
        from pyspark.sql import SparkSession
        from s3commit.spark import configure
        from benchmarks.session import long_session, snapshot
        endpoint, bucket = sys.argv[1:3]
        builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "1g"))
        spark = configure(builder, endpoint_url=endpoint, region="us-east-1", access_key="testing",
                          secret_key="testing").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        snapshots = long_session(spark, bucket, jobs=1000, checkpoints=(10, 100, 1000))
        print(json.dumps(snapshots))
        spark.stop()
    """)
    result = subprocess.run([sys.executable, "-c", code, s3_server.endpoint_url, s3_bucket], capture_output=True,
                            text=True, timeout=2600, env=dict(os.environ), check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert result.returncode == 0 and lines, result.stdout[-3000:] + result.stderr[-4000:]
    at = {s["jobs"]: s for s in json.loads(lines[-1])}
    for jobs in (10, 100, 1000):
        s = at[jobs]
        print(f"{jobs:5d} jobs: JVM RSS {s['jvm_rss_bytes'] / MB:.0f} MB, heap after GC "
              f"{s['jvm_heap_used_bytes'] / MB:.0f} MB; sidecar RSS {s['sidecar_rss_bytes'] / MB:.0f} MB, "
              f"{s['sidecar_threads']} threads")
    # The bounded tables are empty between jobs: nothing accumulates per job.
    for s in at.values():
        assert s["sidecar_write_handles"] == 0 and s["sidecar_magic_attempts"] == 0, s
        assert s["jvm_magic_lengths"] == 0 and s["jvm_configurations"] <= 4, s
        assert s["sidecar_generations"] == 1, s
    # Flat from 100 to 1,000 jobs (ten times the work): the sidecar grows by less than 30 MB, the JVM's
    # live heap by less than 64 MB, and the sidecar's threads stay bounded.
    assert at[1000]["sidecar_rss_bytes"] - at[100]["sidecar_rss_bytes"] < 30 * MB, at
    assert at[1000]["jvm_heap_used_bytes"] - at[100]["jvm_heap_used_bytes"] < 64 * MB, at
    assert at[1000]["sidecar_threads"] <= at[100]["sidecar_threads"] + 8, at
