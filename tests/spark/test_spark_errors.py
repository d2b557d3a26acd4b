"""Clear errors before any task runs: bad committer, missing bucket, unreachable endpoint, broken sidecar."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

from s3commit import ConfigError
from s3commit.spark import hadoop_options, jar_path
from s3commit.testing.assertions import list_keys
from testbed import CHILD_TIMEOUT
from testbed.fixtures import every_server_fixture

pytestmark = pytest.mark.spark
s3_server = every_server_fixture()


def test_unknown_committer_is_refused_before_spark_starts():
    with pytest.raises(ConfigError, match="Valid values are: magic, directory, partitioned"):
        hadoop_options(committer="file")


def test_unknown_committer_set_at_runtime_fails_the_job_setup(spark, committer, s3_bucket, s3_client):
    spark.conf.set("fs.s3a.committer.name", "fast")
    with pytest.raises(Exception, match="'fast' is not a valid committer name"):
        spark.range(3).write.parquet(f"s3a://{s3_bucket}/bad-name")
    assert list_keys(s3_client, s3_bucket) == []


def test_unknown_conflict_mode_fails_the_job_setup(spark, committer, s3_bucket):
    spark.conf.set("fs.s3a.committer.staging.conflict-mode", "merge")
    with pytest.raises(Exception, match="'merge' is not a valid"):
        spark.range(3).write.parquet(f"s3a://{s3_bucket}/bad-mode")


def test_missing_bucket_fails_before_any_task(spark, committer):
    with pytest.raises(Exception, match="does not exist") as err:
        spark.range(3).write.parquet("s3a://no-such-bucket-s3commit/x")
    assert "Task" not in str(err.value).split("\n")[0]


def run_child(script: str, env: dict[str, str] | None = None,
              timeout: int = CHILD_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, check=False)


CHILD = """
    import sys
    from pyspark.sql import SparkSession
    from s3commit.spark import configure
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = configure(builder, endpoint_url=sys.argv[1] if len(sys.argv) > 1 else "{endpoint}", region="us-east-1",
                      access_key="testing", secret_key="testing",
                      extra={{"fs.s3a.attempts.maximum": 2}}).getOrCreate()
    try:
        spark.range(3).write.parquet("s3a://{bucket}/child")
        print("WROTE")
    except Exception as err:
        print("FAILED:", " | ".join(line for line in str(err).splitlines() if "Exception" in line)[:4000])
    finally:
        spark.stop()
"""


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
@pytest.mark.server_independent
def test_unreachable_endpoint_is_named_in_the_error(s3_bucket):
    result = run_child(CHILD.format(endpoint="http://127.0.0.1:9", bucket=s3_bucket))
    assert "FAILED:" in result.stdout, result.stderr[-3000:]
    assert "EndpointConnectionError" in result.stdout and "127.0.0.1:9" in result.stdout


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
@pytest.mark.server_independent
def test_sidecar_python_without_s3commit_is_reported(tmp_path, s3_server, s3_bucket):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    result = run_child(CHILD.format(endpoint=s3_server.endpoint_url, bucket=s3_bucket),
                       env={"S3COMMIT_PYTHON": str(bare / "bin" / "python")})
    assert "FAILED:" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "is s3commit installed for that Python" in result.stdout
    assert "No module named" in result.stderr  # the sidecar's own error, in the log


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
@pytest.mark.server_independent
def test_jar_and_package_version_mismatch_is_reported(tmp_path, s3_server, s3_bucket):
    # A jar that says it is another version: the handshake refuses it and names both versions.
    mismatched = tmp_path / "old.jar"
    with zipfile.ZipFile(jar_path()) as src, zipfile.ZipFile(mismatched, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "s3commit-bridge.properties":
                data = b"version=0.0.1\n"
            dst.writestr(item, data)
    result = run_child(CHILD.format(endpoint=s3_server.endpoint_url, bucket=s3_bucket),
                       env={"S3COMMIT_JAR": str(mismatched)})
    assert "FAILED:" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "version mismatch" in result.stdout and "0.0.1" in result.stdout
