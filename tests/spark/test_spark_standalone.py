"""A Spark standalone cluster (a Master and two Workers started with PySpark's own ``bin/spark-class`` on
127.0.0.1) running applications submitted with the arguments ``python -m s3commit.spark conf`` prints: a
partitioned write exact, and a write whose post-shuffle stage loses an executor to SIGKILL (its map output is
lost with it: fetch failures, the map stage re-run, task re-attempts) with every row exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster]

HOME = Path(pyspark.__file__).parent

APP = """
    import json, os, signal, sys
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    spark = SparkSession.builder.appName("s3commit-cluster").getOrCreate()
    dest, marker, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def kill_my_executor_once(value):
        # In the stage after the shuffle: the first task to get here SIGKILLs its own executor's JVM.
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return value
        os.close(fd)
        pid = os.getpid()
        while pid > 1:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    os.kill(pid, signal.SIGKILL)
                    break
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        return value

    spark.udf.register("kill_my_executor_once", kill_my_executor_once, "long")
    df = spark.range(0, rows, numPartitions=6).selectExpr("id", "id % 7 AS p")
    df.write.partitionBy("p").parquet(dest + "/plain")
    plain = spark.read.parquet(dest + "/plain").selectExpr("count(*) AS n", "count(DISTINCT id) AS d").first()
    shuffled = df.repartition(6, "p").selectExpr("kill_my_executor_once(id) AS id", "p")
    shuffled.write.partitionBy("p").parquet(dest + "/killed")
    killed = spark.read.parquet(dest + "/killed").selectExpr("count(*) AS n", "count(DISTINCT id) AS d").first()
    print("RESULT " + json.dumps({"plain": [plain.n, plain.d], "killed": [killed.n, killed.d],
                                  "marker": os.path.exists(marker)}))
    spark.stop()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([str(HOME / "bin" / "spark-class"), *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(what: str, check, logs: list[Path], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout} s:\n" + "\n".join(p.read_text()[-2000:] for p in logs))


@pytest.fixture
def cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "S3COMMIT_PYTHON", "PYSPARK_PYTHON")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    logs = [tmp_path / "master.log", tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    try:
        processes.append(start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                str(port), "--webui-port", str(free_port())], logs[0], env))
        for n in (1, 2):
            work = tmp_path / f"work-{n}"
            work.mkdir()
            processes.append(start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                                    "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work),
                                    url], logs[n], env))
        wait_for("two workers registered", lambda: logs[0].read_text().count("Registering worker") >= 2, logs)
        yield url, env
    finally:
        for process in reversed(processes):  # each in its own session: the group holds its executors too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_a_standalone_cluster_commits_exactly_once_even_when_an_executor_is_killed_after_a_shuffle(
        cluster, tmp_path, s3_server, s3_bucket, s3_client):
    url, env = cluster
    printed = subprocess.run([sys.executable, "-m", "s3commit.spark", "conf", "--endpoint-url",
                              s3_server.endpoint_url, "--region", "us-east-1"], capture_output=True, text=True,
                             check=True).stdout
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP))
    rows = 60_000
    command = [str(HOME / "bin" / "spark-submit"), "--master", url, "--conf", "spark.ui.enabled=false",
               "--conf", "spark.driver.host=127.0.0.1", "--conf", f"spark.pyspark.python={sys.executable}",
               "--conf", "spark.task.maxFailures=8", "--conf", "spark.stage.maxConsecutiveAttempts=8",
               "--executor-memory", "768m", *shlex.split(printed), str(app), f"s3a://{s3_bucket}/cluster",
               str(tmp_path / "killed-once"), str(rows)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=420,
                            check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-6000:]
    assert json.loads(lines[0][7:]) == {"plain": [rows, rows], "killed": [rows, rows], "marker": True}
    for table in ("plain", "killed"):
        success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key=f"cluster/{table}/_SUCCESS")["Body"].read())
        data = [k for k in list_keys(s3_client, s3_bucket, f"cluster/{table}/") if k.endswith(".parquet")]
        assert success["committer"] == "magic" and sorted(success["filenames"]) == sorted(f"/{k}" for k in data)
    assert not [k for k in list_keys(s3_client, s3_bucket, "cluster/") if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)
    assert "ExecutorLostFailure" in result.stderr or "lost executor" in result.stderr.lower(), \
        "the executor was not lost mid-stage: " + result.stderr[-3000:]
