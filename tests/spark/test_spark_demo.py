"""``s3commit demo`` with the Spark engine, as a user runs it (a child process, its own SparkSession): on the
embedded S3, and on an S3 given by ``--endpoint-url``/``--bucket`` (here a test server standing in for a
real one: the demo sees only its endpoint and the credentials in the environment)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytestmark = pytest.mark.spark

SMALL = ["--rows", "4000", "--tasks", "2", "--partitions", "2", "--peers", "none"]  # S3A beside: tests/s3a


def run_demo(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([sys.executable, "-m", "s3commit.demo", "--engine", "spark", *SMALL, *args],
                            capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def requests_table(out: str) -> dict[str, tuple[int, int]]:
    """The "Requests by type" rows: operation -> (magic, FileOutputCommitter-v1)."""
    table = out.split("Requests by type", 1)[1].split("\n\n", 1)[0]
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^ +(\w+) +(\d+) +(\d+)$", table, re.M)}


def assert_summary(out: str) -> dict[str, tuple[int, int]]:
    # 2 tasks x 2 day partitions = 4 files per write.
    requests = requests_table(out)
    assert requests["CompleteMultipartUpload"] == (4, 0)
    assert requests["CopyObject"][0] == 0 and requests["CopyObject"][1] >= 4  # v1 renames every file
    assert re.search(r"^magic: 4 files, [\d.]+ MB written, 0\.0 MB copied server-side$", out, re.M)
    assert re.search(r"^FileOutputCommitter-v1: 4 files, .* MB written, [\d.]+ MB copied", out, re.M)
    assert re.search(r"^job commit: magic [\d.]+s vs FileOutputCommitter-v1 [\d.]+s", out, re.M)
    assert '"committer": "magic"' in out and '"files listed": 4' in out
    assert '"committer_commits_completed": 4' in out
    return requests


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_demo_on_another_endpoint_counts_requests_at_the_client(s3_server, s3_bucket, s3_client):
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    env.pop("AWS_PROFILE", None)
    out = run_demo("--endpoint-url", s3_server.endpoint_url, "--bucket", s3_bucket, "--region", "us-east-1",
                   env=env)
    assert f"bucket {s3_bucket} (requests counted by the client)" in out
    requests = assert_summary(out)
    assert requests["CreateMultipartUpload"] == (4, 0) and requests["UploadPart"] == (4, 0)
    # The output stays where the demo says, complete, with nothing pending.
    run = re.search(rf"output left in s3://{s3_bucket}/demo-(\w+)/", out)
    assert run, out
    keys = list_keys(s3_client, s3_bucket, f"demo-{run[1]}/")
    for label in ("magic", "fileoutputcommitter-v1"):
        written = [k for k in keys if k.startswith(f"demo-{run[1]}/{label}/")]
        assert f"demo-{run[1]}/{label}/_SUCCESS" in written
        assert len([k for k in written if k.endswith(".parquet")]) == 4, written
    assert not [k for k in keys if "__magic_job-" in k or "_temporary" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_demo_on_the_embedded_s3_prints_the_summary_and_says_s3a_is_not_shown_without_its_jars(tmp_path):
    from s3commit.demo.spark_engine import NOT_SHOWN

    env = {**os.environ, "S3COMMIT_S3A_JARS": str(tmp_path / "no-jars-here")}
    result = subprocess.run([sys.executable, "-m", "s3commit.demo", "--engine", "spark", *SMALL[:-2],
                             "--profile", "none"], capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env,
                             check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "embedded S3 at http://127.0.0.1:" in out
    requests = assert_summary(out)  # magic and v1 only
    # Counted at the embedded server: the magic write's requests as they arrived there.
    assert requests["CreateMultipartUpload"] == (4, 0)
    assert [line for line in out.splitlines() if "not shown" in line] == [NOT_SHOWN]
    assert "S3A-magic" not in out
    assert not (tmp_path / "no-jars-here").exists()  # looked, resolved nothing
