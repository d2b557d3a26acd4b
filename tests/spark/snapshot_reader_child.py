"""A stock Spark reader in a process of its own, reading a table in a loop while another process overwrites it (the
reader-loop tests of snapshot destinations, issue 55). One JSON line a read: the rows by partition and job, or the
error.

``python snapshot_reader_child.py MODE ENDPOINT TABLE STOP_FILE MIN_READS``: MODE ``s3commit`` reads in a session
from ``s3commit.spark.configure()``; ``s3a`` in a session with Hadoop's S3A and no s3commit at all
(:func:`testbed.s3a.s3a_conf`). It reads ``spark.read.parquet(TABLE)`` until STOP_FILE exists and it has read at
least MIN_READS times.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def session(mode: str, endpoint: str):  # type: ignore[no-untyped-def]
    from tests.s3a.spark_children import builder

    if mode == "s3a":
        from testbed.s3a import s3a_conf

        return builder("snapshot-reader-s3a", s3a_conf(endpoint, driver_classpath=True)).getOrCreate()
    from s3commit.spark import configure

    return configure(builder("snapshot-reader-s3commit", {}), endpoint_url=endpoint, region="us-east-1",
                     access_key="testing", secret_key="testing").getOrCreate()


def main() -> int:
    mode, endpoint, table, stop_file, min_reads = sys.argv[1:6]
    spark = session(mode, endpoint)
    spark.sparkContext.setLogLevel("OFF")
    print(json.dumps({"ready": True}), flush=True)
    reads = 0
    while not os.path.exists(stop_file) or reads < int(min_reads):
        try:
            rows = spark.read.parquet(table).groupBy("day", "job").count().collect()
            print(json.dumps({"rows": [[r["day"], r["job"], r["count"]] for r in rows]}), flush=True)
        except Exception as err:
            print(json.dumps({"error": str(err).splitlines()[0][:300] if str(err) else type(err).__name__}),
                  flush=True)
        reads += 1
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
