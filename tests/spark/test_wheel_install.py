"""The wheel as users install it: built from this checkout (``pip wheel``, which runs the in-tree build backend
and prebuilds the bridge jars), installed into a fresh virtualenv, run from a directory outside the checkout on
a PATH without ``javac``: the first ``configure(...)`` write works with the jar the wheel carries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads
from testbed import CHILD_TIMEOUT

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.deploy]

ROOT = Path(__file__).resolve().parents[2]

APP = """
    import json, sys
    from pyspark.sql import SparkSession
    from s3commit.spark import configure, jar_path
    spark = configure(SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false"),
                      endpoint_url=sys.argv[1], region="us-east-1").getOrCreate()
    dest = sys.argv[2]
    spark.range(500).selectExpr("id", "id % 3 AS p").write.partitionBy("p").parquet(dest)
    ids = sorted(r.id for r in spark.read.parquet(dest).collect())
    # Spark's own threads: a Hadoop Configuration under the JVM's system class loader resolves the FileSystem.
    system = spark._jvm.java.lang.ClassLoader.getSystemClassLoader()
    conf = spark._jvm.org.apache.hadoop.conf.Configuration(False)
    conf.setClassLoader(system)
    settings = spark.sparkContext.getConf()
    print("RESULT " + json.dumps({"exact": ids == list(range(500)), "jar": jar_path(),
                                  "system": conf.getClassByNameOrNull("s3commit.hadoop.S3FileSystem") is not None,
                                  "classpath": [settings.get("spark.driver.extraClassPath"),
                                                settings.get("spark.executor.extraClassPath")]}))
    spark.stop()
"""


def path_without_javac(tmp_path: Path) -> str:
    """A PATH of symlinks to every command on this PATH except javac."""
    bin_dir = tmp_path / "bin-no-javac"
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = os.path.join(directory, name)
            if name != "javac" and not (bin_dir / name).exists() and os.access(target, os.X_OK):
                (bin_dir / name).symlink_to(os.path.realpath(target))
    return str(bin_dir)


@pytest.mark.parametrize("spark_version", [pyspark.__version__, "3.5.9"])
def test_the_built_wheel_writes_through_spark_on_a_machine_without_javac(wheel, spark_version, tmp_path, s3_server,
                                                                         s3_bucket, s3_client):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel), f"pyspark=={spark_version}"],
                               capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-4000:]
    app = tmp_path / "elsewhere" / "app.py"
    app.parent.mkdir()
    app.write_text(textwrap.dedent(APP))
    run_env = {k: v for k, v in os.environ.items() if k not in ("S3COMMIT_PYTHON", "PYSPARK_PYTHON", "SPARK_HOME",
                                                                 "S3COMMIT_JAR", "PYTHONPATH")}
    run_env.update(PATH=path_without_javac(tmp_path), AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                   XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert shutil.which("javac", path=run_env["PATH"]) is None
    dest = f"from-wheel-{spark_version}"
    result = subprocess.run([str(venv / "bin" / "python"), str(app), s3_server.endpoint_url, f"s3a://{s3_bucket}/{dest}"],
                            capture_output=True, text=True, env=run_env, cwd=app.parent, timeout=CHILD_TIMEOUT,
                            check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-4000:]
    outcome = json.loads(lines[0][7:])
    assert outcome["exact"] is True
    assert outcome["jar"].startswith(str(venv)) and "/s3commit/jars/" in outcome["jar"], outcome["jar"]
    assert ("scala2.12" if spark_version.startswith("3.") else "scala2.13") in outcome["jar"]
    assert outcome["classpath"] == [outcome["jar"], outcome["jar"]] and outcome["system"], outcome
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key=f"{dest}/_SUCCESS")["Body"].read())
    assert success["committer"] == "magic"
    assert not (tmp_path / "cache" / "s3commit").exists(), "nothing was compiled at run time"
    assert_no_pending_uploads(s3_client, s3_bucket)
