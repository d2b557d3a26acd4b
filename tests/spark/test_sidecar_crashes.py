"""The crash matrix of the bridge: a sidecar SIGKILLed (as the OOM killer would) between jobs, while a task
writes, in a task commit, in the job commit and after it (its answer lost), in ``local[2,4]`` (task retries)
and in ``local-cluster`` (an executor's own sidecar). Each time a new sidecar starts, the job either commits
exactly or fails cleanly (nothing visible, no pending upload), and the session keeps working.

The kill comes from the sidecar itself (``s3commit.bridge.failpoints``): the first sidecar to reach the named
moment kills itself, once across all of them."""

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
    import json, os, signal, sys
    from pyspark.sql import SparkSession
    from s3commit.spark import configure
    endpoint, bucket, master = sys.argv[1:4]
    builder = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.executorEnv.S3COMMIT_SIDECAR_CRASH", os.environ.get("S3COMMIT_SIDECAR_CRASH", "")))
    spark = configure(builder, endpoint_url=endpoint, region="us-east-1", access_key="testing",
                      secret_key="testing").getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    jvm = spark._jvm

    def write(name, rows=400, parts=4):
        df = spark.range(0, rows, numPartitions=parts).selectExpr("id", "cast(id % 2 as int) as k")
        try:
            df.write.partitionBy("k").parquet(f"s3a://{bucket}/{name}")
            return "committed"
        except Exception as err:
            return "failed: " + str(err).splitlines()[0][:300]

    def ids(name):
        return sorted(r.id for r in spark.read.parquet(f"s3a://{bucket}/{name}").select("id").collect())
"""


def run(script: str, server, bucket: str, master: str, *, crash: str | None, tmp_path,
        timeout: int = CHILD_TIMEOUT) -> dict:
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(script)
    env = dict(os.environ)
    if crash:
        env["S3COMMIT_SIDECAR_CRASH"] = f"{crash}@{tmp_path}"
    result = subprocess.run([sys.executable, "-c", code, server.endpoint_url, bucket, master],
                            capture_output=True, text=True, timeout=timeout, env=env, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0 and lines, result.stdout[-3000:] + result.stderr[-5000:]
    return json.loads(lines[-1])


def fired(tmp_path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


def check_exact_or_clean(out: dict, client, bucket: str, name: str) -> None:
    """The job committed every row exactly once, or failed with nothing visible; no upload is left."""
    keys = [k for k in list_keys(client, bucket, f"{name}/") if not k.endswith("/")]
    if out["first"] == "committed":
        assert out["ids"] == list(range(400)), out
        assert len([k for k in keys if k.endswith(".parquet")]) == 8  # 4 tasks x 2 partitions, one copy each
    else:
        assert [k for k in keys if k.endswith(".parquet") or k.endswith("_SUCCESS")] == [], keys
    assert [k for k in keys if "__magic_job-" in k] == []
    assert_no_pending_uploads(client, bucket)


SCRIPT = """
    first = write("first")
    out = {"first": first, "ids": ids("first") if first == "committed" else None}
    out["second"] = write("second")             # the session keeps working
    out["second_ids"] = len(ids("second"))
    out["generations"] = jvm.s3commit.bridge.Sidecar.generations()
    print(json.dumps(out))
    spark.stop()
"""


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_a_sidecar_killed_between_jobs_is_replaced_for_the_next_one(s3_server, s3_bucket, s3_client, tmp_path):
    out = run("""
        first = write("first")
        os.kill(int(json.loads(jvm.s3commit.bridge.Sidecar.healthJson())["pid"]), signal.SIGKILL)
        out = {"first": first, "ids": ids("first"), "second": write("second"), "second_ids": len(ids("second")),
               "generations": jvm.s3commit.bridge.Sidecar.generations()}
        print(json.dumps(out))
        spark.stop()
    """, s3_server, s3_bucket, "local[2]", crash=None, tmp_path=tmp_path)
    assert out["first"] == out["second"] == "committed" and out["second_ids"] == 400
    assert out["generations"] == 2
    check_exact_or_clean(out, s3_client, s3_bucket, "first")


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_a_sidecar_killed_while_a_task_writes_is_replaced_and_the_task_retried(s3_server, s3_bucket, s3_client,
                                                                              tmp_path):
    out = run(SCRIPT, s3_server, s3_bucket, "local[2,4]", crash="before:fs.close_write", tmp_path=tmp_path)
    assert fired(tmp_path) == ["before-fs.close_write"]
    assert out["first"] == "committed" and out["second"] == "committed" and out["generations"] >= 2
    check_exact_or_clean(out, s3_client, s3_bucket, "first")


@pytest.mark.slow
@pytest.mark.parametrize("crash", ["before:task.commit", "after:task.commit"])
def test_a_sidecar_killed_in_a_task_commit_leaves_an_exact_or_clean_job(s3_server, s3_bucket, s3_client, tmp_path,
                                                                       crash):
    # Spark may retry the task or, since the attempt was authorized to commit, fail the stage: either way the
    # output is exact or absent, and the next write works.
    out = run(SCRIPT, s3_server, s3_bucket, "local[2,4]", crash=crash, tmp_path=tmp_path)
    assert fired(tmp_path) == [crash.replace(":", "-")]
    assert out["second"] == "committed" and out["second_ids"] == 400
    check_exact_or_clean(out, s3_client, s3_bucket, "first")


@pytest.mark.slow
@pytest.mark.parametrize("crash", ["before:job.commit", "after:job.commit"], ids=["before", "answer-lost"])
def test_a_sidecar_killed_in_the_job_commit_resumes_on_the_next_one(s3_server, s3_bucket, s3_client, tmp_path,
                                                                   crash):
    out = run(SCRIPT, s3_server, s3_bucket, "local[2,4]", crash=crash, tmp_path=tmp_path)
    assert fired(tmp_path) == [crash.replace(":", "-")]
    assert out["first"] == "committed", out  # job.commit is sent again to the new sidecar and finishes
    assert out["second"] == "committed"
    check_exact_or_clean(out, s3_client, s3_bucket, "first")


@pytest.mark.slow
def test_an_executors_sidecar_killed_in_local_cluster(s3_server, s3_bucket, s3_client, tmp_path):
    out = run(SCRIPT, s3_server, s3_bucket, "local-cluster[2,1,1024]", crash="before:fs.close_write",
              tmp_path=tmp_path)
    assert fired(tmp_path) == ["before-fs.close_write"]
    assert out["second"] == "committed" and out["second_ids"] == 400
    check_exact_or_clean(out, s3_client, s3_bucket, "first")
