"""The pytest plugin: fixtures in this session, and the entry-point registration in a fresh pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import boto3
import pytest

from s3commit.testing.assertions import list_keys


def test_s3_bucket_is_new_and_empty(s3_bucket: str, s3_client: Any) -> None:
    assert s3_bucket.startswith("test-")
    assert list_keys(s3_client, s3_bucket) == []


def test_s3_env_points_default_boto3_at_the_server(s3_env: dict[str, str], s3_bucket: str, s3_server: Any) -> None:
    # A client built with no arguments at all, as library code under test would build it.
    boto3.client("s3").put_object(Bucket=s3_bucket, Key="default-client", Body=b"x")
    assert list_keys(s3_server.client(), s3_bucket) == ["default-client"]
    assert os.environ["AWS_ENDPOINT_URL_S3"] == s3_env["AWS_ENDPOINT_URL_S3"] == s3_server.endpoint_url


INNER_TESTS = """
import boto3

def test_configure_the_simulator(s3_sim):
    s3_sim.configure(profile="s3-standard")
    s3_sim.fail_next("PutObject", "503", 3)

def test_the_next_test_gets_a_clean_simulator(s3_sim, s3_bucket, s3_client):
    config = s3_sim.simulator_config()
    assert config["profile"]["name"] == "none" and config["scripted"] == {}
    s3_client.put_object(Bucket=s3_bucket, Key="k", Body=b"x")
    assert s3_sim.stats().requests == {"PutObject": 1}

def test_buckets_are_unique(s3_server, s3_bucket):
    other = s3_server.create_bucket(s3_bucket + "-2")
    names = [b["Name"] for b in s3_server.client().list_buckets()["Buckets"]]
    assert s3_bucket in names and other in names
"""


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_plugin_is_registered_through_the_entry_point(tmp_path: Path) -> None:
    # Given: a project with no conftest.py at all, only tests using the fixtures.
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS))

    # When: pytest runs there in a fresh process (plugins come from installed entry points).
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_inner.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )  # fmt: skip

    # Then: the fixtures resolved and behaved, and the session's server went away with the session.
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout
