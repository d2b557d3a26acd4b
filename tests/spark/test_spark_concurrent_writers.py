"""Two Spark applications (separate processes, each its own JVM and sidecar) overwrite one table at the same
moment: both succeed, and the table holds exactly the rows of the one ``_SUCCESS`` names (the commit lease orders
their job commits: without it, each deleted the other's new files and the table could end empty)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from s3commit.model.paths import is_scratch_key
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.spark]
CHILD = Path(__file__).with_name("spark_overwrite_child.py")


def test_two_spark_applications_overwriting_one_table_at_once_end_with_one_of_them(s3_server, tmp_path):
    import pyarrow.parquet as pq

    s3_server.configure(profile="s3-standard")
    try:
        client = s3_server.client()
        bucket = s3_server.create_bucket(f"spark-lease-{uuid.uuid4().hex[:8]}")
        for p in (0, 1, 7):
            client.put_object(Bucket=bucket, Key=f"t/p={p}/old.parquet", Body=b"old")
        go = tmp_path / "go"
        apps = [subprocess.Popen([sys.executable, str(CHILD), s3_server.endpoint_url, f"s3a://{bucket}/t", tag,
                                  str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONPATH": str(CHILD.parents[2])})
                for tag in ("a", "b")]
        for app in apps:
            line = app.stdout.readline()
            assert line.startswith('{"ready"'), (line, app.stderr.read() if app.poll() is not None else "")
        go.touch()
        results = [json.loads(app.communicate(timeout=CHILD_TIMEOUT)[0].splitlines()[-1]) for app in apps]
    finally:
        s3_server.reset_simulator()
    assert all(r["ok"] for r in results), results
    success = json.loads(client.get_object(Bucket=bucket, Key="t/_SUCCESS")["Body"].read())
    data = sorted(k for k in list_keys(client, bucket, "t/") if not is_scratch_key(k) and not k.endswith("_SUCCESS"))
    assert data and all(success["jobId"] in k for k in data), (success["jobId"], data)  # one app's files, all
    assert success["metrics"]["committer_lease_requests"] >= 1  # Spark's job commit took the destination's lease
    writers = set()
    for key in data:
        path = tmp_path / key.replace("/", "_")
        path.write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        writers |= set(pq.read_table(path).column("writer").to_pylist())
    assert len(writers) == 1
    rows = sum(pq.read_metadata(tmp_path / k.replace("/", "_")).num_rows for k in data)
    assert rows == 2000
    assert_no_pending_uploads(client, bucket)
