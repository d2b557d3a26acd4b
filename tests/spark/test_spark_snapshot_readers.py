"""Stock Spark reading a snapshot destination in a loop while a writer process overwrites it, one of its drivers
SIGKILLed mid-commit (issue 55): ``spark.read.parquet(dest)`` in a session from ``s3commit.spark.configure()``
never reads a torn table, on moto and on SeaweedFS. The same reader in a session with no s3commit at all (Hadoop's
S3A) is in the S3A tier (tests/s3a/test_s3a_snapshot_readers.py). Torn: as tests/reliability/test_snapshot_readers.py
says."""

from __future__ import annotations

import pytest

from testbed.fixtures import every_server_fixture
from tests.reliability.test_snapshot_readers import spark_reader_loop

s3_server = every_server_fixture()  # moto and SeaweedFS

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_stock_spark_in_an_s3commit_session_never_reads_a_torn_table(s3_server, s3_bucket, tmp_path):
    counts = spark_reader_loop("s3commit", s3_server, s3_bucket, tmp_path, jobs=21, kill_at=10, min_reads=50)
    print("Spark reader (s3commit session)", dict(counts))
    assert counts["reads"] >= 50
    assert counts["torn"] == 0, counts
