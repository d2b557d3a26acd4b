"""One Spark application where Hadoop's S3A serves ``s3a://`` (hadoop-aws and its SDK on the classpath, the user's
S3A settings: :func:`testbed.s3a.s3a_conf`) and s3commit's protocol commits the writes
(``configure(..., use_s3a_filesystem=False)``, given no endpoint or credentials: the sidecars read S3A's keys).
Run in a process of its own; prints one JSON line: what each write left, or the error.

``python beside_child.py s3a-refusals ENDPOINT BUCKET PREFIX``: the same custom partition location and dynamic
partition overwrite through S3A's own magic committer (Spark's PathOutputCommitProtocol, no s3commit): what each
raises, the line of the error that says why.

``python beside_child.py COMMITTER ENDPOINT BUCKET PREFIX``: under ``s3a://BUCKET/PREFIX/``, with COMMITTER (magic,
directory, partitioned): DataFrame appends, a static overwrite, a dynamic partition overwrite, a SQL table with a
custom partition location (written by magic; refused by name by the staging committers), ``saveAsTextFile`` and
``saveAsNewAPIHadoopFile``; every read back through S3A.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testbed.s3a import s3a_committer_conf, s3a_conf
from tests.s3a.spark_children import builder, cause_line


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def session(endpoint: str, committer: str, said: _Lines) -> Any:
    from s3commit.spark import configure

    built = builder("s3commit-beside-s3a", s3a_conf(endpoint, driver_classpath=True))
    logging.getLogger("s3commit.spark").addHandler(said)
    logging.getLogger("s3commit.spark").setLevel(logging.INFO)
    spark = configure(built, committer=committer, use_s3a_filesystem=False).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def s3a_session(endpoint: str) -> Any:
    conf = {**s3a_conf(endpoint, driver_classpath=True), **s3a_committer_conf("magic")}
    spark = builder("s3a-refusals", conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def s3a_refusals(spark: Any, base: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    bucket, prefix = base.split("/")[2], "/".join(base.split("/")[3:])
    spark.sql(f"CREATE TABLE s3a_custom (id INT, p INT) USING parquet PARTITIONED BY (p) LOCATION '{base}/custom'")
    spark.sql(f"ALTER TABLE s3a_custom ADD PARTITION (p=1) LOCATION 's3a://{bucket}/{prefix}/elsewhere/p1'")
    try:
        spark.sql("INSERT INTO s3a_custom VALUES (1, 1), (2, 2)")
        out["custom"] = "written"
    except Exception as err:
        out["custom"] = cause_line(err, 600)
    rows(spark, 100).write.partitionBy("day").parquet(f"{base}/dpo")
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        rows(spark, 10).write.partitionBy("day").mode("overwrite").parquet(f"{base}/dpo")
        out["dynamic"] = "written"
    except Exception as err:
        out["dynamic"] = cause_line(err, 600)
    return out


def rows(spark: Any, n: int, start: int = 0) -> Any:
    return spark.range(start, start + n, numPartitions=4).selectExpr("id", "cast(id % 4 as int) as day")


def writes(spark: Any, committer: str, base: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    table = f"{base}/table"
    rows(spark, 1000).write.partitionBy("day").mode("append").parquet(table)
    rows(spark, 1000, 1000).write.partitionBy("day").mode("append").parquet(table)
    out["append"] = spark.read.parquet(table).count()

    rows(spark, 400, 5000).write.partitionBy("day").mode("overwrite").parquet(table)
    out["overwrite"] = spark.read.parquet(table).count()

    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    spark.range(9000, 9040, numPartitions=2).selectExpr("id", "1 as day") \
        .write.partitionBy("day").mode("overwrite").parquet(table)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")
    out["dynamic"] = {str(r.day): r["count"] for r in spark.read.parquet(table).groupBy("day").count().collect()}

    bucket = base.split("/")[2]
    prefix = "/".join(base.split("/")[3:])
    name = f"custom_{committer}"
    spark.sql(f"CREATE TABLE {name} (id INT, p INT) USING parquet PARTITIONED BY (p) LOCATION '{base}/{name}'")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION (p=1) LOCATION 's3a://{bucket}/{prefix}/elsewhere/{name}-p1'")
    try:
        spark.sql(f"INSERT INTO {name} VALUES (1, 1), (2, 2), (3, 1)")
        out["custom"] = sorted(r.id for r in spark.sql(f"SELECT id FROM {name} WHERE p = 1").collect())
    except Exception as err:  # the staging committers refuse a custom location, by name: that line of the error
        said = [line for line in str(err).splitlines() if "committer" in line]
        out["custom"] = f"{type(err).__name__}: {(said or [str(err)])[0][:600]}"
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")

    sc = spark.sparkContext
    sc.parallelize([f"line {i}" for i in range(100)], 4).saveAsTextFile(f"{base}/rdd-text")
    out["rdd_text"] = sc.textFile(f"{base}/rdd-text").count()
    sc.parallelize([(f"k{i}", i) for i in range(60)], 3).saveAsNewAPIHadoopFile(
        f"{base}/rdd-new", "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
        "org.apache.hadoop.io.Text", "org.apache.hadoop.io.IntWritable")
    out["rdd_new"] = sc.textFile(f"{base}/rdd-new").count()
    return out


def main() -> int:
    committer, endpoint, bucket, prefix = sys.argv[1:]
    said = _Lines()
    try:
        if committer == "s3a-refusals":
            spark = s3a_session(endpoint)
            try:
                print(json.dumps({"ok": True, **s3a_refusals(spark, f"s3a://{bucket}/{prefix}")}), flush=True)
            finally:
                spark.stop()
            return 0
        spark = session(endpoint, committer, said)
        try:
            jvm = spark._jvm
            hadoop = spark._jsc.hadoopConfiguration()
            base = f"s3a://{bucket}/{prefix}"
            fs = jvm.org.apache.hadoop.fs.Path(base).getFileSystem(hadoop)
            result = {"ok": True, "filesystem": fs.getClass().getName(), "configure_said": said.lines,
                      "jvm_says": jvm.s3commit.hadoop.MagicTaskFileSystem.describe(hadoop),
                      "writes": writes(spark, committer, base)}
            result["sidecar"] = json.loads(jvm.s3commit.bridge.Sidecar.countersJson())["requests"]
        finally:
            spark.stop()
    except Exception as err:
        result = {"ok": False, "error": f"{type(err).__name__}: {str(err)[:6000]}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
