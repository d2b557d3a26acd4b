"""Executors that come and go, on a Spark standalone cluster (a Master and two Workers on 127.0.0.1, one executor
at a time): a decommissioned executor migrates its shuffle blocks through s3commit to S3 fallback storage and
exits; the next job reads them from S3 with one ranged GET per index entry pair and per block, no map task runs
again, the result is exact, and the application's end empties the fallback storage.

Two applications, two ways in: ``spark-submit`` of an application on ``s3a://`` with the arguments ``python -m
s3commit.spark conf --fallback-storage`` prints and ``--files s3a://...`` (the driver's submit fetches the
application and each executor's start fetches the file, both from threads Spark owns, through Hadoop's
Configuration: the jar on the classpath is what makes them work), its executor sent SIGPWR; then ``configure(...,
fallback_storage=..., executor_jar=<a path the nodes do not have>)`` from ``python app.py``, its executor's Worker
decommissioned: the plugin makes the bridge's classes visible to the decommissioning thread."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s3commit.testing.assertions import list_keys
from testbed import CHILD_TIMEOUT
from testbed.standalone import StandaloneCluster, spark_home, wait_gone

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.cluster]

ROWS, MAPS, REDUCES, KEYS = 20_000, 8, 4, 97

APP = """
    import json, os, signal, sys, time
    from operator import add

    import boto3
    from pyspark import SparkFiles
    from pyspark.sql import SparkSession

    from testbed.standalone import executor_pids, parent_pid, wait_gone

    how, endpoint, bucket, prefix, master = sys.argv[1:6]
    builder = SparkSession.builder.appName("s3commit-decommission")
    if how == "worker":  # configure() in the application, the executors' jar at a path their nodes do not have
        from s3commit.spark import configure
        builder = configure(builder.master(master).config("spark.ui.enabled", "false")
                            .config("spark.driver.host", "127.0.0.1").config("spark.pyspark.python", sys.executable)
                            .config("spark.executor.memory", "768m")
                            .config("spark.storage.decommission.replicationReattemptInterval", "1s")
                            # executors that come and go: at most one at a time, one asked for when tasks wait
                            .config("spark.dynamicAllocation.enabled", "true")
                            .config("spark.dynamicAllocation.shuffleTracking.enabled", "true")
                            .config("spark.dynamicAllocation.maxExecutors", "1"),
                            endpoint_url=endpoint, region="us-east-1", fallback_storage=f"s3a://{bucket}/{prefix}",
                            executor_jar="/nonexistent/s3commit-bridge.jar")
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    maps = sc.accumulator(0)

    def map_side(index, rows):
        maps.add(1)  # once per map task run
        for x in rows:
            yield x % KEYS, x

    pairs = sc.parallelize(range(ROWS), MAPS).mapPartitionsWithIndex(map_side).reduceByKey(add, REDUCES)
    expected = sorted({k: sum(x for x in range(ROWS) if x % KEYS == k) for k in range(KEYS)}.items())
    first = sorted(pairs.collect())
    out = {"first": first == expected, "maps_first": maps.value}
    if how == "executor":  # a file the executor fetched from S3 when it started
        out["lookup"] = sc.parallelize([0], 1).map(lambda _: open(SparkFiles.get("lookup.txt")).read()).first()

    victims = executor_pids(sc.applicationId)
    out["victims"] = len(victims)
    os.kill(victims[0] if how == "executor" else parent_pid(victims[0]), signal.SIGPWR)
    out["gone"] = wait_gone(victims, 150)

    # What the fallback storage holds now: each map output's index (the offsets of its reduce partitions).
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    app = f"{prefix}{sc.applicationId}/"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=app).get("Contents", [])
    out["migrated"] = {o["Key"]: o["Size"] for o in listed}
    out["offsets"] = {}
    for key in (o["Key"] for o in listed if o["Key"].endswith(".index")):
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        name = key.rsplit("/", 1)[1][:-len(".index")]  # shuffle_<shuffle>_<map>_0 (each file under a hash dir)
        out["offsets"][name] = [int.from_bytes(body[i:i + 8], "big") for i in range(0, len(body), 8)]
    out["mark"] = time.time()

    second = sorted(pairs.collect())
    out.update(second=second == expected, maps_second=maps.value, app=app,
               driver_pid=int(spark._jvm.java.lang.ProcessHandle.current().pid()))
    print("RESULT " + json.dumps(out), flush=True)
    if how == "executor":
        spark.stop()  # else the JVM's shutdown hook stops the context when this Python exits: the same clean-up
"""


def app_source() -> str:
    return textwrap.dedent(APP).replace("ROWS", str(ROWS)).replace("MAPS", str(MAPS)).replace(
        "REDUCES", str(REDUCES)).replace("KEYS", str(KEYS))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # One cluster for both applications (the worker decommissioned last): its start is a third of each test's time.
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "S3COMMIT_PYTHON", "PYSPARK_PYTHON")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    # spark.decommission.enabled on the Workers: SIGPWR decommissions a Worker and its executors.
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), worker_options="-Dspark.decommission.enabled=true",
                           env=env) as started:
        yield started


def driver_env(cluster, **extra: str) -> dict[str, str]:
    """The driver's environment: the cluster's, and the checkout's root on ``PYTHONPATH`` for the application's
    ``testbed`` helpers (repo-only, not in the wheel); executors never import them."""
    path = os.pathsep.join(p for p in (str(REPO), cluster.env.get("PYTHONPATH", "")) if p)
    return {**cluster.env, "PYTHONPATH": path, **extra}


def result_of(run: subprocess.CompletedProcess) -> dict:
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-8000:]
    return json.loads(lines[0][7:])


def name_of(key: str) -> str:
    """``shuffle_<shuffle>_<map>_0`` of a migrated file's key (``<prefix><app>/<shuffle>/<hash>/<name>.index``)."""
    return key.rsplit("/", 1)[1].rsplit(".", 1)[0]


def assert_decommissioned_to_s3(out: dict, s3_client, bucket: str, prefix: str) -> None:
    assert out["first"] and out["second"], "exact results before and after"
    assert out["victims"] == 1 and out["gone"], "the decommissioned executor exited once its blocks were migrated"
    assert out["maps_first"] == out["maps_second"] == MAPS, "no map task ran again"
    data = {name_of(k): size for k, size in out["migrated"].items() if k.endswith(".data")}
    assert sorted(out["offsets"]) == sorted(data) and len(out["migrated"]) == 2 * MAPS
    assert len(out["offsets"]) == MAPS and all(len(o) == REDUCES + 1 for o in out["offsets"].values())
    assert all(data[name] == offsets[-1] for name, offsets in out["offsets"].items())
    # fallbackStorage.cleanUp: the application's end removed its blocks
    assert list_keys(s3_client, bucket, prefix) == []


def test_a_decommissioned_executor_hands_its_shuffle_to_s3_and_no_map_task_runs_again(
        cluster, tmp_path, s3_server, s3_bucket, s3_client):
    prefix = "fallback/"
    # The application and a file for the executors, both on S3: spark-submit's download of the one and each
    # executor's start-up fetch of the other go through Hadoop's Configuration in threads Spark owns.
    s3_client.put_object(Bucket=s3_bucket, Key="apps/decommission_app.py", Body=app_source().encode())
    s3_client.put_object(Bucket=s3_bucket, Key="files/lookup.txt", Body=b"fetched by the executor at start")
    printed = subprocess.run([sys.executable, "-m", "s3commit.spark", "conf", "--endpoint-url", s3_server.endpoint_url,
                              "--region", "us-east-1", "--fallback-storage", f"s3a://{s3_bucket}/{prefix}"],
                             capture_output=True, text=True, check=True).stdout
    s3_server.reset_stats()
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url, "--conf", "spark.ui.enabled=false",
               "--conf", "spark.driver.host=127.0.0.1", "--conf", f"spark.pyspark.python={sys.executable}",
               "--conf", "spark.cores.max=1", "--executor-memory", "768m",
               "--conf", "spark.storage.decommission.replicationReattemptInterval=1s",
               "--files", f"s3a://{s3_bucket}/files/lookup.txt", *shlex.split(printed),
               f"s3a://{s3_bucket}/apps/decommission_app.py",
               "executor", s3_server.endpoint_url, s3_bucket, prefix, cluster.url]
    # spark-submit fetches s3a:// resources before it hands the driver its settings (spark.s3commit.python): the
    # driver's sidecar then finds its Python in the environment, as for a packed virtualenv (docs/spark.md).
    out = result_of(subprocess.run(command, capture_output=True, text=True, env=driver_env(
                                   cluster, S3COMMIT_PYTHON=sys.executable), cwd=tmp_path, timeout=CHILD_TIMEOUT,
                                   check=False))
    assert out["lookup"] == "fetched by the executor at start"
    assert_decommissioned_to_s3(out, s3_client, s3_bucket, prefix)
    log = [r for r in s3_server.request_log() if r["key"].startswith(out["app"])]
    puts = [r["key"] for r in log if r["operation"] == "PutObject"]
    assert sorted(puts) == sorted(out["migrated"]), "each index and data file migrated once"
    # The second job's reads: per block one GET of its two index entries and one GET of exactly the block.
    gets = [(r["key"], r["range"]) for r in log if r["operation"] == "GetObject" and r["range"]]
    index_gets = sorted((name_of(key), rng) for key, rng in gets if key.endswith(".index"))
    data_gets = sorted((name_of(key), rng) for key, rng in gets if key.endswith(".data"))
    blocks = sorted((name, r) for name, offsets in out["offsets"].items() for r in range(REDUCES)
                    if offsets[r + 1] > offsets[r])
    assert index_gets == sorted((name, f"bytes={8 * r}-{8 * r + 15}") for name, r in blocks)
    assert data_gets == sorted((name, f"bytes={out['offsets'][name][r]}-{out['offsets'][name][r + 1] - 1}")
                               for name, r in blocks)
    assert len(blocks) == MAPS * REDUCES


def test_a_decommissioned_worker_hands_its_executors_shuffle_to_s3_through_the_plugin(
        cluster, tmp_path, s3_server, s3_bucket, s3_client):
    # configure() from `python app.py` (the driver's JVM started with the jar on its classpath), the executors'
    # classpath naming a jar their nodes do not have: the plugin makes the classes visible to decommissioning.
    prefix = "worker-fallback/"
    app = tmp_path / "app.py"
    app.write_text(app_source())
    command = [sys.executable, str(app), "worker", s3_server.endpoint_url, s3_bucket, prefix, cluster.url]
    out = result_of(subprocess.run(command, capture_output=True, text=True, env=driver_env(cluster),
                                   cwd=tmp_path, timeout=CHILD_TIMEOUT, check=False))
    # The application ended without stopping its context: the driver JVM's shutdown hook did, emptying the storage.
    assert wait_gone([out["driver_pid"]], 120)
    assert_decommissioned_to_s3(out, s3_client, s3_bucket, prefix)
    app_id = out["app"].rstrip("/").rsplit("/", 1)[1]
    executor_logs = "".join(p.read_text() for p in Path(cluster.workdir).glob(f"work-*/{app_id}/*/stderr"))
    assert "/nonexistent/s3commit-bridge.jar" in executor_logs  # the executors' classpath as launched
    assert "the bridge's Hadoop classes are registered for Hadoop configurations" in executor_logs
    workers = "".join(p.read_text() for p in cluster.logs[1:])
    assert "decommission" in workers.lower()
