"""``s3commit demo --peers s3a``: S3A's magic committer writes the demo's DataFrame third, in a Spark application
of its own, on the same embedded S3, its requests counted at the same server; the summary shows its column, its
files and its ``_SUCCESS`` beside s3commit's magic committer and FileOutputCommitter v1."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from testbed import CHILD_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.s3a, pytest.mark.spark]


def columns(out: str, section: str) -> dict[str, list[str]]:
    """A table of the summary: row name -> its cells."""
    table = out.split(section, 1)[1].split("\n\n", 1)[0]
    return {cells[0]: cells[1:] for line in table.splitlines()[1:] if (cells := line.split())}


def test_demo_peers_s3a_shows_s3a_magic_beside(s3a_jars):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-m", "s3commit.demo", "--engine", "spark", "--rows", "4000", "--tasks",
                           "2", "--partitions", "2", "--profile", "none", "--peers", "s3a"],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, check=False)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "not shown" not in out
    assert re.search(r"^ +magic +FileOutputCommitter-v1 +S3A-magic$", out, re.M), out
    requests = columns(out, "Requests by type")
    # 2 tasks x 2 days = 4 files: one upload completed per file by each magic committer, none by v1's renames
    assert requests["CompleteMultipartUpload"] == ["4", "0", "4"], out
    assert requests["CopyObject"][0] == requests["CopyObject"][2] == "0" if "CopyObject" in requests else True
    assert int(requests["total"][2]) > 0
    phases = columns(out, "Time per phase (seconds)")
    assert float(phases["total"][2]) > 0
    # committed: S3A's four files under its destination, and its _SUCCESS names S3A's magic committer
    assert re.search(r"^S3A-magic: 4 files, [\d.]+ MB written, 0\.0 MB copied server-side$", out, re.M), out
    assert re.search(r"^job commit: magic [\d.]+s vs S3A-magic [\d.]+s", out, re.M)
    success = out.split("_SUCCESS of the S3A-magic job:", 1)[1]
    assert '"committer": "magic"' in success and '"files listed": 4' in success, success
