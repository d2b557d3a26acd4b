"""Snapshot destinations read by stock Spark (issue 55): a destination whose log s3commit keeps is read by Spark's own
``MetadataLogFileIndex`` (``spark.read.parquet(dest)``, ORC, CSV, a table at that location): only the current
snapshot's files, never the replaced ones still in the store, never a commit under way. Spark writes through
``S3CommitProtocol`` (DataFrame and SQL, overwrite, dynamic partition overwrite, append) publish the snapshots."""

from __future__ import annotations

import pytest

import s3commit
from s3commit.commit.snapshots import SnapshotLog
from s3commit.model.uri import S3Uri
from testbed.fixtures import every_server_fixture

pytestmark = pytest.mark.spark
s3_server = every_server_fixture()


def rows(spark, start: int, count: int, day_of=lambda i: i % 4):
    return spark.createDataFrame([(start + i, day_of(i)) for i in range(count)], "id long, day int")


def ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


@pytest.mark.parametrize("fmt", ["parquet", "orc", "csv"])
def test_spark_reads_only_the_current_snapshot_after_overwrites(spark, committer, store, s3_bucket, fmt):
    dest = f"s3a://{s3_bucket}/snap-{fmt}"
    options = {"header": "true"} if fmt == "csv" else {}
    schema = "id long, day int"
    rows(spark, 0, 40).repartition(2).write.format(fmt).options(**options).partitionBy("day").save(dest)
    first = s3commit.enable_snapshots(dest, store=store)
    assert len(first.files) > 0
    rows(spark, 100, 20).repartition(2).write.format(fmt).options(**options).partitionBy("day") \
        .mode("overwrite").save(dest)
    snapshot = SnapshotLog(store, S3Uri.parse(dest)).current()
    assert snapshot is not None and snapshot.id == 1
    # The replaced files are still in the store (the retention horizon); Spark reads the log, not the listing.
    read = spark.read.format(fmt).options(**options).schema(schema).load(dest)
    assert ids(read) == list(range(100, 120))
    assert sorted(read.inputFiles()) == sorted(f"s3a://{s3_bucket}/snap-{fmt}/{f.relative}" for f in snapshot.files)
    assert len(list(store.objects.list_objects(s3_bucket, f"snap-{fmt}/day="))) == len(first.files) + len(
        snapshot.files)
    # The executors' task commits completed the files (the store honours If-None-Match on Complete): the driver's
    # job commit sent no Complete for them (s3commit.snapshot.complete-at-task-commit).
    success = s3commit.SuccessData.from_json(store.objects.get_object(s3_bucket, f"snap-{fmt}/_SUCCESS"))
    assert success.metrics["committer_commits_completed_at_task_commit"] == len(snapshot.files)
    assert success.metrics["committer_commits_completed"] == 0


def test_dynamic_partition_overwrite_append_and_sql_publish_snapshots(spark, committer, store, s3_bucket):
    dest = f"s3a://{s3_bucket}/snap-dyn"
    rows(spark, 0, 40).write.partitionBy("day").parquet(dest)
    s3commit.enable_snapshots(dest, store=store)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    rows(spark, 100, 5, day_of=lambda i: 1).write.partitionBy("day").mode("overwrite").parquet(dest)
    assert ids(spark.read.parquet(dest)) == sorted([i for i in range(40) if i % 4 != 1] + list(range(100, 105)))
    rows(spark, 200, 3).write.partitionBy("day").mode("append").parquet(dest)
    assert len(ids(spark.read.parquet(dest))) == 30 + 5 + 3
    spark.sql(f"CREATE TABLE snap_t (id long, day int) USING parquet PARTITIONED BY (day) LOCATION '{dest}'")
    try:
        spark.sql("INSERT OVERWRITE TABLE snap_t SELECT id + 1000, day FROM snap_t WHERE day = 2")
        assert SnapshotLog(store, S3Uri.parse(dest)).current().id == 3
        after = ids(spark.read.parquet(dest))
        assert [i for i in after if i >= 1000] == sorted(i + 1000 for i in [2, 6, 10, 14, 18, 22, 26, 30, 34, 38,
                                                                          202])
    finally:
        spark.sql("DROP TABLE IF EXISTS snap_t")
    snapshot = SnapshotLog(store, S3Uri.parse(dest)).current()
    assert snapshot is not None
    assert {f.relative.split("/")[0] for f in snapshot.files} == {"day=0", "day=1", "day=2", "day=3"}


def test_rdd_writes_publish_snapshots_that_stock_spark_reads(spark, store, s3_bucket):
    """``saveAsNewAPIHadoopFile`` (magic) then ``saveAsTextFile`` (directory, conflict mode ``replace``: the RDD
    API's overwrite) to a snapshot destination: each publishes the next snapshot of exactly its files, and
    ``spark.read`` of the destination reads exactly that snapshot."""
    dest = f"s3a://{s3_bucket}/snap-rdd"
    first_rows, second_rows = [f"first {i:02d}" for i in range(20)], [f"second {i:02d}" for i in range(9)]
    sc = spark.sparkContext
    hadoop = sc._jsc.hadoopConfiguration()
    assert s3commit.enable_snapshots(dest, store=store).files == ()  # snapshot 0: no file
    # The destination exists now (its log): Spark's output-spec check would refuse it before any committer is asked
    # (docs/spark.md, RDD writes: "Existing output").
    sc._conf.set("spark.hadoop.validateOutputSpecs", "false")
    try:
        sc.parallelize(first_rows, 4).map(lambda line: (line, len(line))).saveAsNewAPIHadoopFile(
            dest, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat", keyClass="org.apache.hadoop.io.Text",
            valueClass="org.apache.hadoop.io.IntWritable")
        first = s3commit.current_files(dest, store=store)
        assert first.id == 1 and sorted(first.relatives) == [f"part-r-{n:05d}" for n in range(4)]
        read = spark.read.text(dest)
        assert sorted(r.value for r in read.collect()) == sorted(f"{line}\t{len(line)}" for line in first_rows)
        assert sorted(read.inputFiles()) == [f"{dest}/part-r-{n:05d}" for n in range(4)]

        hadoop.set("fs.s3a.committer.name", "directory")
        hadoop.set("fs.s3a.committer.staging.conflict-mode", "replace")
        sc.parallelize(second_rows, 3).saveAsTextFile(dest)
        marker = s3commit.SuccessData.from_json(store.objects.get_object(s3_bucket, "snap-rdd/_SUCCESS"))
        second = s3commit.current_files(dest, store=store)
        assert second.id == 2 and marker.metrics["committer_snapshot"] == 2
        assert sorted(second.relatives) == [f"part-{n:05d}-{marker.job_id}" for n in range(3)]
        assert marker.metrics["committer_files_replaced"] == 4
        read = spark.read.text(dest)
        assert sorted(r.value for r in read.collect()) == second_rows
        assert sorted(read.inputFiles()) == sorted(f"{dest}/{relative}" for relative in second.relatives)
        # The replaced files stay in the store for the retention horizon: only the log leaves them out.
        listed = {info.key for info in store.objects.list_objects(s3_bucket, "snap-rdd/part-")}
        assert listed == {f"snap-rdd/{r}" for r in first.relatives | second.relatives}
    finally:
        sc._conf.set("spark.hadoop.validateOutputSpecs", "true")
        hadoop.set("fs.s3a.committer.name", "magic")  # what the session's configure() set
        hadoop.unset("fs.s3a.committer.staging.conflict-mode")


def test_a_second_magic_rdd_write_is_refused_rather_than_rewrite_the_snapshots_files_in_place(spark, store,
                                                                                               s3_bucket):
    """RDD writes through magic name their files without the job id (part-r-00000): a second write to a snapshot
    destination would rewrite the files of the retained snapshot under its readers. It is refused, naming why and
    the fix; the snapshot and its files stay as they were."""
    from py4j.protocol import Py4JJavaError

    dest = f"s3a://{s3_bucket}/snap-rdd-again"
    sc = spark.sparkContext
    s3commit.enable_snapshots(dest, store=store)
    sc._conf.set("spark.hadoop.validateOutputSpecs", "false")  # the log exists: see the test above

    def write(rows, partitions):
        sc.parallelize(rows, partitions).map(lambda line: (line, 1)).saveAsNewAPIHadoopFile(
            dest, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat", keyClass="org.apache.hadoop.io.Text",
            valueClass="org.apache.hadoop.io.IntWritable")

    try:
        first_rows, second_rows = [f"a{i}" for i in range(8)], [f"second {i}" for i in range(4)]
        write(first_rows, 4)
        first = s3commit.current_files(dest, store=store)
        bodies = {f.relative: store.objects.get_object(s3_bucket, f"snap-rdd-again/{f.relative}") for f in first.files}
        with pytest.raises(Py4JJavaError, match=r"rewrite them in place.*mapreduce.output.basename"):
            write(second_rows, 2)  # an append (the RDD API has no mode), two tasks, the same names
        assert s3commit.current_files(dest, store=store) == first
        now = {r: store.objects.get_object(s3_bucket, f"snap-rdd-again/{r}") for r in bodies}
        assert now == bodies
        assert sorted(r.value.split("\t")[0] for r in spark.read.text(dest).collect()) == sorted(first_rows)
        assert list(store.uploads.list_multipart_uploads(s3_bucket, "snap-rdd-again/")) == []
    finally:
        sc._conf.set("spark.hadoop.validateOutputSpecs", "true")
