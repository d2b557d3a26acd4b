"""Stock Spark with Hadoop's S3A and no s3commit at all, reading a snapshot destination in a loop while a writer
process overwrites it, one of its drivers SIGKILLed mid-commit (issue 55): Spark's own reader of the log
(``MetadataLogFileIndex``) never reads a torn table, on moto and on SeaweedFS. Torn: as
tests/reliability/test_snapshot_readers.py says."""

from __future__ import annotations

import pytest

from testbed.fixtures import every_server_fixture
from tests.reliability.test_snapshot_readers import spark_reader_loop

s3_server = every_server_fixture()  # moto and SeaweedFS

pytestmark = [pytest.mark.s3a, pytest.mark.slow]


def test_stock_spark_on_s3a_never_reads_a_torn_table(s3a_jars, s3_server, s3_bucket, tmp_path):
    counts = spark_reader_loop("s3a", s3_server, s3_bucket, tmp_path, jobs=21, kill_at=10, min_reads=50)
    print("Spark reader (S3A, no s3commit)", dict(counts))
    assert counts["reads"] >= 50
    assert counts["torn"] == 0, counts
