"""Spark's reads and writes on s3a:// take the data path they should: files larger than a part go up in
several parts handed over in the background, text is read with sequential prefetching, Parquet with
vectored reads (Hadoop 3.3.5+) or random ones, and every format reads back exact."""

from __future__ import annotations

import hashlib
import json

import pytest

from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed.fixtures import every_server_fixture

pytestmark = pytest.mark.spark
s3_server = every_server_fixture()  # moto (default tier) and SeaweedFS (slow tier)

MIB = 1024 * 1024


def counters(spark) -> dict[str, int]:
    return json.loads(spark._jvm.s3commit.hadoop.S3FileSystem.streamCountersJson())


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after}


def big_lines(spark, files: int, mib: int):
    from pyspark.sql import functions as F

    line = ("0123456789abcdef" * (MIB // 16))[:MIB - 1]
    return spark.range(0, files * mib, 1, files).select(
        F.concat(F.lit(line[:-12]), F.format_string("%012d", "id")).alias("value"))


def test_large_files_go_up_in_parts_and_read_back_with_prefetching(spark, committer, s3_client, s3_bucket):
    # Set before this test's bucket is first touched: its FileSystem is made with them (several parts and
    # several blocks per file).
    spark.conf.set("fs.s3a.prefetch.block.size", "1M")
    spark.conf.set("fs.s3a.multipart.size", "5M")
    try:
        before = counters(spark)
        big_lines(spark, files=2, mib=12).write.text(f"s3a://{s3_bucket}/big")
        written = delta(counters(spark), before)
        keys = [k for k in list_keys(s3_client, s3_bucket, "big/") if k.endswith(".txt")]
        assert len(keys) == 2
        for key in keys:
            head = s3_client.head_object(Bucket=s3_bucket, Key=key)
            assert head["ContentLength"] == 12 * MIB and head["ETag"].endswith('-3"')  # 5 + 5 + 2 MiB
        assert written["parts_handed_over"] >= 6 and written["block_files"] >= 4
        before = counters(spark)
        lines = spark.read.text(f"s3a://{s3_bucket}/big").collect()
        read = delta(counters(spark), before)
        assert sorted(int(r.value[-12:]) for r in lines) == list(range(24))
        # prefetched in blocks that grow while each file is read in order (1 + 2 + 4 + the last 5 MiB), not
        # fetched line by line nor in 12 blocks of the first size; each byte fetched once
        assert 2 * 4 <= read["sequential_blocks"] <= 2 * 4 + 2, read
        assert 24 * MIB <= read["bytes_fetched"] <= 24 * MIB + 2 * 64 * 1024, read
        assert read["random_fetches"] <= 4
        assert_no_pending_uploads(s3_client, s3_bucket)
    finally:
        spark.conf.unset("fs.s3a.prefetch.block.size")
        spark.conf.unset("fs.s3a.multipart.size")


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_parquet_reads_are_vectored_where_hadoop_has_them_and_exact(spark, committer, s3_client, s3_bucket):
    from pathlib import Path

    import pyspark

    from s3commit.spark.jarbuild import _jars_have_class

    df = spark.range(0, 300_000, numPartitions=2).selectExpr(
        "id", "sha2(cast(id as string), 256) as s", "cast(id % 7 as double) as d")
    df.write.parquet(f"s3a://{s3_bucket}/pq")
    before = counters(spark)
    back = spark.read.parquet(f"s3a://{s3_bucket}/pq").selectExpr("sum(id)", "count(distinct s)", "sum(d)").first()
    read = delta(counters(spark), before)
    assert back[0] == sum(range(300_000)) and back[1] == 300_000
    assert back[2] == sum(i % 7 for i in range(300_000))
    if _jars_have_class(Path(pyspark.__file__).parent / "jars", "org/apache/hadoop/fs/FileRange.class"):
        # Spark 4 (Hadoop 3.4, Parquet 1.14+) opens with openFile() and a random policy, and reads vectored.
        assert read["sequential_blocks"] == 0
        assert read["vectored_reads"] > 0 and read["vectored_ranges"] >= read["vectored_reads"]
    else:
        # Spark 3.5 (Hadoop 3.3.4): Parquet calls open(); the adaptive policy sees the footer's seek as random.
        assert read["random_fetches"] > 0 and read["vectored_reads"] == 0


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_csv_and_json_of_several_blocks_read_back_exact(spark, committer, s3_client, s3_bucket):
    spark.conf.set("fs.s3a.prefetch.block.size", "256K")
    try:
        df = spark.range(0, 200_000, numPartitions=2).selectExpr("id", "sha2(cast(id as string), 256) as s")
        for fmt in ("csv", "json"):
            df.write.format(fmt).save(f"s3a://{s3_bucket}/{fmt}")
            reader = spark.read.format(fmt)
            if fmt == "csv":
                reader = reader.schema("id long, s string")
            back = reader.load(f"s3a://{s3_bucket}/{fmt}")
            assert back.count() == 200_000
            digest = hashlib.sha256()
            for row in back.orderBy("id").toLocalIterator():
                digest.update(f"{row.id}:{row.s}".encode())
            expected = hashlib.sha256()
            for i in range(200_000):
                expected.update(f"{i}:{hashlib.sha256(str(i).encode()).hexdigest()}".encode())
            assert digest.hexdigest() == expected.hexdigest(), fmt
    finally:
        spark.conf.unset("fs.s3a.prefetch.block.size")
