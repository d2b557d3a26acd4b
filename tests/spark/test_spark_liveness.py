"""A Spark application SIGKILLed (its Python driver, JVM and sidecar together) in its task phase or in its job
commit, then the next application's overwrite of the same table: it commits exactly, and once the dead job is
silent past ``s3commit.job.liveness`` nothing of it is left (no pending upload, no job directory), with no one
running ``s3commit recover``. Moto behind the simulator with S3-like latency (a commit then takes long enough to
be killed in), magic and directory (issue 47)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = Path(__file__).with_name("spark_dying_child.py")
LIVENESS = "3s"


def run_app(server, dest: str, tag: str, committer: str, when: str, markers: Path) -> subprocess.Popen:
    env = {**os.environ, **server.env()}
    env.pop("SPARK_HOME", None)
    return subprocess.Popen([sys.executable, str(CHILD), server.endpoint_url, dest, tag, committer, when,
                             str(markers), LIVENESS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)


def finished(app: subprocess.Popen, timeout: float = CHILD_TIMEOUT) -> dict:
    out, err = app.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert app.returncode == 0 and lines, out[-2000:] + err[-6000:]
    return json.loads(lines[-1])


def kill_when(app: subprocess.Popen, ready, timeout: float = CHILD_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if app.poll() is not None:
            out, err = app.communicate()
            raise AssertionError(f"the application ended before it was killed: {out[-2000:]}{err[-4000:]}")
        assert time.monotonic() < deadline, "the application never reached the moment to kill it"
        time.sleep(0.05)
    os.killpg(app.pid, signal.SIGKILL)
    app.wait()


def read_writers(server, bucket: str, prefix: str) -> dict[str, int]:
    import pyarrow.parquet as pq
    from pyarrow import fs

    s3 = fs.S3FileSystem(endpoint_override=server.endpoint_url, scheme="http", access_key="testing",
                         secret_key="testing", region="us-east-1")
    table = pq.read_table(f"{bucket}/{prefix}", filesystem=s3)
    counts: dict[str, int] = {}
    for writer in table.column("writer").to_pylist():
        counts[writer] = counts.get(writer, 0) + 1
    return counts


def leftovers(client, bucket: str) -> list[str]:
    return [k for k in list_keys(client, bucket, "t/") if "/__" in f"/{k}" and "__s3commit_lease" not in k]


@pytest.mark.parametrize("committer", ["magic", "directory"])
@pytest.mark.parametrize("when", ["tasks", "commit"])
def test_a_killed_driver_leaves_nothing_once_the_next_job_commits(s3_sim, tmp_path, committer, when):
    pytest.importorskip("pyarrow")
    s3_sim.configure(profile="s3-standard")
    bucket = s3_sim.create_bucket(f"killed-{uuid.uuid4().hex[:10]}")
    client = s3_sim.client()
    dest = f"s3a://{bucket}/t"
    markers = tmp_path / "markers"
    markers.mkdir()
    assert finished(run_app(s3_sim, dest, "first", committer, "never", markers))["ok"]
    dying = run_app(s3_sim, dest, "dying", committer, when, markers)
    if when == "tasks":
        kill_when(dying, lambda: any(markers.iterdir()))
        assert client.list_multipart_uploads(Bucket=bucket).get("Uploads"), "its committed tasks' uploads"
    else:  # the application kills itself once a file of its job is visible (a watcher thread in its driver)
        before = set(list_keys(client, bucket, "t/"))
        out, err = dying.communicate(timeout=CHILD_TIMEOUT)
        assert dying.returncode == -signal.SIGKILL, f"the application ended unkilled: {out[-2000:]}{err[-4000:]}"
        assert any(k.endswith(".parquet") and "/__" not in f"/{k}"
                   for k in set(list_keys(client, bucket, "t/")) - before), "killed before its job commit"
    assert leftovers(client, bucket), "the dead job's directory"
    s3_sim.advance_clock(bucket, 5)  # past its liveness window (3 s, 1 s of slack, whole seconds of Last-Modified)
    assert finished(run_app(s3_sim, dest, "next", committer, "never", markers))["ok"]
    assert read_writers(s3_sim, bucket, "t") == {"next": 40_000}  # exactly the last overwrite
    assert_no_pending_uploads(client, bucket)
    assert leftovers(client, bucket) == []
