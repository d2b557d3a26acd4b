"""RDD and Hadoop OutputFormat writes (``saveAsTextFile``, ``saveAsHadoopFile``, ``saveAsSequenceFile``,
``saveAsNewAPIHadoopFile``, ``saveAsNewAPIHadoopDataset``) commit through s3commit's Hadoop committers:
``S3MapRedCommitter`` (old ``mapred`` API) and ``S3CommitterFactory`` -> ``S3OutputCommitter`` (new API),
which ``configure()`` binds. These writes never consult ``spark.sql.sources.commitProtocolClass``."""

from __future__ import annotations

import json
import re

import pytest

from s3commit.model.paths import is_scratch_key
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys
from testbed.fixtures import every_server_fixture
from tests.spark.conftest import DEFAULT_PROTOCOL
from tests.spark.test_spark_clusters import run

pytestmark = pytest.mark.spark
s3_server = every_server_fixture()

ROWS = [f"row {i:03d}" for i in range(40)]
SCRATCH = ("__magic_job-", "__staging_job-")


@pytest.fixture
def rdd_committer(spark, request):
    """Select the committer for RDD writes: they read the SparkContext's Hadoop configuration, not SQL's."""
    name = getattr(request, "param", "magic")
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set("fs.s3a.committer.name", name)
    yield name
    conf.set("fs.s3a.committer.name", "magic")  # what the session's configure() set


def text_pairs(spark):
    return spark.sparkContext.parallelize(ROWS, 4).map(lambda line: (line, len(line)))


def save_text_file(spark, dest):
    spark.sparkContext.parallelize(ROWS, 4).saveAsTextFile(dest)


def save_hadoop_file(spark, dest):
    text_pairs(spark).saveAsHadoopFile(dest, "org.apache.hadoop.mapred.TextOutputFormat",
                                       keyClass="org.apache.hadoop.io.Text",
                                       valueClass="org.apache.hadoop.io.IntWritable")


def save_sequence_file(spark, dest):
    text_pairs(spark).saveAsSequenceFile(dest)  # mapred.SequenceFileOutputFormat


def save_new_api_hadoop_file(spark, dest):
    text_pairs(spark).saveAsNewAPIHadoopFile(dest, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
                                             keyClass="org.apache.hadoop.io.Text",
                                             valueClass="org.apache.hadoop.io.IntWritable")


def save_new_api_hadoop_dataset(spark, dest):
    # PySpark passes this as a plain Configuration: spark.sql.sources.writeJobUUID never reaches the tasks.
    text_pairs(spark).saveAsNewAPIHadoopDataset({
        "mapreduce.output.fileoutputformat.outputdir": dest,
        "mapreduce.job.outputformat.class": "org.apache.hadoop.mapreduce.lib.output.SequenceFileOutputFormat",
        "mapreduce.job.output.key.class": "org.apache.hadoop.io.Text",
        "mapreduce.job.output.value.class": "org.apache.hadoop.io.IntWritable"})


# api -> (write, file name prefix, how to read the rows back)
APIS = {
    "saveAsTextFile": (save_text_file, "part-", "text"),
    "saveAsHadoopFile": (save_hadoop_file, "part-", "pairs"),
    "saveAsSequenceFile": (save_sequence_file, "part-", "sequence"),
    "saveAsNewAPIHadoopFile": (save_new_api_hadoop_file, "part-r-", "pairs"),
    "saveAsNewAPIHadoopDataset": (save_new_api_hadoop_dataset, "part-r-", "sequence"),
}


def data_keys(client, bucket, prefix):
    return [k for k in list_keys(client, bucket, prefix) if not k.endswith("/_SUCCESS") and not is_scratch_key(k)]


def read_rows(spark, client, bucket, keys, how, dest):
    """The rows of the committed files: from the objects themselves (text), or through Spark (sequence)."""
    if how == "sequence":
        return sorted(f"{k}\t{v}" for k, v in spark.sparkContext.sequenceFile(dest).collect())
    return sorted(line for key in keys
                  for line in client.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines())


def expected_rows(how):
    return sorted(ROWS) if how == "text" else sorted(f"{r}\t{len(r)}" for r in ROWS)


def check_clean(client, bucket, prefix):
    assert [k for k in list_keys(client, bucket, prefix) if any(s in k for s in SCRATCH)] == []
    assert_no_pending_uploads(client, bucket)


# Every API through magic and, for the new API's file writes, through the staging committers;
# the other staging pairs are in the slow tier for the default tier's time budget (README, Tests).
DEFAULT_STAGING_APIS = ("saveAsNewAPIHadoopFile",)


@pytest.mark.parametrize(("rdd_committer", "api"), [
    pytest.param(committer, api, id=f"{api}-{committer}",
                 marks=[] if committer == "magic" or api in DEFAULT_STAGING_APIS else [pytest.mark.slow])
    for committer in ("magic", "directory", "partitioned") for api in APIS], indirect=["rdd_committer"])
def test_rdd_write_commits_through_s3commit(spark, rdd_committer, s3_server, s3_client, s3_bucket, api):
    write, prefix, how = APIS[api]
    dest = f"s3a://{s3_bucket}/{api}"
    counted = hasattr(s3_server, "stats")  # moto's simulator counts requests; SeaweedFS has none in front
    before = s3_server.stats() if counted else None

    write(spark, dest)

    keys = data_keys(s3_client, s3_bucket, f"{api}/")
    marker = json.loads(s3_client.get_object(Bucket=s3_bucket, Key=f"{api}/_SUCCESS")["Body"].read())
    # One file per partition, Hadoop's names (staging adds the job id, its unique file names).
    suffix = f"-{marker['jobId']}" if rdd_committer != "magic" else ""
    assert keys == [f"{api}/{prefix}{n:05d}{suffix}" for n in range(4)]
    assert read_rows(spark, s3_client, s3_bucket, keys, how, dest) == expected_rows(how)
    # s3commit's JSON _SUCCESS, not FileOutputCommitter's empty one; every upload completed, none copied.
    assert marker["committer"] == rdd_committer
    assert sorted(marker["filenames"]) == [f"/{k}" for k in keys]
    if counted:
        requests = s3_server.stats().minus(before).requests
        assert requests.get("CopyObject", 0) == 0 and requests.get("UploadPartCopy", 0) == 0
        assert requests["CompleteMultipartUpload"] == 4
    check_clean(s3_client, s3_bucket, f"{api}/")


def observer(s3_server, bucket, prefix, *, fail):
    """A task function (nested: pickled by value for the workers) for ``mapPartitionsWithIndex``: partition 3
    waits until the 3 other tasks have committed (their pendingsets exist), then records what a reader of the
    destination sees, as its own rows; with ``fail`` it raises instead."""
    endpoint = s3_server.endpoint_url

    def task(index, rows):
        import time

        import boto3

        rows = list(rows)
        if index != 3:
            return rows
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")

        def keys():
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            return [o["Key"] for page in pages for o in page.get("Contents", [])]

        deadline = time.time() + 60
        while len([k for k in keys() if k.endswith(".pendingset")]) < 3 and time.time() < deadline:
            time.sleep(0.2)
        visible = [k for k in keys() if not is_scratch_key(k)]
        pendingsets = len([k for k in keys() if k.endswith(".pendingset")])
        if fail:
            raise RuntimeError(f"task 3 fails after the others committed ({pendingsets} pendingsets)")
        return [f"visible={visible}", f"pendingsets={pendingsets}"]

    return task


@pytest.mark.parametrize("rdd_committer", ["magic", "directory"], indirect=True)
@pytest.mark.parametrize("api", ["saveAsTextFile", "saveAsNewAPIHadoopFile"])
def test_nothing_is_visible_before_the_job_commits(spark, rdd_committer, s3_server, s3_client, s3_bucket, api):
    # Given: a write whose last task looks at the destination once the 3 others have committed their tasks.
    rows = spark.sparkContext.parallelize(ROWS, 4).mapPartitionsWithIndex(
        observer(s3_server, s3_bucket, f"{api}/", fail=False))
    dest = f"s3a://{s3_bucket}/{api}"
    if api == "saveAsTextFile":
        rows.saveAsTextFile(dest)
    else:
        rows.map(lambda r: (r, 0)).saveAsNewAPIHadoopFile(
            dest, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat", keyClass="org.apache.hadoop.io.Text",
            valueClass="org.apache.hadoop.io.IntWritable")
    # Then: that task saw the 3 committed tasks' pendingsets and no file; after the job commit all 4 are there.
    keys = data_keys(s3_client, s3_bucket, f"{api}/")
    observation = s3_client.get_object(Bucket=s3_bucket, Key=keys[3])["Body"].read().decode()
    assert "visible=[]" in observation and "pendingsets=3" in observation, observation
    assert len(keys) == 4
    check_clean(s3_client, s3_bucket, f"{api}/")


@pytest.mark.parametrize("rdd_committer", ["magic", "partitioned"], indirect=True)
@pytest.mark.parametrize("api", ["saveAsTextFile", "saveAsNewAPIHadoopFile"])
def test_a_failing_rdd_job_leaves_nothing_and_no_pending_uploads(spark, rdd_committer, s3_server, s3_client,
                                                                 s3_bucket, api):
    # Given: a write whose last task fails once the 3 others have committed (local[2]: no task retry).
    rows = spark.sparkContext.parallelize(ROWS, 4).mapPartitionsWithIndex(
        observer(s3_server, s3_bucket, f"{api}/", fail=True))
    dest = f"s3a://{s3_bucket}/{api}"
    with pytest.raises(Exception, match=r"task 3 fails after the others committed \(3 pendingsets\)"):
        if api == "saveAsTextFile":
            rows.saveAsTextFile(dest)
        else:
            rows.map(lambda r: (r, 0)).saveAsNewAPIHadoopFile(
                dest, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
                keyClass="org.apache.hadoop.io.Text", valueClass="org.apache.hadoop.io.IntWritable")
    # Then: the job abort removed the committed tasks' uploads and the job directory; nothing is left.
    assert list_keys(s3_client, s3_bucket, f"{api}/") == []
    assert_no_pending_uploads(s3_client, s3_bucket)


@pytest.mark.simulator
def test_four_files_cost_no_copy_against_eight_with_file_output_committer(spark, rdd_committer, s3_server,
                                                                          s3_client, s3_bucket):
    # s3commit (magic): 4 uploads completed at job commit, nothing copied.
    before = s3_server.stats()
    save_text_file(spark, f"s3a://{s3_bucket}/magic")
    magic = s3_server.stats().minus(before)
    # Hadoop's FileOutputCommitter (v1) over the same FileSystem: each file renamed twice, i.e. copied twice.
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set("mapred.output.committer.class", "org.apache.hadoop.mapred.FileOutputCommitter")
    try:
        before = s3_server.stats()
        save_text_file(spark, f"s3a://{s3_bucket}/foc")
        foc = s3_server.stats().minus(before)
    finally:
        conf.set("mapred.output.committer.class", "s3commit.hadoop.S3MapRedCommitter")
    print(f"\nmagic: {dict(sorted(magic.requests.items()))}\nFileOutputCommitter: {dict(sorted(foc.requests.items()))}")
    assert magic.requests.get("CopyObject", 0) == 0 and magic.copy_bytes == 0
    assert magic.requests["CreateMultipartUpload"] == magic.requests["CompleteMultipartUpload"] == 4
    assert foc.requests["CopyObject"] == 8 and foc.copy_bytes == 2 * sum(len(r) + 1 for r in ROWS)
    assert s3_client.get_object(Bucket=s3_bucket, Key="foc/_SUCCESS")["Body"].read() == b""
    assert json.loads(s3_client.get_object(Bucket=s3_bucket, Key="magic/_SUCCESS")["Body"].read())["success"]


def test_old_api_writes_outside_s3_keep_file_output_committer(spark, tmp_path):
    # mapred.output.committer.class applies to every destination: a local one gets Hadoop's committer.
    dest = tmp_path / "local"
    spark.sparkContext.parallelize(ROWS, 2).saveAsTextFile(f"file://{dest}")
    assert (dest / "_SUCCESS").read_bytes() == b""
    lines = sorted(line for part in dest.glob("part-*") for line in part.read_text().splitlines())
    assert lines == sorted(ROWS)
    assert not (dest / "_temporary").exists()


def test_spark_sql_default_protocol_with_a_non_parquet_format_is_refused_by_name(spark, committer, s3_client,
                                                                                  s3_bucket):
    # Spark's own SQL protocol asks FileOutputFormat for a committer (the s3a factory) for CSV, but its jobs
    # have no Hadoop job id and it writes into the destination directly: refused before any task runs.
    spark.conf.set("spark.sql.sources.commitProtocolClass", DEFAULT_PROTOCOL)
    with pytest.raises(Exception, match="Spark SQL's own commit protocol"):
        spark.range(5).write.csv(f"s3a://{s3_bucket}/csv")
    assert list_keys(s3_client, s3_bucket) == []


RETRY = """
    from pyspark import TaskContext
    rows = [f"row {i:03d}" for i in range(400)]

    def die_on_first_attempt(index, partition):
        for n, row in enumerate(partition):
            # Partition 1's first attempt dies after handing 50 rows to the open file.
            if index == 1 and TaskContext.get().attemptNumber() == 0 and n == 50:
                raise RuntimeError("first attempt dies mid-write")
            yield row

    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for committer, api in [("magic", "old"), ("magic", "new"), ("directory", "old")]:
        conf.set("fs.s3a.committer.name", committer)
        data = spark.sparkContext.parallelize(rows, 4).mapPartitionsWithIndex(die_on_first_attempt)
        dest = f"s3a://{bucket}/retry-{committer}-{api}"
        if api == "old":
            data.saveAsTextFile(dest)
        else:
            data.map(lambda r: (r, 1)).saveAsNewAPIHadoopFile(
                dest, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
                keyClass="org.apache.hadoop.io.Text", valueClass="org.apache.hadoop.io.IntWritable")
    print(json.dumps({"rows": len(rows)}))
    spark.stop()
"""


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_a_task_failing_on_its_first_attempt_leaves_exactly_one_copy(s3_server, s3_bucket, s3_client):
    out = run(RETRY, s3_server, s3_bucket, "local[2,3]")
    for dest in ("retry-magic-old", "retry-magic-new", "retry-directory-old"):
        keys = data_keys(s3_client, s3_bucket, f"{dest}/")
        assert len(keys) == 4 and all(re.search(r"/part-(r-)?0000[0-3]", k) for k in keys), keys
        lines = sorted(line.split("\t")[0] for key in keys
                       for line in s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read().decode().splitlines())
        assert lines == sorted(f"row {i:03d}" for i in range(out["rows"])), dest  # every row exactly once
        check_clean(s3_client, s3_bucket, f"{dest}/")


CLUSTER = """
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    rows = [f"row {i:03d}" for i in range(400)]
    for committer in ("magic", "directory"):
        conf.set("fs.s3a.committer.name", committer)
        data = spark.sparkContext.parallelize(rows, 4)
        data.saveAsTextFile(f"s3a://{bucket}/cluster-{committer}-old")
        data.map(lambda r: (r, 1)).saveAsNewAPIHadoopDataset({
            "mapreduce.output.fileoutputformat.outputdir": f"s3a://{bucket}/cluster-{committer}-new",
            "mapreduce.job.outputformat.class": "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
            "mapreduce.job.output.key.class": "org.apache.hadoop.io.Text",
            "mapreduce.job.output.value.class": "org.apache.hadoop.io.IntWritable"})
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print(json.dumps({"rows": len(rows), "executors": executors}))
    spark.stop()
"""


@pytest.mark.slow  # three JVMs (local-cluster), as the DataFrame variant in test_spark_clusters.py
def test_rdd_writes_from_two_executor_jvms_each_with_a_sidecar(s3_server, s3_bucket, s3_client):
    # The committer classes load in executor JVMs from spark.jars; staging task files stay on each executor.
    out = run(CLUSTER, s3_server, s3_bucket, "local-cluster[2,1,1024]")
    assert out["executors"] == 2
    for dest in ("cluster-magic-old", "cluster-magic-new", "cluster-directory-old", "cluster-directory-new"):
        keys = data_keys(s3_client, s3_bucket, f"{dest}/")
        assert len(keys) == 4, keys
        lines = sorted(line.split("\t")[0] for key in keys
                       for line in s3_client.get_object(Bucket=s3_bucket, Key=key)["Body"].read().decode().splitlines())
        assert lines == sorted(f"row {i:03d}" for i in range(out["rows"])), dest
        check_clean(s3_client, s3_bucket, f"{dest}/")
