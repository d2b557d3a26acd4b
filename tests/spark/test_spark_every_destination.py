"""A session configured for s3commit writes everywhere: ``spark.sql.sources.commitProtocolClass`` is session-wide,
so a destination that is not on S3 (a local path, a warehouse table; HDFS, abfs, viewfs alike) must be committed
exactly as Spark's own protocol commits it, while ``s3a://`` goes through s3commit in the same session."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from tests.spark.conftest import DEFAULT_PROTOCOL
from tests.spark.streaming_helpers import rate, wait_for_batch

pytestmark = pytest.mark.spark

PROTOCOL = "spark.sql.sources.commitProtocolClass"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def rows(spark, location: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.parquet(location).collect())


def tree(root: Path) -> list[str]:
    """Every file under ``root`` (hidden ones included: checksums, staging leftovers), job ids masked."""
    return sorted(UUID.sub("<job>", str(p.relative_to(root))) for p in root.rglob("*") if p.is_file())


def local_writes(spark, base: Path, db: str) -> dict[str, object]:
    """DataFrame and SQL writes of every kind to a local directory and to tables of a local warehouse
    database; returns what each left: the rows as Spark reads them back, and the files."""
    frame = spark.range(12).selectExpr("id", "cast(id % 3 as int) AS p")
    plain, parts = f"file://{base}/plain", f"file://{base}/parts"
    frame.write.parquet(plain)
    frame.write.partitionBy("p").parquet(parts)
    frame.where("id > 9").write.mode("overwrite").partitionBy("p").parquet(parts)
    spark.sql(f"CREATE DATABASE {db} LOCATION 'file:{base}/warehouse'")
    try:
        frame.write.partitionBy("p").saveAsTable(f"{db}.t")
        spark.range(100, 103).selectExpr("id", "cast(id % 3 as int) AS p").write.insertInto(f"{db}.t")
        spark.sql(f"INSERT OVERWRITE TABLE {db}.t PARTITION (p=1) SELECT id FROM range(200, 202)")
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        spark.range(300, 302).selectExpr("id", "2 AS p").write.insertInto(f"{db}.t", overwrite=True)
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
        frame.where("id = 5").write.mode("overwrite").saveAsTable(f"{db}.u")
        tables = {name: sorted(tuple(r) for r in spark.table(f"{db}.{name}").collect()) for name in ("t", "u")}
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")
    return {"plain": rows(spark, plain), "parts": rows(spark, parts), "tables": tables, "files": tree(base)}


EXPECTED_T = sorted([(i, i % 3) for i in range(12) if i % 3 == 0] + [(102, 0), (200, 1), (201, 1), (300, 2), (301, 2)])
"""Table ``t`` after ``local_writes``: p=0 appended to, p=1 overwritten statically, p=2 dynamically."""


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_one_session_commits_s3a_through_s3commit_and_local_paths_and_tables_through_spark(
        spark, committer, s3_client, s3_bucket, tmp_path):
    # Given: the session configure() made (s3commit's protocol for every SQL write).
    assert spark.conf.get(PROTOCOL) == "s3commit.spark.S3CommitProtocol"
    # When: local paths and warehouse tables are written, appended to and overwritten in every way.
    ours = local_writes(spark, tmp_path, "every_dest")
    # Then: each holds what the writes mean, committed as FileOutputCommitter does (files in place, an empty
    # _SUCCESS, no _temporary or .spark-staging directory left) ...
    assert ours["plain"] == [(i, i % 3) for i in range(12)]
    assert ours["parts"] == [(10, 1), (11, 2)]
    assert ours["tables"] == {"t": EXPECTED_T, "u": [(5, 2)]}
    assert not [f for f in ours["files"] if "_temporary" in f or ".spark-staging" in f]
    assert (tmp_path / "plain" / "_SUCCESS").stat().st_size == 0
    # ... and in the same session an s3a:// write still commits through s3commit.
    frame = spark.range(6).selectExpr("id", "cast(id % 2 as int) AS p")
    frame.write.partitionBy("p").parquet(f"s3a://{s3_bucket}/mixed")
    frame.where("id > 3").write.mode("overwrite").partitionBy("p").parquet(f"s3a://{s3_bucket}/mixed")
    success = json.loads(s3_client.get_object(Bucket=s3_bucket, Key="mixed/_SUCCESS")["Body"].read())
    assert success["committer"] == "magic"
    assert rows(spark, f"s3a://{s3_bucket}/mixed") == [(4, 0), (5, 1)]
    assert not [k for k in list_keys(s3_client, s3_bucket) if "__magic" in k]
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.slow  # twice the writes of the case above: the default tier's time budget (README, Tests)
def test_local_writes_leave_exactly_what_sparks_own_protocol_leaves(spark, committer, tmp_path):
    ours = local_writes(spark, tmp_path / "s3commit", "every_dest_ours")
    spark.conf.set(PROTOCOL, DEFAULT_PROTOCOL)  # the committer fixture sets s3commit's back
    reference = local_writes(spark, tmp_path / "spark", "every_dest_spark")
    # The same rows, the same files (names up to the job ids; checksums and markers included).
    assert ours == reference
    assert reference["tables"]["t"] == EXPECTED_T


def test_a_streaming_file_sink_outside_s3_is_committed_by_sparks_own_protocol(spark, tmp_path):
    # A session configured with streaming=True: the file sink's protocol is s3commit's for every sink.
    assert spark.conf.get("spark.sql.streaming.commitProtocolClass") == "s3commit.spark.S3StreamingCommitProtocol"
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    query = (rate(spark).writeStream.format("parquet").option("path", f"file://{sink}")
             .option("checkpointLocation", f"file://{checkpoint}").trigger(processingTime="100 milliseconds")
             .start())
    try:
        wait_for_batch(query, 1)
    finally:
        query.stop()
    # Spark's ManifestFileCommitProtocol wrote the batches: its log lists the data files, which are in place.
    logged = [json.loads(line)["path"] for name in os.listdir(sink / "_spark_metadata") if name.isdigit()
              for line in (sink / "_spark_metadata" / name).read_text().splitlines()[1:]]
    assert logged and all(Path(p.removeprefix("file:")).is_file() for p in logged)
    values = sorted(r.value for r in spark.read.parquet(f"file://{sink}").collect())
    assert values == list(range(len(values))) and len(values) >= 20
