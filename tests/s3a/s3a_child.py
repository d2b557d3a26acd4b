"""One Spark application with Hadoop's S3A serving ``s3a://`` (its jars on ``spark.jars``, no s3commit), in a
process of its own: a JVM with S3A's jars cannot be the one the test suite's s3commit sessions share. Prints one
JSON line: the result, or the error.

``python s3a_child.py upload ENDPOINT BUCKET KEY SIZE [KEY=VALUE ...]``: write SIZE pseudo-random bytes to
``s3a://BUCKET/KEY`` through S3A's FileSystem API; prints their SHA-256.

``python s3a_child.py magic ENDPOINT BUCKET TABLE ROWS [KEY=VALUE ...]``: write a DataFrame of 4 partitions to
``s3a://BUCKET/TABLE`` through S3A's magic committer (PathOutputCommitProtocol), read it back; prints the count.

Each ``KEY=VALUE`` is one more Spark setting (e.g. ``spark.hadoop.fs.s3a.multipart.size=5M``), over
:func:`testbed.s3a.s3a_conf`'s.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testbed.s3a import s3a_committer_conf, s3a_conf

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""As the suite's drivers (tests/spark/conftest.py): C1 only and one GC thread, on a 2-core machine."""
CHUNK = 1 << 20


def session(endpoint: str, conf: dict[str, str], name: str) -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(name)
               .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in {**s3a_conf(endpoint), **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def upload(endpoint: str, bucket: str, key: str, size: int, conf: dict[str, str]) -> dict[str, Any]:
    spark = session(endpoint, conf, "s3a-upload")
    try:
        jvm = spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/{key}")
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        data = random.Random(size).randbytes(size)
        out = fs.create(path, True)
        for start in range(0, size, CHUNK):
            out.write(bytearray(data[start:start + CHUNK]))
        out.close()
        return {"ok": True, "sha256": hashlib.sha256(data).hexdigest(), "size": size,
                "filesystem": fs.getClass().getName(), "length": fs.getFileStatus(path).getLen()}
    finally:
        spark.stop()


def magic(endpoint: str, bucket: str, table: str, rows: int, conf: dict[str, str]) -> dict[str, Any]:
    spark = session(endpoint, {**s3a_committer_conf("magic"), **conf}, "s3a-magic")
    try:
        dest = f"s3a://{bucket}/{table}"
        frame = spark.range(0, rows, numPartitions=4).selectExpr("id", "id % 7 as k")
        frame.write.mode("overwrite").parquet(dest)
        return {"ok": True, "count": spark.read.parquet(dest).count(),
                "protocol": spark.conf.get("spark.sql.sources.commitProtocolClass")}
    finally:
        spark.stop()


def main() -> int:
    mode, endpoint, bucket, name, amount, *settings = sys.argv[1:]
    conf = dict(setting.split("=", 1) for setting in settings)
    try:
        if mode == "upload":
            result = upload(endpoint, bucket, name, int(amount), conf)
        elif mode == "magic":
            result = magic(endpoint, bucket, name, int(amount), conf)
        else:
            raise ValueError(f"unknown mode {mode!r}")
    except Exception as err:
        result = {"ok": False, "error": f"{type(err).__name__}: {str(err)[:6000]}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
