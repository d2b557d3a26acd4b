"""A SparkSession (local[2]) writing through s3commit to the test S3 server, kept across tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import CHILD_TIMEOUT

pyspark = pytest.importorskip("pyspark")

if shutil.which("java") is None:  # pragma: no cover - the README's machines have a JDK
    pytest.skip("PySpark tests need a JDK (java not found)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""A test's Spark driver lives minutes and runs each path a few times: C1 alone compiles what it runs for a fraction
of C2's CPU, and one GC thread leaves the cores to the tests (three drivers share two cores with the servers)."""


def spark_builder(master: str, server, **options):
    from pyspark.sql import SparkSession

    from s3commit.spark import configure

    builder = (SparkSession.builder.master(master).appName("s3commit-tests")
               .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.sources.partitionOverwriteMode", "static"))
    return configure(builder, endpoint_url=server.endpoint_url, region="us-east-1", access_key="testing",
                     secret_key="testing", **options)


class _Sessions:
    """The one SparkSession a test process can have, bound to one S3 server: a test on another server (the
    modules that also run on SeaweedFS) gets a new session, built for that server's endpoint."""

    def __init__(self) -> None:
        self.endpoint: str | None = None
        self.session = None

    def for_server(self, server):
        if self.session is None or self.endpoint != server.endpoint_url:
            self.stop()
            self.session = spark_builder("local[2]", server).getOrCreate()
            self.session.sparkContext.setLogLevel("ERROR")
            self.endpoint = server.endpoint_url
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.session, self.endpoint = None, None


@pytest.fixture(scope="session")
def _spark_sessions():
    sessions = _Sessions()
    yield sessions
    sessions.stop()


@pytest.fixture
def spark(_spark_sessions, s3_server):
    """A SparkSession (local[2]) writing through s3commit to this test's S3 server; one per server at a time,
    kept across tests (pytest's session scope would keep a session bound to another server's endpoint)."""
    return _spark_sessions.for_server(s3_server)


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


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel as users get it: ``pip wheel --no-deps`` of this checkout (the in-tree backend prebuilds the
    bridge jars; the 4.x jar against this very PySpark when it is the one the build targets)."""
    dist = tmp_path_factory.mktemp("dist")
    env = dict(os.environ)
    if pyspark.__version__ == "4.3.0":
        env["S3COMMIT_BUILD_PYSPARK_4"] = str(Path(pyspark.__file__).parent / "jars")
    # Built from a copy: the backend writes its jars into the tree it builds (s3commit/jars/) and removes them
    # after, and this checkout is the editable install every other test worker runs, whose jar_path() would
    # take such a jar while it exists (a JVM then started on a jar the build went on to delete).
    source = tmp_path_factory.mktemp("source") / "s3commit"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".tox", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache",
        ".ruff_cache", "spark-warehouse", "results"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
                           capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT, check=False)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
    return next(dist.glob("s3commit-*.whl"))
