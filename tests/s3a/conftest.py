"""The S3A tier: Hadoop's S3A (hadoop-aws, its AWS SDK bundle, spark-hadoop-cloud) beside s3commit on the same test
S3 server (testbed.s3a). Each Spark application runs in a process of its own (s3a_child.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHILD = Path(__file__).with_name("s3a_child.py")
CHILD_TIMEOUT = 600.0


@pytest.fixture(scope="session")
def s3a_jars() -> list[Path]:
    """S3A's jars for the installed PySpark, resolved once into the cache (testbed.s3a); skips the test when they
    cannot be (no JDK, no PySpark, no ``mvn`` with nothing cached, no network, an unsupported Hadoop)."""
    if shutil.which("java") is None:
        pytest.skip("S3A tests need a JDK (java not found)")
    pytest.importorskip("pyspark")
    from testbed.s3a import S3AJarsError, s3a_jars

    try:
        return s3a_jars()
    except S3AJarsError as err:
        pytest.skip(f"S3A's jars cannot be resolved: {err}")


def run_child(*args: str) -> dict[str, Any]:
    """Run one Spark application of s3a_child.py; its JSON result (asserting that it printed one)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, env=env,
                          timeout=CHILD_TIMEOUT, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    result = json.loads(lines[-1])
    assert result.get("ok"), f"{result.get('error')}\n{done.stderr[-6000:]}"
    return result
