"""The pytest plugin: fixtures in this session, and the entry-point registration in a fresh pytest run (the
``s3commit_`` names always; the unprefixed ones only where a suite asks for them)."""

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

def test_configure_the_simulator(s3commit_sim):
    s3commit_sim.configure(profile="s3-standard")
    s3commit_sim.fail_next("PutObject", "503", 3)

def test_the_next_test_gets_a_clean_simulator(s3commit_sim, s3commit_bucket, s3commit_client):
    config = s3commit_sim.simulator_config()
    assert config["profile"]["name"] == "none" and config["scripted"] == {}
    s3commit_client.put_object(Bucket=s3commit_bucket, Key="k", Body=b"x")
    assert s3commit_sim.stats().requests == {"PutObject": 1}

def test_buckets_are_unique(s3commit_server, s3commit_bucket):
    other = s3commit_server.create_bucket(s3commit_bucket + "-2")
    names = [b["Name"] for b in s3commit_server.client().list_buckets()["Buckets"]]
    assert s3commit_bucket in names and other in names
"""
UNPREFIXED = ("s3_server", "s3_sim", "s3_bucket", "s3_client", "s3_env", "moto_server")
"""The plugin's names of earlier releases, registered only where a suite asks (``s3commit.testing.unprefixed``)."""


def fresh_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh process in ``tmp_path``: plugins come from installed entry points, no conftest of ours."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )  # fmt: skip


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
@pytest.mark.parametrize("names", ["prefixed", "unprefixed, asked for"])
def test_plugin_is_registered_through_the_entry_point(tmp_path: Path, names: str) -> None:
    # Given: a project with no conftest.py at all, only tests using the fixtures (by their short names: asked for
    # on the command line).
    inner = INNER_TESTS if names == "prefixed" else INNER_TESTS.replace("s3commit_", "s3_")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(inner))
    opt_in = () if names == "prefixed" else ("-p", "s3commit.testing.unprefixed")

    # When: pytest runs there in a fresh process (plugins come from installed entry points).
    run = fresh_pytest(tmp_path, *opt_in, str(tmp_path / "test_inner.py"))

    # Then: the fixtures resolved and behaved, and the session's server went away with the session.
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout


def registered(run: subprocess.CompletedProcess[str]) -> set[str]:
    """The fixture names ``pytest --fixtures`` lists."""
    assert run.returncode == 0, run.stdout + run.stderr
    return {line.split(" ")[0] for line in run.stdout.splitlines() if line and not line.startswith(" ")}


def test_the_unprefixed_names_are_registered_only_where_a_suite_asks(tmp_path: Path) -> None:
    # Loading the plugin (every pytest run where s3commit is installed) takes only s3commit_ names.
    plain = registered(fresh_pytest(tmp_path, "--fixtures"))
    assert {"s3commit_server", "s3commit_sim", "s3commit_bucket", "s3commit_client", "s3commit_env"} <= plain
    assert not plain & set(UNPREFIXED)
    # Asked for on the command line, or in the root conftest.py.
    assert set(UNPREFIXED) <= registered(fresh_pytest(tmp_path, "--fixtures", "-p", "s3commit.testing.unprefixed"))
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["s3commit.testing.unprefixed"]\n')
    assert set(UNPREFIXED) <= registered(fresh_pytest(tmp_path, "--fixtures"))
