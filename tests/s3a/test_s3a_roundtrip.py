"""Hadoop's S3A on the suite's test S3 server (moto behind the simulator): the ground S3A comparisons stand on.

A multipart upload through S3A's FileSystem API comes back byte-exact through boto3, in as many parts as its part
size makes; a DataFrame written through S3A's magic committer (Spark's PathOutputCommitProtocol) is complete,
committed by the magic committer (its ``_SUCCESS`` JSON says so) and leaves no upload pending.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.s3a.conftest import run_child

pytestmark = [pytest.mark.slow, pytest.mark.s3a, pytest.mark.spark]

MiB = 1 << 20


@pytest.mark.simulator
def test_three_part_upload_round_trips_byte_exact(s3a_jars, s3_server, s3_bucket, s3_client):
    size = 3 * 5 * MiB - 1234  # parts of 5 MiB, 5 MiB and the rest
    key = "s3a/three-parts.bin"
    result = run_child("upload", s3_server.endpoint_url, s3_bucket, key, str(size),
                       "spark.hadoop.fs.s3a.multipart.size=5M")

    assert result["filesystem"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert result["length"] == size
    body = s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    assert len(body) == size
    assert hashlib.sha256(body).hexdigest() == result["sha256"]
    requests = [r["operation"] for r in s3_server.request_log() if r["bucket"] == s3_bucket and r["key"] == key]
    assert requests.count("UploadPart") == 3, requests
    assert requests.count("CreateMultipartUpload") == requests.count("CompleteMultipartUpload") == 1, requests
    assert "PutObject" not in requests, requests
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_magic_committer_writes_a_table(s3a_jars, s3_server, s3_bucket, s3_client):
    rows = 10_000
    result = run_child("magic", s3_server.endpoint_url, s3_bucket, "table", str(rows))

    assert result["count"] == rows
    assert result["protocol"] == "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
    keys = list_keys(s3_client, s3_bucket, "table/")
    data = [k for k in keys if k.endswith(".parquet")]
    assert len(data) == 4, keys
    assert not [k for k in keys if "__magic" in k], keys
    body = s3_client.get_object(Bucket=s3_bucket, Key="table/_SUCCESS")["Body"].read()
    assert body, "a 0-byte _SUCCESS: FileOutputCommitter committed, not S3A's magic committer"
    success = json.loads(body)
    assert success["name"] == "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
    assert success["committer"] == "magic"
    assert sorted(f"/{k}" for k in data) == sorted(success["filenames"])
    assert_no_pending_uploads(s3_client, s3_bucket)
