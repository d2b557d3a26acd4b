"""``s3commit demo --engine python``: the comparison through the Python API, on the embedded S3 and on an
S3 given by ``--endpoint-url``/``--bucket``."""

from __future__ import annotations

import re

import pytest

from s3commit import demo
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys

SMALL = ["--engine", "python", "--rows", "3000", "--tasks", "3", "--partitions", "2"]


def requests_of(out: str, operation: str) -> tuple[int, int]:
    found = re.search(rf"^ +{operation} +(\d+) +(\d+)$", out, re.M)
    assert found, out
    return int(found[1]), int(found[2])


def test_python_demo_on_the_embedded_s3_compares_magic_with_rename(capsys):
    assert demo.main([*SMALL, "--profile", "none"]) == 0
    out = capsys.readouterr().out
    # 3 tasks x 2 partitions = 6 files; rename-v1 copies each twice (task commit, then job commit).
    assert requests_of(out, "CompleteMultipartUpload") == (6, 0)
    assert requests_of(out, "CopyObject") == (0, 12)
    assert re.search(r"^magic: 6 files, [\d.]+ MB written, 0\.0 MB copied server-side$", out, re.M)
    assert re.search(r"^job commit: magic [\d.]+s vs rename-v1 [\d.]+s", out, re.M)
    assert '"committer": "magic"' in out and '"files listed": 6' in out


def test_python_demo_on_another_endpoint(s3_server, s3_bucket, s3_client, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    assert demo.main([*SMALL, "--endpoint-url", s3_server.endpoint_url, "--bucket", s3_bucket,
                      "--region", "us-east-1"]) == 0
    assert requests_of(capsys.readouterr().out, "CompleteMultipartUpload") == (6, 0)
    keys = list_keys(s3_client, s3_bucket)
    assert len([k for k in keys if k.endswith(".parquet")]) == 12
    assert len([k for k in keys if k.endswith("/_SUCCESS")]) == 2
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_demo_refuses_an_endpoint_without_a_bucket(capsys):
    with pytest.raises(SystemExit) as exited:
        demo.main(["--endpoint-url", "http://127.0.0.1:9"])
    assert exited.value.code == 2
    assert "--bucket is required with --endpoint-url" in capsys.readouterr().err
