"""The examples of docs/python.md run as written, against the test server (endpoint and credentials from the
environment, as boto3 resolves them); the README's "Testing your pipeline" examples run as a user's tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import CHILD_TIMEOUT

pytest.importorskip("pyarrow")
pytest.importorskip("dask.dataframe")

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_doc_has_an_example_per_engine():
    assert len(EXAMPLES) == 3
    assert all(f"s3commit.{engine}" in example
               for engine, example in zip(("arrow", "dask", "ray"), EXAMPLES, strict=True))


@pytest.mark.parametrize("example", [
    pytest.param(EXAMPLES[0], id="pandas"), pytest.param(EXAMPLES[1], id="dask"),
    pytest.param(EXAMPLES[2], id="ray", marks=pytest.mark.slow)])
def test_an_example_runs_and_commits(example, s3_env, s3_server, s3_client, capsys):
    if "docs-examples" not in [b["Name"] for b in s3_client.list_buckets()["Buckets"]]:
        s3_server.create_bucket("docs-examples")
    exec(compile(example, str(DOC), "exec"), {})
    assert "files committed" in capsys.readouterr().out


README = DOC.parents[1] / "README.md"
TESTING = README.read_text().split("\n## Testing your pipeline\n", 1)[1].split("\n## ", 1)[0]
TESTING_EXAMPLES = re.findall(r"```python\n(.*?)```", TESTING, flags=re.S)
"""The README's "Testing your pipeline" examples: a test with moto's ``mock_aws``, then one with the fixtures."""


def test_the_readme_shows_both_ways_of_testing_a_pipeline():
    assert len(TESTING_EXAMPLES) == 2
    assert "@mock_aws" in TESTING_EXAMPLES[0] and "(s3commit_env, s3commit_bucket)" in TESTING_EXAMPLES[1]


def test_the_readme_mock_aws_example_passes(monkeypatch):
    # Run as written: its test function, called as pytest would call it, with boto3's default resolution.
    pytest.importorskip("moto")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    namespace: dict = {}
    exec(compile(TESTING_EXAMPLES[0], str(README), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0]()


@pytest.mark.slow
def test_the_readme_testing_examples_pass_in_a_users_own_pytest_run(tmp_path):
    # Both examples as a user's test files, in a directory with no conftest.py: the fixtures come from the
    # plugin's entry point, Dask's worker process reaches the session's server through s3_env.
    pytest.importorskip("distributed")
    (tmp_path / "test_with_mock_aws.py").write_text(TESTING_EXAMPLES[0])
    (tmp_path / "test_with_fixtures.py").write_text(TESTING_EXAMPLES[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                         env={**env, "PYTEST_ADDOPTS": ""})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
