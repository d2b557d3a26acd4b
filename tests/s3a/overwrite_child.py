"""One Spark application overwriting ``s3a://BUCKET/DEST`` with ROWS rows tagged TAG, with S3A serving ``s3a://``
and committing through S3A's magic committer (``s3a``) or through s3commit's (``s3commit``: hadoop-aws kept,
``configure(committer="magic", use_s3a_filesystem=False)``). It warms up, writes the file READY, waits for the file GO,
then overwrites; prints one JSON line (``ok``, or the error's first line).

``python overwrite_child.py s3a|s3commit ENDPOINT BUCKET DEST TAG ROWS READY GO``
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testbed.s3a import s3a_committer_conf, s3a_conf
from tests.s3a.spark_children import builder, cause_line


def main() -> int:
    peer, endpoint, bucket, dest, tag, rows, ready, go = sys.argv[1:]
    conf = {**s3a_conf(endpoint, driver_classpath=True), **(s3a_committer_conf("magic") if peer == "s3a" else {})}
    built = builder(f"overwrite-{peer}-{tag}", conf)
    if peer == "s3commit":
        from s3commit.spark import configure

        built = configure(built, committer="magic", use_s3a_filesystem=False)
    spark = built.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.range(0, 10).write.mode("overwrite").parquet(f"s3a://{bucket}/warm-up-{tag}")
        Path(ready).touch()
        deadline = time.monotonic() + 300
        while not Path(go).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        frame = spark.range(0, int(rows), numPartitions=8).selectExpr("id", f"'{tag}' as tag")
        try:
            frame.write.mode("overwrite").parquet(f"s3a://{bucket}/{dest}")
            result = {"ok": True, "tag": tag}
        except Exception as err:
            result = {"ok": False, "tag": tag, "error": cause_line(err)}
    finally:
        spark.stop()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
