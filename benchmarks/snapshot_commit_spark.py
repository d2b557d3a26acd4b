"""The job commit of a snapshot destination through Spark, at one shape: Spark's own ``job commit time`` and the
driver's work after the last task (the write's return less the last Spark job's completion in the status store).

``python -m benchmarks.snapshot_commit_spark TASKS DAYS [ROUNDS]``: PySpark (``local[2]``), s3commit's magic committer
appending TASKS x DAYS files (10 rows each) to an empty snapshot destination each round (uploads completed at task
commit, the default), on the embedded S3 with the ``s3-standard`` latencies; a small warm-up write first. Shapes as
:mod:`benchmarks.peers_bench`'s: 10 10 (100 files), 10 100 (1,000), 50 200 (10,000).
"""

from __future__ import annotations

import sys
import time
import uuid


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    import s3commit
    from s3commit.config.options import StoreOptions
    from s3commit.demo.measure import job_commit_seconds
    from s3commit.spark import configure
    from s3commit.testing.server import S3TestServer

    tasks, days = int(argv[0]), int(argv[1])
    rounds = int(argv[2]) if len(argv) > 2 else 3
    with S3TestServer(profile="s3-standard") as server:
        bucket = server.create_bucket("snapshot-commit")
        store = s3commit.S3Store(StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                                              access_key="testing", secret_key="testing"))
        builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
        spark = configure(builder, committer="magic", endpoint_url=server.endpoint_url, region="us-east-1",
                          access_key="testing", secret_key="testing").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        status = spark.sparkContext._jsc.sc().statusStore()
        for number in range(rounds + 1):
            t, d = (tasks, days) if number else (4, 5)
            dest = f"s3a://{bucket}/t-{number}"
            s3commit.enable_snapshots(dest, store=store)
            description = f"snapshot-commit-{number}-{uuid.uuid4().hex[:6]}"
            spark.sparkContext.setJobDescription(description)
            frame = spark.range(t * d * 10, numPartitions=t).selectExpr("id", f"cast(id % {d} as string) as day")
            frame.write.partitionBy("day").mode("append").parquet(dest)
            returned = time.time()
            spark.sparkContext.setJobDescription(None)
            if not number:
                continue
            commit = job_commit_seconds(spark, description)
            time.sleep(0.5)  # the status store is fed asynchronously
            jobs = status.jobsList(None)
            ends = [jobs.apply(i).completionTime().get().getTime() / 1000 for i in range(jobs.size())
                    if jobs.apply(i).description().isDefined() and jobs.apply(i).description().get() == description]
            print(f"round {number}: {t * d} files: Spark's job commit time {commit:.3f} s, the driver's work after "
                  f"the last task {returned - max(ends):.3f} s", flush=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
