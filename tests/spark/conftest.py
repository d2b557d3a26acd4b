"""A session-scoped SparkSession (local[2]) writing through s3commit to the test S3 server."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

pyspark = pytest.importorskip("pyspark")

if shutil.which("java") is None:  # pragma: no cover - the README's machines have a JDK
    pytest.skip("PySpark tests need a JDK (java not found)", allow_module_level=True)

DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"


def spark_builder(master: str, server, **options):
    from pyspark.sql import SparkSession

    from s3commit.spark import configure

    builder = (SparkSession.builder.master(master).appName("s3commit-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.sources.partitionOverwriteMode", "static"))
    return configure(builder, endpoint_url=server.endpoint_url, region="us-east-1", access_key="testing",
                     secret_key="testing", **options)


@pytest.fixture(scope="session")
def spark(s3_server):
    session = spark_builder("local[2]", s3_server).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def committer(spark, request):
    """Select the committer for one test (the SQL conf reaches the job's Hadoop configuration)."""
    name = getattr(request, "param", "magic")
    spark.conf.set("fs.s3a.committer.name", name)
    yield name
    for key in ("fs.s3a.committer.name", "fs.s3a.committer.staging.conflict-mode",
                "spark.sql.sources.partitionOverwriteMode", "mapreduce.fileoutputcommitter.algorithm.version"):
        spark.conf.unset(key)
    spark.conf.set("spark.sql.sources.commitProtocolClass", "s3commit.spark.S3CommitProtocol")


@pytest.fixture(autouse=True)
def _python_for_children(monkeypatch):
    # Child Pythons (and their JVMs) start sidecars with this interpreter; restored after each test.
    monkeypatch.setenv("S3COMMIT_PYTHON", os.environ.get("S3COMMIT_PYTHON") or sys.executable)
