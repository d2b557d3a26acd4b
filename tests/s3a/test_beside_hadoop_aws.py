"""At home beside hadoop-aws: a session where Hadoop's S3A serves ``s3a://`` (its jars on the classpath, the user's
S3A settings kept, ``configure(..., use_s3a_filesystem=False)`` with no endpoint or credentials of its own) commits
through s3commit's protocol with every committer, the magic one included, for DataFrame appends, static and
dynamic partition overwrites, custom partition locations and RDD writes; the reads stay with S3A.

The magic committer's task files cannot go through S3A (it would write them as objects, or keep its own
``.pending`` records): they go through s3commit's FileSystem under its own scheme, ``s3commit-magic://``
(``s3commit.hadoop.MagicTaskFileSystem``). Each application runs in a process of its own (beside_child.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.s3a, pytest.mark.spark]

CHILD = Path(__file__).with_name("beside_child.py")
ROOT = Path(__file__).resolve().parents[2]


def run_beside(*args: str) -> dict[str, Any]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "S3COMMIT_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, env=env,
                          timeout=CHILD_TIMEOUT, check=False, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    result = json.loads(lines[-1])
    assert result.get("ok"), f"{result.get('error')}\n{done.stderr[-8000:]}"
    return dict(result)


def success(s3_client, bucket: str, prefix: str) -> dict[str, Any]:
    body = s3_client.get_object(Bucket=bucket, Key=f"{prefix}/_SUCCESS")["Body"].read()
    return dict(json.loads(body))


@pytest.mark.parametrize("committer", ["magic", "directory", "partitioned"])
def test_s3commit_commits_every_write_while_s3a_serves_s3a(s3a_jars, s3_server, s3_bucket, s3_client, committer):
    prefix = f"beside-{committer}"
    result = run_beside(committer, s3_server.endpoint_url, s3_bucket, prefix)

    # S3A serves s3a://, and both configure() and the JVM say so in one line.
    assert result["filesystem"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    (said,) = [line for line in result["configure_said"] if "s3a://" in line]
    assert "s3a:// stays with org.apache.hadoop.fs.s3a.S3AFileSystem" in said and "s3commit-magic://" in said
    assert result["jvm_says"].startswith("s3a:// is served by org.apache.hadoop.fs.s3a.S3AFileSystem")

    writes = result["writes"]
    assert writes["append"] == 2000
    assert writes["overwrite"] == 400
    # The dynamic overwrite replaced day=1 only: 40 new rows there, the other days' 100 rows each untouched.
    assert writes["dynamic"] == {"0": 100, "1": 40, "2": 100, "3": 100}
    if committer == "magic":
        assert writes["custom"] == [1, 3]
        custom = [k for k in list_keys(s3_client, s3_bucket, f"{prefix}/elsewhere/") if k.endswith(".parquet")]
        assert custom, list_keys(s3_client, s3_bucket, prefix)
    else:
        assert f"the {committer} committer writes only under its destination" in writes["custom"]
    assert writes["rdd_text"] == 100 and writes["rdd_new"] == 60

    # Every write was committed by s3commit (its _SUCCESS), not by S3A's committers or FileOutputCommitter.
    for dest in ("table", "rdd-text", "rdd-new"):
        marker = success(s3_client, s3_bucket, f"{prefix}/{dest}")
        assert marker["committer"] == committer, marker
        assert marker["description"].startswith("s3commit job committer"), marker
    # Every data file was uploaded by s3commit's sidecar (a magic file written through S3A would be S3A's upload).
    keys = list_keys(s3_client, s3_bucket, prefix)
    data = [k for k in keys if k.endswith(".parquet") or "/part-" in k]
    assert len(data) >= 14 + 4 + 3, keys  # day=1 of the table: 4 files replaced by 2
    assert result["sidecar"].get("CreateMultipartUpload", 0) >= len(data), (result["sidecar"], data)
    assert not [k for k in keys if "__magic" in k or k.endswith((".pending", ".pendingset"))], keys
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_s3as_own_magic_committer_refuses_what_s3commits_writes(s3a_jars, s3_server, s3_bucket, s3_client):
    """The two writes above that only s3commit's magic committer makes, through S3A's own (hadoop-aws 3.5.0 with
    spark-hadoop-cloud): both refused, nothing left behind (docs/s3a.md states it)."""
    result = run_beside("s3a-refusals", s3_server.endpoint_url, s3_bucket, "s3a-own")
    assert "Absolute output locations not supported by committer MagicCommitter" in result["custom"], result
    assert "does not support dynamicPartitionOverwrite" in result["dynamic"], result
    assert not [k for k in list_keys(s3_client, s3_bucket, "s3a-own/elsewhere/") if not k.endswith("/")]
