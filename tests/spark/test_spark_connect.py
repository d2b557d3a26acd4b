"""Spark Connect: a server started with the arguments ``python -m s3commit.spark conf`` prints (its JVM is the
driver, with its sidecar), and a Connect client, which cannot set those settings itself, writing and
overwriting a table through the magic committer."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect] (s3commit[connect])")
pyspark = pytest.importorskip("pyspark")
if int(pyspark.__version__.split(".")[0]) < 4:
    pytest.skip("the Spark Connect server ships with PySpark 4.x", allow_module_level=True)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.connect]

CLIENT = """
    import json, sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    dest = sys.argv[2]
    spark.range(100).selectExpr("id", "id % 5 AS p").write.partitionBy("p").parquet(dest)
    first = spark.read.parquet(dest).count()
    spark.range(100, 130).selectExpr("id", "id % 5 AS p").write.mode("overwrite").partitionBy("p").parquet(dest)
    ids = sorted(r.id for r in spark.read.parquet(dest).collect())
    print("RESULT " + json.dumps({"first": first, "ids": ids}))
    spark.stop()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def connect_server(tmp_path, s3_server):
    printed = subprocess.run([sys.executable, "-m", "s3commit.spark", "conf", "--endpoint-url",
                              s3_server.endpoint_url, "--region", "us-east-1"], capture_output=True, text=True,
                             check=True).stdout
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("S3COMMIT_PYTHON", "PYSPARK_PYTHON", "SPARK_HOME")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    # What sbin/start-connect-server.sh runs, in the foreground so that the test owns (and kills) the process.
    command = [str(submit), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
               *shlex.split(printed), "spark-internal"]
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-4000:]
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the Spark Connect server did not listen in 180 s:\n"
                        + (tmp_path / "server.log").read_text()[-4000:])
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()
        log.close()


def test_a_connect_client_writes_and_overwrites_through_the_magic_committer(connect_server, tmp_path, s3_bucket,
                                                                            s3_client):
    client = tmp_path / "client.py"
    client.write_text(textwrap.dedent(CLIENT))
    env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
    result = subprocess.run([sys.executable, str(client), connect_server, f"s3a://{s3_bucket}/connected"],
                            capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-4000:]
    assert json.loads(lines[0][7:]) == {"first": 100, "ids": list(range(100, 130))}
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="connected/_SUCCESS")["Body"].read())
    assert success["committer"] == "magic"
    data = [k for k in list_keys(s3_client, s3_bucket, "connected/") if k.endswith(".parquet")]
    assert sorted(success["filenames"]) == sorted(f"/{k}" for k in data)  # exactly the overwrite's files
    assert not [k for k in list_keys(s3_client, s3_bucket, "connected/") if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)
