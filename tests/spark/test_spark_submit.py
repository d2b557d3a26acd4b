"""Deployment as users do it: ``spark-submit`` with the arguments ``python -m s3commit.spark conf`` prints, and no
``configure()`` in the application (the driver's sidecar Python comes from ``spark.s3commit.python``)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.deploy]

APP = """
    import json, sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("submitted").getOrCreate()
    dest = sys.argv[1]
    spark.range(1000).selectExpr("id", "id % 4 AS p").repartition(3).write.partitionBy("p").parquet(dest)
    rows = spark.read.parquet(dest).collect()
    print("RESULT " + json.dumps({"rows": len(rows), "ids": len({r.id for r in rows})}))
    spark.stop()
"""


def test_spark_submit_with_the_printed_arguments_commits_through_the_magic_committer(
        tmp_path, s3_server, s3_bucket, s3_client):
    import pyspark

    printed = subprocess.run([sys.executable, "-m", "s3commit.spark", "conf", "--endpoint-url",
                              s3_server.endpoint_url, "--region", "us-east-1"], capture_output=True, text=True,
                             check=True).stdout
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP))
    env = {k: v for k, v in os.environ.items() if k not in ("S3COMMIT_PYTHON", "PYSPARK_PYTHON",
                                                            "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    command = [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.pyspark.python={sys.executable}", *shlex.split(printed), str(app),
               f"s3a://{s3_bucket}/submitted"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=CHILD_TIMEOUT,
                            check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-4000:]
    assert json.loads(lines[0][7:]) == {"rows": 1000, "ids": 1000}
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="submitted/_SUCCESS")["Body"].read())
    assert success["committer"] == "magic" and len(success["filenames"]) >= 4
    assert not [k for k in list_keys(s3_client, s3_bucket, "submitted/") if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)
