"""Spark in its own JVMs: task retries in local[2,3], and two executor JVMs (each with its own sidecar) in
local-cluster. Each case runs in a child Python so it can pick its own master."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytestmark = pytest.mark.spark

PRELUDE = """
    import json, sys
    from pyspark.sql import SparkSession
    from s3commit.spark import configure
    endpoint, bucket, master = sys.argv[1:4]
    builder = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = configure(builder, endpoint_url=endpoint, region="us-east-1", access_key="testing",
                      secret_key="testing").getOrCreate()
"""


def run(script: str, server, bucket: str, master: str, timeout: int = CHILD_TIMEOUT) -> dict:
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(script)
    result = subprocess.run([sys.executable, "-c", code, server.endpoint_url, bucket, master],
                            capture_output=True, text=True, timeout=timeout, env=dict(os.environ), check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-4000:]
    return json.loads(lines[-1])


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_task_failing_on_its_first_attempt_leaves_exactly_one_copy(s3_server, s3_bucket, s3_client):
    out = run("""
        from pyspark import TaskContext
        from pyspark.sql.types import LongType

        def rows(partition):
            context = TaskContext.get()
            for n, row in enumerate(partition):
                # Partition 1's first attempt dies after writing 500 rows into its open files.
                if context.partitionId() == 1 and context.attemptNumber() == 0 and n == 500:
                    raise RuntimeError("first attempt dies mid-write")
                yield row

        df = spark.range(0, 2000, numPartitions=2)
        df = spark.createDataFrame(df.rdd.mapPartitions(rows), df.schema)
        df.write.parquet(f"s3a://{bucket}/retry")
        print(json.dumps({"count": spark.read.parquet(f"s3a://{bucket}/retry").count(),
                          "distinct": spark.read.parquet(f"s3a://{bucket}/retry").distinct().count()}))
        spark.stop()
    """, s3_server, s3_bucket, "local[2,3]")
    assert out == {"count": 2000, "distinct": 2000}
    assert len([k for k in list_keys(s3_client, s3_bucket, "retry/") if k.endswith(".parquet")]) == 2
    assert [k for k in list_keys(s3_client, s3_bucket, "retry/") if "__magic_job-" in k] == []
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_two_executor_jvms_each_with_a_sidecar_write_correct_output(s3_server, s3_bucket, s3_client):
    out = run("""
        df = spark.range(0, 4000, numPartitions=4).selectExpr("id", "id % 4 as k")
        df.write.partitionBy("k").parquet(f"s3a://{bucket}/cluster")
        # Tasks ran in both executor JVMs; each wrote through the sidecar it started for itself.
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        print(json.dumps({"count": spark.read.parquet(f"s3a://{bucket}/cluster").count(),
                          "executors": executors}))
        spark.stop()
    """, s3_server, s3_bucket, "local-cluster[2,1,1024]")
    assert out["count"] == 4000
    assert out["executors"] == 2
    keys = [k for k in list_keys(s3_client, s3_bucket, "cluster/") if k.endswith(".parquet")]
    assert len(keys) == 16  # 4 tasks x 4 partitions
    assert_no_pending_uploads(s3_client, s3_bucket)
