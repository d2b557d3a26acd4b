"""One Spark application in a process group of its own that overwrites a table of 40 files and is SIGKILLed
(Python driver, JVM and sidecar together) at a chosen moment:

- ``tasks``: in its task phase (four tasks committed, the others waiting for the kill);
- ``commit``: in its job commit, once the first file of the job is visible (a watcher thread in the driver);
- ``never``: it commits and prints one JSON line.

    python tests/spark/spark_dying_child.py ENDPOINT DEST TAG COMMITTER WHEN MARKER_DIR LIVENESS
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.spark.conftest import spark_builder

FILES = 40


class Server:
    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url


def some_tasks_wait(marker_dir: str):
    """The first four tasks write and commit (their uploads pending until the job commits); every later one waits
    for the kill once it has its rows, saying so with a file in ``marker_dir``."""
    def run(index, rows):
        kept = list(rows)
        if index >= 4:
            Path(marker_dir, f"task-{index}").touch()
            time.sleep(3600)
        return iter(kept)
    return run


def s3_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def data_files(client, dest: str) -> set[str]:
    bucket, _, prefix = dest.removeprefix("s3a://").partition("/")
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    return {o["Key"] for o in listed if "/__" not in f"/{o['Key']}" and o["Key"].endswith(".parquet")}


def kill_at_first_new_file(endpoint: str, dest: str, before: set[str]) -> None:
    """SIGKILL this whole process group (driver, JVM, sidecar) once a file of this job is visible: mid-commit."""
    client = s3_client(endpoint)
    while not data_files(client, dest) - before:
        time.sleep(0.005)
    os.killpg(0, signal.SIGKILL)


def main() -> int:
    endpoint, dest, tag, committer, when, marker_dir, liveness = sys.argv[1:8]
    spark = (spark_builder("local[2]", Server(endpoint), committer=committer,
                           extra={"s3commit.job.liveness": liveness})
             .appName(f"dying-{tag}").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.range(0, 40_000, numPartitions=FILES).selectExpr("id", f"'{tag}' as writer")
    if when == "tasks":
        frame = spark.createDataFrame(frame.rdd.mapPartitionsWithIndex(some_tasks_wait(marker_dir)), frame.schema)
    if when == "commit":
        before = data_files(s3_client(endpoint), dest)
        threading.Thread(target=kill_at_first_new_file, args=(endpoint, dest, before), daemon=True).start()
    frame.write.mode("overwrite").parquet(dest)
    print(json.dumps({"ok": True, "tag": tag}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
