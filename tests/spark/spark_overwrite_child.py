"""One Spark application in a process of its own that overwrites a table when a "go" file appears (the
concurrent-writers test starts two at once). Prints one JSON line: its application's job id as ``_SUCCESS``
names it, or the error."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.spark.conftest import spark_builder


class Server:
    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url


def main() -> int:
    endpoint, dest, tag, go = sys.argv[1:5]
    spark = spark_builder("local[2]", Server(endpoint)).appName(f"overwrite-{tag}").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.range(0, 2000, numPartitions=4).selectExpr("id", f"'{tag}' as writer", "id % 2 as p")
    frame.limit(1).collect()  # warm: the JVM, the sidecar
    print(json.dumps({"ready": tag}), flush=True)
    while not os.path.exists(go):
        time.sleep(0.01)
    try:
        frame.write.mode("overwrite").partitionBy("p").parquet(dest)
        result = {"ok": True, "tag": tag}
    except Exception as err:
        result = {"ok": False, "tag": tag, "error": f"{type(err).__name__}: {str(err)[:2000]}"}
    print(json.dumps(result), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
