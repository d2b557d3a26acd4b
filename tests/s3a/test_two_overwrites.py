"""Two Spark applications overwriting one existing table at the same moment, side by side on the same store (the
``s3-standard`` latencies).

Through S3A's magic committer (hadoop-aws 3.5.0 with spark-hadoop-cloud 4.1.2) Spark deletes the old table when each
job starts (``deleteWithJob`` is an immediate delete in ``PathOutputCommitProtocol``), and each job commit completes
its own uploads and, by default (``fs.s3a.committer.abort.pending.uploads``), aborts every other pending upload under
the table. Seen here, run to run: both jobs succeed and the table holds both jobs' rows; or one job fails, its
uploads aborted by the other's commit (``NoSuchUpload``), or its delete at start meeting the other's ("Unable to
clear output directory"), and the table holds the other's rows, once the failed job's rows as well; or, once, both
jobs fail, each commit having aborted the other's uploads. Through
s3commit's magic committer (hadoop-aws kept for ``s3a://``) the deletion waits for
the job commit, which the commit lease serialises: both succeed, and the table holds exactly one job's rows, every
time. docs/s3a.md states both.

(Where the table does not exist when the jobs start, Spark asks no committer to delete anything, and both peers
keep both jobs' rows: an overwrite of nothing is an append to a commit protocol.)"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed import CHILD_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.s3a, pytest.mark.spark]

CHILD = Path(__file__).with_name("overwrite_child.py")
ROWS = {"a": 100_000, "b": 200_000}


def old_table(s3_client, bucket: str, dest: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in range(3):
        buffer = io.BytesIO()
        pq.write_table(pa.table({"id": list(range(10)), "tag": ["old"] * 10}), buffer)
        s3_client.put_object(Bucket=bucket, Key=f"{dest}/part-old-{part}.parquet", Body=buffer.getvalue())


def overwrite_together(peer: str, server, bucket: str, dest: str, tmp_path: Path) -> list[dict]:
    server.configure(profile="s3-standard")
    try:
        return _overwrite_together(peer, server, bucket, dest, tmp_path)
    finally:
        server.reset_simulator()


def _overwrite_together(peer: str, server, bucket: str, dest: str, tmp_path: Path) -> list[dict]:
    go = tmp_path / "go"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "S3COMMIT_PYTHON": sys.executable}
    children = {tag: subprocess.Popen([sys.executable, str(CHILD), peer, server.endpoint_url, bucket, dest, tag,
                                       str(rows), str(tmp_path / f"ready-{tag}"), str(go)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for tag, rows in ROWS.items()}
    deadline = time.monotonic() + 600
    while not all((tmp_path / f"ready-{tag}").exists() for tag in ROWS):
        assert time.monotonic() < deadline and all(c.poll() is None for c in children.values()), \
            {tag: c.communicate()[1][-3000:] for tag, c in children.items() if c.poll() is not None}
        time.sleep(0.1)
    go.touch()
    results = []
    for tag, child in children.items():
        out, err = child.communicate(timeout=CHILD_TIMEOUT)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        assert child.returncode == 0 and lines, f"{tag}: exit {child.returncode}\n{err[-4000:]}"
        results.append(json.loads(lines[-1]))
    return results


def rows_by_job(s3_client, bucket: str, prefix: str) -> Counter:
    import pyarrow.parquet as pq

    counts: Counter = Counter()
    for key in list_keys(s3_client, bucket, prefix):
        if key.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()))
            counts.update(table.column("tag").to_pylist())
    return counts


def test_two_s3a_magic_overwrites_at_once_keep_both_jobs_rows_or_fail(s3a_jars, s3_server, s3_bucket, s3_client,
                                                                      tmp_path):
    old_table(s3_client, s3_bucket, "s3a-table")
    results = overwrite_together("s3a", s3_server, s3_bucket, "s3a-table", tmp_path)

    counts = rows_by_job(s3_client, s3_bucket, "s3a-table/")
    failed = [r for r in results if not r["ok"]]
    if not failed:  # both report success, and the table holds both jobs' rows: a wrong result, reported as success
        assert counts == Counter(ROWS), (counts, results)
    else:
        # One or both jobs failed: each job commit aborts every pending upload under the table, so either commit can
        # abort the other's (NoSuchUpload), or their deletions at start met. A failed job's files may or may not be
        # in the table (those completed before it failed stay); a job that succeeded has all its rows there.
        for result in failed:
            assert "NoSuchUpload" in result["error"] or "Unable to clear output directory" in result["error"], results
        assert set(counts) <= set(ROWS), (counts, results)
        for result in results:
            whole = ROWS[result["tag"]]
            assert counts[result["tag"]] == whole if result["ok"] else counts[result["tag"]] in (0, whole), \
                (counts, results)
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_two_s3commit_overwrites_beside_hadoop_aws_leave_one_jobs_rows(s3a_jars, s3_server, s3_bucket, s3_client,
                                                                       tmp_path):
    old_table(s3_client, s3_bucket, "s3commit-table")
    results = overwrite_together("s3commit", s3_server, s3_bucket, "s3commit-table", tmp_path)

    assert all(r["ok"] for r in results), results  # both commit, one after the other (the lease)
    counts = rows_by_job(s3_client, s3_bucket, "s3commit-table/")
    assert counts in (Counter({"a": ROWS["a"]}), Counter({"b": ROWS["b"]})), counts  # the last one's rows only
    assert not [k for k in list_keys(s3_client, s3_bucket, "s3commit-table/") if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)
