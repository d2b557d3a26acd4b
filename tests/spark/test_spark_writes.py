"""PySpark end to end through S3CommitProtocol and the s3a:// FileSystem, against moto (default tier) and
SeaweedFS (slow tier)."""

from __future__ import annotations

import io
import json
import re
import time

import pytest

from s3commit.model.paths import is_scratch_key
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed.fixtures import every_server_fixture
from tests.spark.conftest import DEFAULT_PROTOCOL

pytestmark = pytest.mark.spark
s3_server = every_server_fixture()

FORMATS = {"parquet": ".snappy.parquet", "orc": ".zstd.orc", "csv": ".csv", "json": ".json", "text": ".txt"}


def frame(spark, rows=60):
    return spark.range(rows).selectExpr("id", "cast(id % 3 as int) as a", "cast(id % 2 as int) as b",
                                        "concat('v', cast(id as string)) as s")


def data_keys(client, bucket, prefix):
    return sorted(k for k in list_keys(client, bucket, prefix) if not k.endswith("_SUCCESS") and not is_scratch_key(k))


def success(client, bucket, prefix):
    return json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}/_SUCCESS")["Body"].read())


def check_clean(client, bucket, prefix):
    assert [k for k in list_keys(client, bucket, prefix) if "__magic_job-" in k or "__staging_job-" in k] == []
    assert_no_pending_uploads(client, bucket)


@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("fmt", [f if f in ("parquet", "csv") else pytest.param(f, marks=pytest.mark.slow)  # budget
                                 for f in FORMATS])
def test_write_each_format_through_the_magic_committer(spark, committer, s3_client, s3_bucket, fmt, partitioned):
    df = frame(spark)
    if fmt == "text":
        df = df.selectExpr("s", "a", "b") if partitioned else df.selectExpr("s")
    writer = df.repartition(2).write.format(fmt)
    if partitioned:
        writer = writer.partitionBy("a", "b")
    dest = f"s3a://{s3_bucket}/t"
    writer.save(dest)
    keys = data_keys(s3_client, s3_bucket, "t/")
    marker = success(s3_client, s3_bucket, "t")
    job_id = marker["jobId"]
    ext = FORMATS[fmt]
    if fmt == "orc":  # ORC's default codec is Spark's: snappy in 3.5, zstd in 4.x
        ext = f".{spark.conf.get('spark.sql.orc.compression.codec')}.orc"
    # Spark's names: part-<split>-<jobId>-c000<ext> flat, part-<split>-<jobId>.c000<ext> partitioned.
    name = re.compile(rf"part-0000[01]-{job_id}[.-]c000{re.escape(ext)}$")
    assert keys and all(name.search(k) for k in keys), keys
    if partitioned:
        assert {k.split("/")[1] + "/" + k.split("/")[2] for k in keys} == {f"a={a}/b={b}" for a in range(3)
                                                                           for b in range(2)}
    assert marker["committer"] == "magic"
    assert sorted(marker["filenames"]) == [f"/{k}" for k in keys]
    # Each task's pendingset was read as Spark reported its commit (onTaskCommit): the job commit read none.
    assert marker["metrics"]["committer_pendingsets_preloaded"] == marker["metrics"]["committer_pendingsets"] == 2
    check_clean(s3_client, s3_bucket, "t/")
    # Read back exactly, through Spark ...
    reader = spark.read.format(fmt)
    if fmt == "csv":  # no header in the files: name the columns
        reader = reader.schema("id long, s string, a int, b int" if partitioned else "id long, a int, b int, s string")
    back = reader.load(dest)
    if fmt == "text":
        assert sorted(r[0] for r in back.select("value").collect()) == sorted(f"v{i}" for i in range(60))
    else:
        assert sorted(int(r["id"]) for r in back.select("id").collect()) == list(range(60))
    # ... and through pyarrow, from the objects themselves.
    if fmt in ("parquet", "orc", "csv", "json"):
        assert sorted(pyarrow_ids(s3_client, s3_bucket, keys, fmt)) == list(range(60))


def pyarrow_ids(client, bucket, keys, fmt):
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.orc as porc
    import pyarrow.parquet as pq

    ids = []
    for key in keys:
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if fmt == "parquet":
            table = pq.read_table(io.BytesIO(data))
        elif fmt == "orc":
            table = porc.read_table(io.BytesIO(data))
        elif fmt == "csv":
            if not data:
                continue
            table = pcsv.read_csv(io.BytesIO(data), read_options=pcsv.ReadOptions(autogenerate_column_names=True))
            ids += table.column(0).to_pylist()
            continue
        else:
            table = pjson.read_json(io.BytesIO(data))
        ids += table.column("id").to_pylist()
    return ids


@pytest.mark.parametrize("mode", ["error", "ignore", "append"])
def test_save_modes_on_an_existing_destination(spark, committer, s3_client, s3_bucket, mode):
    dest = f"s3a://{s3_bucket}/modes"
    frame(spark, 10).write.parquet(dest)
    before = data_keys(s3_client, s3_bucket, "modes/")
    if mode == "error":
        with pytest.raises(Exception, match="already exists"):
            frame(spark, 10).write.mode("error").parquet(dest)
        assert data_keys(s3_client, s3_bucket, "modes/") == before
    elif mode == "ignore":
        frame(spark, 10).write.mode("ignore").parquet(dest)
        assert data_keys(s3_client, s3_bucket, "modes/") == before
    else:
        frame(spark, 10).write.mode("append").parquet(dest)
        assert spark.read.parquet(dest).count() == 20
    check_clean(s3_client, s3_bucket, "modes/")


def test_overwrite_replaces_old_data_at_job_commit(spark, committer, s3_client, s3_bucket):
    dest = f"s3a://{s3_bucket}/ow"
    frame(spark, 10).write.parquet(dest)
    frame(spark, 25).write.mode("overwrite").parquet(dest)
    assert spark.read.parquet(dest).count() == 25
    job_id = success(s3_client, s3_bucket, "ow")["jobId"]
    assert all(job_id in k for k in data_keys(s3_client, s3_bucket, "ow/"))
    check_clean(s3_client, s3_bucket, "ow/")


def explode_on_7():
    """A UDF failing every attempt of the task that meets row 7 (nested: pickled by value for the workers)."""
    def udf(x):
        if x == 7:
            raise ValueError("boom in a task")
        return x
    return udf


def test_failed_overwrite_leaves_the_old_data(spark, committer, s3_client, s3_bucket):
    from pyspark.sql.functions import udf

    dest = f"s3a://{s3_bucket}/fail"
    frame(spark, 10).write.parquet(dest)
    before = data_keys(s3_client, s3_bucket, "fail/")

    with pytest.raises(Exception, match="boom in a task"):
        failing = frame(spark, 10).withColumn("id", udf(explode_on_7(), "long")("id")).repartition(2)
        failing.write.mode("overwrite").parquet(dest)
    assert data_keys(s3_client, s3_bucket, "fail/") == before
    assert spark.read.parquet(dest).count() == 10
    check_clean(s3_client, s3_bucket, "fail/")


@pytest.mark.parametrize("committer", ["magic", "partitioned"], indirect=True)
def test_dynamic_partition_overwrite_replaces_only_written_partitions(spark, committer, s3_client, s3_bucket):
    dest = f"s3a://{s3_bucket}/dpo"
    frame(spark, 30).write.partitionBy("a").parquet(dest)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    spark.range(5).selectExpr("id + 1000 as id", "1 as a", "0 as b", "'new' as s").write.mode("overwrite") \
        .partitionBy("a").parquet(dest)
    rows = spark.read.parquet(dest)
    assert rows.filter("a = 1").count() == 5 and rows.filter("a = 1 and id < 1000").count() == 0
    assert rows.filter("a = 0").count() == 10 and rows.filter("a = 2").count() == 10
    check_clean(s3_client, s3_bucket, "dpo/")


def test_empty_dataframe_gives_valid_empty_output(spark, committer, s3_client, s3_bucket):
    dest = f"s3a://{s3_bucket}/empty"
    frame(spark, 0).write.parquet(dest)
    assert spark.read.parquet(dest).count() == 0
    assert success(s3_client, s3_bucket, "empty")["committer"] == "magic"
    check_clean(s3_client, s3_bucket, "empty/")


@pytest.mark.parametrize(("committer", "mode"), [pytest.param("directory", "append", marks=pytest.mark.slow),
                                                 ("directory", "replace"),
                                                 pytest.param("partitioned", "append", marks=pytest.mark.slow),
                                                 ("partitioned", "replace"), ("partitioned", "fail")],
                         indirect=["committer"])  # appends in the slow tier: the default tier's budget (README)
def test_staging_committers_through_spark(spark, committer, mode, s3_client, s3_bucket):
    dest = f"s3a://{s3_bucket}/stg"
    frame(spark, 12).write.partitionBy("a").parquet(dest)
    spark.conf.set("fs.s3a.committer.staging.conflict-mode", mode)
    new = spark.range(4).selectExpr("id + 100 as id", "3 as a", "0 as b", "'n' as s")  # a new partition
    if mode == "fail":
        new.write.mode("append").partitionBy("a").parquet(dest)
        with pytest.raises(Exception, match="conflict mode is 'fail'"):
            new.write.mode("append").partitionBy("a").parquet(dest)
        expected = 16
    else:
        new.write.mode("append").partitionBy("a").parquet(dest)
        expected = {"append": 16, "replace": 4 if committer == "directory" else 16}[mode]
    assert spark.read.parquet(dest).count() == expected
    if mode != "fail":  # a failed job leaves no _SUCCESS (job setup deletes the old one, as in Hadoop)
        assert success(s3_client, s3_bucket, "stg")["committer"] == committer
    check_clean(s3_client, s3_bucket, "stg/")
    # The tasks wrote their files through the raw staging file system (no .crc files, large writes).
    written = {str(s.getScheme()): int(s.getBytesWritten())
               for s in spark._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()}
    assert written.get("s3commit-staging", 0) > 0, written


@pytest.mark.parametrize("algorithm", ["1", pytest.param("2", marks=pytest.mark.slow)])  # the default tier's budget
def test_spark_default_protocol_runs_over_the_s3a_filesystem(spark, committer, s3_client, s3_bucket, algorithm):
    spark.conf.set("spark.sql.sources.commitProtocolClass", DEFAULT_PROTOCOL)
    spark.conf.set("mapreduce.fileoutputcommitter.algorithm.version", algorithm)
    dest = f"s3a://{s3_bucket}/foc{algorithm}"
    frame(spark, 40).write.partitionBy("a").parquet(dest)
    assert spark.read.parquet(dest).count() == 40
    marker = s3_client.get_object(Bucket=s3_bucket, Key=f"foc{algorithm}/_SUCCESS")["Body"].read()
    assert marker == b""  # FileOutputCommitter's 0-byte marker
    assert [k for k in list_keys(s3_client, s3_bucket, f"foc{algorithm}/") if "_temporary" in k] == []


def test_output_metrics_report_real_bytes_and_files(spark, committer, s3_client, s3_bucket):
    dest = f"s3a://{s3_bucket}/metrics"
    spark.sparkContext.setJobDescription("metrics-write")
    frame(spark, 50).repartition(2).write.parquet(dest)
    size = sum(s3_client.head_object(Bucket=s3_bucket, Key=k)["ContentLength"]
               for k in data_keys(s3_client, s3_bucket, "metrics/"))
    store = spark.sparkContext._jsc.sc().statusStore()
    written = 0
    for _ in range(50):  # the status store is fed asynchronously by the listener bus
        stages = store.stageList(None, False, False, getattr(store, "stageList$default$4")(), None)
        written = sum(stages.apply(i).outputBytes() for i in range(stages.size())
                      if stages.apply(i).description().isDefined()
                      and stages.apply(i).description().get() == "metrics-write")
        if written:
            break
        time.sleep(0.1)
    spark.sparkContext.setJobDescription(None)
    # Magic files are uncompleted uploads while tasks run: the FileSystem reports their real length.
    assert written == size > 0
    assert len(success(s3_client, s3_bucket, "metrics")["filenames"]) == 2


def custom_location_table(spark, bucket, name):
    """A partitioned table at ``s3a://bucket/<name>`` whose partition p=1 lives elsewhere in the bucket."""
    spark.sql(f"CREATE TABLE {name} (id INT, p INT) USING parquet PARTITIONED BY (p) "
              f"LOCATION 's3a://{bucket}/{name}'")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION (p=1) LOCATION 's3a://{bucket}/custom/{name}-p1'")


def test_custom_partition_location_is_written_without_rename(spark, committer, s3_client, s3_bucket):
    # Given: a table whose partition p=1 has a custom location outside the table's directory.
    custom_location_table(spark, s3_bucket, "abs_append")
    try:
        spark.sql("INSERT INTO abs_append VALUES (1, 1), (2, 2), (3, 1)")
        # Then: p=1's file is at the custom location, p=2's under the table; no copy was made.
        custom = [k for k in data_keys(s3_client, s3_bucket, "custom/abs_append-p1/") if k.endswith(".parquet")]
        assert custom and all(re.search(r"/part-\d{5}-[0-9a-f-]{36}\.c000\.snappy\.parquet$", k) for k in custom)
        assert [k for k in data_keys(s3_client, s3_bucket, "abs_append/") if "p=1" in k] == []
        assert sorted(r.id for r in spark.sql("SELECT id FROM abs_append WHERE p = 1").collect()) == [1, 3]
        assert spark.sql("SELECT * FROM abs_append").count() == 3
        assert {f"/{k}" for k in custom} <= set(success(s3_client, s3_bucket, "abs_append")["filenames"])
        check_clean(s3_client, s3_bucket, "")
    finally:
        spark.sql("DROP TABLE IF EXISTS abs_append")


def test_dynamic_overwrite_replaces_a_custom_partition_location(spark, committer, s3_client, s3_bucket):
    custom_location_table(spark, s3_bucket, "abs_dpo")
    try:
        spark.sql("INSERT INTO abs_dpo VALUES (1, 1), (2, 2)")
        old_custom = data_keys(s3_client, s3_bucket, "custom/abs_dpo-p1/")
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        spark.sql("INSERT OVERWRITE TABLE abs_dpo VALUES (10, 1), (11, 1)")
        # The custom partition holds only the new rows; p=2 is untouched.
        assert sorted(r.id for r in spark.sql("SELECT id FROM abs_dpo").collect()) == [2, 10, 11]
        new_custom = data_keys(s3_client, s3_bucket, "custom/abs_dpo-p1/")
        assert not set(old_custom) & set(new_custom)
        check_clean(s3_client, s3_bucket, "")
    finally:
        spark.sql("DROP TABLE IF EXISTS abs_dpo")


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_static_overwrite_of_a_custom_location_deletes_only_at_job_commit(spark, committer, s3_client, s3_bucket):
    custom_location_table(spark, s3_bucket, "abs_static")
    spark.udf.register("explode_on_7", explode_on_7(), "long")
    try:
        spark.sql("INSERT INTO abs_static VALUES (1, 1), (2, 2)")
        old_custom = data_keys(s3_client, s3_bucket, "custom/abs_static-p1/")
        # A static overwrite of p=1 (Spark asks the protocol to delete the custom location) whose job fails:
        # the deletion was to wait for the job commit, so the old rows are still there.
        with pytest.raises(Exception, match="boom in a task"):
            spark.sql("INSERT OVERWRITE TABLE abs_static PARTITION (p=1) SELECT explode_on_7(id) FROM range(10)")
        assert data_keys(s3_client, s3_bucket, "custom/abs_static-p1/") == old_custom
        assert sorted(r.id for r in spark.sql("SELECT id FROM abs_static").collect()) == [1, 2]
        # The same overwrite, succeeding: p=1 holds only the new rows, p=2 is untouched.
        spark.sql("INSERT OVERWRITE TABLE abs_static PARTITION (p=1) VALUES (10), (11)")
        assert sorted(r.id for r in spark.sql("SELECT id FROM abs_static").collect()) == [2, 10, 11]
        assert not set(old_custom) & set(data_keys(s3_client, s3_bucket, "custom/abs_static-p1/"))
        check_clean(s3_client, s3_bucket, "")
    finally:
        spark.sql("DROP TABLE IF EXISTS abs_static")


@pytest.mark.parametrize("committer", ["directory"], indirect=True)
def test_staging_committers_refuse_custom_partition_locations_by_name(spark, committer, s3_client, s3_bucket):
    custom_location_table(spark, s3_bucket, "abs_staging")
    try:
        with pytest.raises(Exception, match="the directory committer writes only under its destination"):
            spark.sql("INSERT INTO abs_staging VALUES (1, 1)")
        # Nothing written (the custom location's directory marker, from ALTER TABLE, aside).
        assert [k for k in list_keys(s3_client, s3_bucket) if not k.endswith("/")] == []
        check_clean(s3_client, s3_bucket, "")
    finally:
        spark.sql("DROP TABLE IF EXISTS abs_staging")


@pytest.mark.parametrize("committer", ["magic", "directory", pytest.param("partitioned", marks=pytest.mark.slow)],
                         indirect=True)  # partitioned in the slow tier for the default tier's time budget
def test_checksums_validation_and_summary_reports_through_spark(spark, committer, s3_client, s3_bucket):
    # S3A's keys as a Spark user sets them: one report per job in the directory, after a success and after a
    # failed job (a task that always fails: the job is aborted); every committed file validated.
    reports = f"s3a://{s3_bucket}/reports"
    spark.conf.set("fs.s3a.committer.summary.report.directory", reports)
    spark.conf.set("s3commit.committer.validate.output", "true")
    spark.conf.set("fs.s3a.create.checksum.algorithm", "SHA256")
    try:
        frame(spark).write.partitionBy("a").parquet(f"s3a://{s3_bucket}/checked")
        marker = success(s3_client, s3_bucket, "checked")
        with pytest.raises(Exception, match="always fails"):
            frame(spark).selectExpr("cast(assert_true(id < 0, 'always fails') AS bigint) AS x", "a").write.parquet(
                f"s3a://{s3_bucket}/failed")
    finally:
        for key in ("fs.s3a.committer.summary.report.directory", "s3commit.committer.validate.output",
                    "fs.s3a.create.checksum.algorithm"):
            spark.conf.unset(key)
    assert marker["diagnostics"]["fs.s3a.create.checksum.algorithm"] == "SHA256"
    assert marker["metrics"]["committer_objects_validated"] == len(data_keys(s3_client, s3_bucket, "checked/"))
    found = {json.loads(s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read())["success"]: key
             for key in list_keys(s3_client, s3_bucket, "reports/")}
    assert set(found) == {True, False} and len(list_keys(s3_client, s3_bucket, "reports/")) == 2
    assert found[True] == f"reports/summary-{marker['jobId']}.json"
    check_clean(s3_client, s3_bucket, "checked/")
    check_clean(s3_client, s3_bucket, "failed/")
