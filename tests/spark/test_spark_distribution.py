"""s3commit on a Spark distribution (``SPARK_HOME`` with ``jars/``, ``pyspark`` under ``$SPARK_HOME/python`` with
no jars beside it: EMR, Dataproc, the Spark images), laid out from the pip PySpark (``tests/spark/distribution.py``).
``configure()``, ``spark_conf()`` and ``python -m s3commit.spark conf`` find Spark's jars there as PySpark's own
launcher does, and say where they looked when there are none."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed import CHILD_TIMEOUT
from tests.spark import distribution

pytestmark = pytest.mark.spark

PROBE = """
    import json, pyspark
    from s3commit import spark as s3spark
    from s3commit.spark import jar as s3jar

    class Builder:
        def __init__(self):
            self._options = {}

        def config(self, key, value):
            self._options[key] = value
            return self

    conf = s3spark.spark_conf(region="eu-west-1")
    built = s3spark.configure(Builder(), region="eu-west-1")._options
    print(json.dumps({"pyspark": pyspark.__file__, "jars": str(s3jar.spark_jars_dir()), "jar": conf["spark.jars"],
                      "same": built == conf}))
"""


@pytest.fixture(scope="module")
def spark_home(tmp_path_factory) -> Path:
    return distribution.build(tmp_path_factory.mktemp("dist") / "spark")


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in env.items() if k not in ("S3COMMIT_JAR", "PYSPARK_PYTHON")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=CHILD_TIMEOUT, check=False)


def probe(env: dict[str, str], cwd: Path) -> dict:
    result = run(["-c", textwrap.dedent(PROBE)], env, cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_configure_spark_conf_and_conf_find_the_jars_through_spark_home(spark_home, tmp_path):
    env = distribution.environment(spark_home)
    found = probe(env, tmp_path)
    # The distribution's pyspark (no jars/ beside it) is the one imported; Spark's jars are SPARK_HOME's.
    assert Path(found["pyspark"]).parent == spark_home / "python" / "pyspark"
    assert not (spark_home / "python" / "pyspark" / "jars").exists()
    assert found["jars"] == str(spark_home / "jars")
    assert Path(found["jar"]).is_file() and found["same"]
    printed = run(["-m", "s3commit.spark", "conf", "--region", "eu-west-1"], env, tmp_path)
    assert printed.returncode == 0, printed.stderr[-3000:]
    assert printed.stdout.split()[:2] == ["--jars", found["jar"]]


def test_without_spark_home_pysparks_own_search_finds_the_distribution(spark_home, tmp_path):
    env = distribution.environment(spark_home)
    del env["SPARK_HOME"]  # only PYTHONPATH=$SPARK_HOME/python, as some images set it
    assert probe(env, tmp_path)["jars"] == str(spark_home / "jars")


def test_a_pyspark_with_no_spark_anywhere_says_where_it_looked(spark_home, tmp_path):
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "python").symlink_to(spark_home / "python")  # the python/ tree alone: no bin/, no jars/
    env = distribution.environment(lonely)
    del env["SPARK_HOME"]
    result = run(["-c", "from s3commit.spark import spark_conf; spark_conf()"], env, tmp_path)
    assert result.returncode == 1
    assert "BridgeBuildError: no Spark jars found for PySpark" in result.stderr
    assert "SPARK_HOME (unset)" in result.stderr and "find_spark_home: nothing found" in result.stderr
    assert "set SPARK_HOME to the distribution's directory" in result.stderr
    printed = run(["-m", "s3commit.spark", "conf"], env, tmp_path)
    assert printed.returncode == 2 and printed.stdout == ""
    assert printed.stderr.startswith("python -m s3commit.spark conf: no Spark jars found"), printed.stderr


LOCAL_APP = """
    import json, sys
    from pyspark.sql import SparkSession
    from s3commit.spark import configure

    endpoint, bucket, work = sys.argv[1:4]
    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.sql.warehouse.dir", f"{work}/warehouse")
               .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                       f"jdbc:derby:;databaseName={work}/metastore_db;create=true")
               .config("spark.hadoop.hive.exec.dynamic.partition.mode", "nonstrict").enableHiveSupport())
    spark = configure(builder, endpoint_url=endpoint, region="us-east-1", access_key="testing",
                      secret_key="testing", rdd_writes=False).getOrCreate()
    frame = spark.range(8).selectExpr("id", "cast(id % 2 as int) AS p")
    frame.write.partitionBy("p").parquet(f"s3a://{bucket}/dist")
    pairs = spark.sparkContext.parallelize([("a", "1"), ("b", "2"), ("c", "3")], 2)
    pairs.saveAsNewAPIHadoopFile(f"s3a://{bucket}/rdd", "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
                                 keyClass="org.apache.hadoop.io.Text", valueClass="org.apache.hadoop.io.Text")
    frame.write.parquet(f"file://{work}/local")
    frame.write.partitionBy("p").saveAsTable("managed")
    spark.sql("CREATE TABLE hive_t (id BIGINT) PARTITIONED BY (p INT) STORED AS TEXTFILE")
    spark.sql("INSERT INTO hive_t PARTITION (p=1) VALUES (1), (3)")
    spark.sql("INSERT OVERWRITE TABLE hive_t PARTITION (p) SELECT id, p FROM managed WHERE p = 0")
    spark.sql("INSERT OVERWRITE TABLE hive_t PARTITION (p=1) VALUES (5)")
    read = lambda frame: sorted(tuple(r) for r in frame.collect())
    print("RESULT " + json.dumps({
        "home": spark._jvm.java.lang.System.getenv("SPARK_HOME"), "jars": spark.conf.get("spark.jars"),
        "protocol": spark.conf.get("spark.sql.sources.commitProtocolClass"),
        "rdd": sorted(spark.sparkContext.textFile(f"s3a://{bucket}/rdd").collect()),
        "dist": read(spark.read.parquet(f"s3a://{bucket}/dist")), "local": read(spark.read.parquet(f"file://{work}/local")),
        "managed": read(spark.table("managed")), "hive": read(spark.table("hive_t")),
        "provider": spark.sql("DESCRIBE TABLE EXTENDED hive_t").where("col_name = 'Provider'").first().data_type}))
    spark.stop()
"""


SPARK_47618 = {
    "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
    "spark.hadoop.fs.s3a.committer.name": "magic",
    "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a": "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory",
    "spark.sql.parquet.output.committer.class": "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter",
    "spark.sql.sources.commitProtocolClass": "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
}
"""What Spark 4.1+ sets where spark-hadoop-cloud is on the classpath (and images built with it carry in their
spark-defaults.conf): S3A's magic committer bound everywhere, hadoop-aws's factory for s3a:// RDD writes."""


@pytest.mark.slow  # a JVM with Hive's metastore: about 40 s
def test_a_local_session_on_the_distribution_writes_s3a_local_paths_and_hive_tables(
        spark_home, tmp_path, s3_server, s3_bucket, s3_client):
    from s3commit.testing.assertions import assert_no_pending_uploads

    env = distribution.environment(spark_home)
    env["S3COMMIT_PYTHON"] = sys.executable
    # The cluster's spark-defaults.conf presets S3A's committers (SPARK-47618); s3commit's settings win, and
    # with rdd_writes=False the s3a:// RDD write goes to Hadoop's FileOutputCommitter, not hadoop-aws's factory
    # (which this Spark does not even have). Parquet's committer class is left out: it is spark-hadoop-cloud's,
    # absent here, and serves only destinations outside S3 (Spark's protocol), as without s3commit.
    (tmp_path / "conf").mkdir()
    presets = {k: v for k, v in SPARK_47618.items() if k != "spark.sql.parquet.output.committer.class"}
    (tmp_path / "conf" / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in presets.items()))
    env["SPARK_CONF_DIR"] = str(tmp_path / "conf")
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(LOCAL_APP))
    result = run([str(app), s3_server.endpoint_url, s3_bucket, str(tmp_path)], env, tmp_path)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-6000:]
    out = json.loads(lines[0][7:])
    rows = [[i, i % 2] for i in range(8)]
    assert out["home"] == str(spark_home) and Path(out["jars"]).is_file()
    assert out["protocol"] == "s3commit.spark.S3CommitProtocol" and out["rdd"] == ["a\t1", "b\t2", "c\t3"]
    from s3commit.testing.assertions import list_keys

    rdd = list_keys(s3_client, s3_bucket, "rdd/")  # Hadoop's FileOutputCommitter (renames), as rdd_writes=False says
    assert rdd and not [k for k in rdd if "__magic" in k or "_temporary" in k], rdd
    assert out["dist"] == rows and out["local"] == rows and out["managed"] == rows
    assert out["provider"] == "hive" and out["hive"] == [[0, 0], [2, 0], [4, 0], [5, 1], [6, 0]]
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="dist/_SUCCESS")["Body"].read())
    assert success["committer"] == "magic"
    assert (tmp_path / "local" / "_SUCCESS").stat().st_size == 0  # FileOutputCommitter's, as without s3commit
    assert_no_pending_uploads(s3_client, s3_bucket)


CLUSTER_APP = """
    import json, sys
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("s3commit-distribution").getOrCreate()
    dest, local = sys.argv[1:3]
    frame = spark.range(0, 2000, numPartitions=4).selectExpr("id", "id % 5 AS p")
    frame.write.partitionBy("p").parquet(dest)
    frame.write.parquet("file://" + local)
    back = spark.read.parquet(dest).selectExpr("count(*) AS n", "count(DISTINCT id) AS d").first()
    there = spark.read.parquet("file://" + local).count()
    print("RESULT " + json.dumps({"s3a": [back.n, back.d], "local": there}))
    spark.stop()
"""


@pytest.mark.slow
@pytest.mark.cluster
def test_a_standalone_cluster_started_from_the_distribution_runs_the_printed_arguments(
        spark_home, tmp_path, s3_server, s3_bucket, s3_client):
    from s3commit.testing.assertions import assert_no_pending_uploads
    from tests.spark.test_spark_standalone import standalone

    env = {k: v for k, v in distribution.environment(spark_home).items()
           if k not in ("S3COMMIT_JAR", "S3COMMIT_PYTHON", "PYSPARK_PYTHON")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    printed = run(["-m", "s3commit.spark", "conf", "--endpoint-url", s3_server.endpoint_url, "--region",
                   "us-east-1"], env, tmp_path)
    assert printed.returncode == 0, printed.stderr
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(CLUSTER_APP))
    with standalone(tmp_path, env, home=spark_home, workers=1) as url:
        command = [str(spark_home / "bin" / "spark-submit"), "--master", url, "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.driver.host=127.0.0.1", "--conf", f"spark.pyspark.python={sys.executable}",
                   "--executor-memory", "768m", *shlex.split(printed.stdout), str(app),
                   f"s3a://{s3_bucket}/cluster", str(tmp_path / "local")]
        result = subprocess.run(command, capture_output=True, text=True, env=dict(env, SPARK_LOCAL_IP="127.0.0.1"),
                                cwd=tmp_path, timeout=CHILD_TIMEOUT, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-6000:]
    assert json.loads(lines[0][7:]) == {"s3a": [2000, 2000], "local": 2000}
    # The master and worker logs name the distribution as their Spark home (not the pip package).
    assert str(spark_home) in (tmp_path / "worker-1.log").read_text()
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="cluster/_SUCCESS")["Body"].read())
    assert success["committer"] == "magic"
    assert_no_pending_uploads(s3_client, s3_bucket)
