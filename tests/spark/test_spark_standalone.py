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
from testbed import CHILD_TIMEOUT

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


def start(args: list[str], log: Path, env: dict[str, str], home: Path = HOME) -> subprocess.Popen:
    return subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(what: str, check, logs: list[Path], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout} s:\n" + "\n".join(p.read_text()[-2000:] for p in logs))


@contextlib.contextmanager
def standalone(tmp_path: Path, env: dict[str, str], home: Path = HOME, workers: int = 2):
    """A Master and ``workers`` Workers (one core, 1 GiB each) of the Spark at ``home``, on 127.0.0.1; yields the
    master's URL. Every process is killed with its process group (its executors too) on the way out."""
    env = dict(env, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    logs = [tmp_path / "master.log", *(tmp_path / f"worker-{n}.log" for n in range(1, workers + 1))]
    try:
        processes.append(start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                str(port), "--webui-port", str(free_port())], logs[0], env, home))
        for n in range(1, workers + 1):
            work = tmp_path / f"work-{n}"
            work.mkdir()
            processes.append(start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                                    "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work),
                                    url], logs[n], env, home))
        wait_for(f"{workers} workers registered",
                 lambda: logs[0].read_text().count("Registering worker") >= workers, logs)
        yield url
    finally:
        for process in reversed(processes):  # each in its own session: the group holds its executors too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "S3COMMIT_PYTHON", "PYSPARK_PYTHON")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    with standalone(tmp_path, env) as url:
        yield url, dict(env, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")


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
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=CHILD_TIMEOUT,
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


ARCHIVED_APP = """
    import json, os, sys
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("s3commit-archives").getOrCreate()
    dest, rows = sys.argv[1], int(sys.argv[2])
    spark.range(0, rows, numPartitions=4).selectExpr("id", "id % 3 AS p").write.partitionBy("p").parquet(dest)
    back = spark.read.parquet(dest).selectExpr("count(*) AS n", "count(DISTINCT id) AS d").first()

    def pythons(_):
        # On an executor: this Python worker's interpreter, and the command line of every s3commit sidecar
        # running (the executors' started with the write above).
        sidecars = set()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\\0")
            except OSError:
                continue
            if b"s3commit.bridge" in argv:
                sidecars.add(argv[0].decode())
        import s3commit
        yield (sys.executable, s3commit.__file__, sorted(sidecars))

    seen = spark.sparkContext.parallelize(range(4), 4).mapPartitions(pythons).collect()
    print("RESULT " + json.dumps({"rows": [back.n, back.d], "workers": sorted({s[0] for s in seen}),
                                  "modules": sorted({s[1] for s in seen}),
                                  "sidecars": sorted({p for s in seen for p in s[2]})}))
    spark.stop()
"""


def packed_virtualenv(wheel: Path, tmp_path: Path) -> Path:
    """A virtualenv holding only the built wheel and its dependencies (no PySpark: Spark puts its own on the
    Python workers' path), packed with venv-pack as PySpark's documentation does."""
    env_dir, packed = tmp_path / "packed-env", tmp_path / "packed-env.tar.gz"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    installed = subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    subprocess.run([sys.executable, "-m", "venv_pack", "-p", str(env_dir), "-o", str(packed), "-q"], check=True,
                   timeout=CHILD_TIMEOUT)
    return packed


def test_a_packed_virtualenv_shipped_with_archives_runs_the_executors_python_and_sidecars(
        cluster, wheel, tmp_path, s3_server, s3_bucket, s3_client):
    url, env = cluster
    packed = packed_virtualenv(wheel, tmp_path)
    archived = "./environment/bin/python"  # relative to each executor's working directory, where Spark unpacks
    # The executors' classpath names the archive's own jar, as conf derives it from a Python installed from the
    # wheel; Spark unpacks the archive after the executor started, so the plugin carries Spark's own threads.
    from s3commit import __version__
    from s3commit.spark.jarbuild import fingerprint, shipped_jar_name

    in_archive = next((tmp_path / "packed-env").rglob(shipped_jar_name(__version__, fingerprint(HOME / "jars"))))
    executor_jar = "environment/" + in_archive.relative_to(tmp_path / "packed-env").as_posix()
    printed = subprocess.run([sys.executable, "-m", "s3commit.spark", "conf", "--endpoint-url",
                              s3_server.endpoint_url, "--region", "us-east-1", "--python", archived,
                              "--executor-jar", executor_jar], capture_output=True, text=True, check=True).stdout
    app = tmp_path / "archived_app.py"
    app.write_text(textwrap.dedent(ARCHIVED_APP))
    # Client mode: the driver is this machine's Python (its sidecar too, through S3COMMIT_PYTHON), the
    # executors run the archive's, as PySpark documents (PYSPARK_DRIVER_PYTHON / PYSPARK_PYTHON).
    submit_env = dict(env, S3COMMIT_PYTHON=sys.executable)
    command = [str(HOME / "bin" / "spark-submit"), "--master", url, "--conf", "spark.ui.enabled=false",
               "--conf", "spark.driver.host=127.0.0.1", *shlex.split(printed),
               "--conf", f"spark.pyspark.python={archived}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
               "--archives", f"{packed}#environment", "--executor-memory", "768m",
               str(app), f"s3a://{s3_bucket}/archived", "3000"]
    result = subprocess.run(command, capture_output=True, text=True, env=submit_env, cwd=tmp_path,
                            timeout=CHILD_TIMEOUT, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-6000:]
    out = json.loads(lines[0][7:])
    assert out["rows"] == [3000, 3000]
    # Every Python worker ran the unpacked archive's interpreter and imported s3commit from it ...
    assert out["workers"] and all("/environment/bin/python" in p and "packed-env" not in p for p in out["workers"])
    assert out["modules"] and all("/environment/lib/" in m for m in out["modules"]), out["modules"]
    # ... and the executors' sidecars ran it too (the driver's, this Python, is not seen from an executor's
    # worker unless both share a machine: here they do, so both may be listed).
    assert archived in out["sidecars"], out["sidecars"]
    executor_logs = "".join(p.read_text() for p in tmp_path.glob("work-*/app-*/*/stderr"))
    assert executor_jar in executor_logs and "Hadoop classes are registered for Hadoop configurations" in executor_logs
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="archived/_SUCCESS")["Body"].read())
    data = [k for k in list_keys(s3_client, s3_bucket, "archived/") if k.endswith(".parquet")]
    assert success["committer"] == "magic" and sorted(success["filenames"]) == sorted(f"/{k}" for k in data)
    assert_no_pending_uploads(s3_client, s3_bucket)
