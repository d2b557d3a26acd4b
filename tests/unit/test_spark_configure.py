"""Which Python the sidecars run, as ``configure()`` decides it (no JVM needed)."""

from __future__ import annotations

import sys

import pytest

from s3commit.spark import sidecar_python


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("S3COMMIT_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    return monkeypatch


def test_defaults_to_the_python_running_configure(clean_env):
    # A virtualenv with s3commit: the sidecars must not fall back to whatever python3 is on PATH.
    assert sidecar_python({}) == sys.executable


def test_empty_values_count_as_unset(clean_env):
    clean_env.setenv("S3COMMIT_PYTHON", "")
    clean_env.setenv("PYSPARK_PYTHON", "")
    assert sidecar_python({"spark.pyspark.python": ""}) == sys.executable


def test_pyspark_workers_python_is_used_before_this_one(clean_env):
    clean_env.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert sidecar_python({}) == "/opt/env/bin/python"
    assert sidecar_python({"spark.pyspark.python": "/cluster/python"}) == "/cluster/python"


def test_s3commit_python_wins(clean_env):
    clean_env.setenv("S3COMMIT_PYTHON", "/mine/python")
    clean_env.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert sidecar_python({"spark.pyspark.python": "/cluster/python"}) == "/mine/python"
