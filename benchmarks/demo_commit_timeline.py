"""The demo's magic job commit as a timeline of its requests: where the driver's time after the tasks goes.

``python benchmarks/demo_commit_timeline.py [--rounds N] [--profile s3-standard]`` runs the demo's data (500,000 rows,
8 tasks x 4 partitions, so 32 files) through PySpark and the magic committer against the embedded S3, as ``s3commit
demo`` does (warm-up included), ``--rounds`` times, and prints for each round: the job commit as the demo reports it
(Spark's own ``job commit time``) and the write's wall time less the Spark job's, the requests the simulator saw after
the last task ended, each with its arrival and answer (ms after the tasks' end), and the commit's ``_SUCCESS`` timings.
Requests with the same operation arriving together are folded into one line (``32 x CompleteMultipartUpload``). Not
part of ``benchmarks/run.py``: a measurement of one path (benchmarks/results/demo-commit-floor-2026-11-28.md).
``--tasks``, ``--days`` and ``--rows`` change the shape (tasks x days files); ``--snapshot`` makes each round's
destination a snapshot destination first and appends to it (its uploads completed at task commit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from typing import Any

from s3commit.config.options import StoreOptions
from s3commit.demo.measure import ServerMeter, measured_write, use_protocol, warm_up
from s3commit.store.s3store import S3Store

ROWS, TASKS, PARTITIONS = 500_000, 8, 4


def spark_job_window(spark: Any, description: str) -> tuple[float, float]:
    """Submission and completion (epoch seconds) of the latest Spark job whose description starts with
    ``description``."""
    store = spark.sparkContext._jsc.sc().statusStore()
    for _ in range(50):
        jobs = store.jobsList(None)
        found = []
        for i in range(jobs.size()):
            job = jobs.apply(i)
            if job.description().isDefined() and job.description().get().startswith(description) \
                    and job.completionTime().isDefined() and job.submissionTime().isDefined():
                found.append((job.submissionTime().get().getTime() / 1000, job.completionTime().get().getTime() / 1000))
        if found:
            return max(found, key=lambda window: window[1])  # the latest: this round's
        time.sleep(0.1)
    raise RuntimeError(f"no Spark job {description}")


def fold(requests: list[dict[str, Any]], origin: float) -> list[str]:
    """One line per run of requests of one operation that arrived within 5 ms of the run's first."""
    lines: list[str] = []
    i = 0
    while i < len(requests):
        first = requests[i]
        j = i + 1
        while j < len(requests) and requests[j]["operation"] == first["operation"] \
                and requests[j]["at"] - first["at"] < 0.005:
            j += 1
        group = requests[i:j]
        answered = max((r["answered"] or r["at"]) for r in group)
        key = first["key"].rsplit("/", 2)
        lines.append(f"  {(first['at'] - origin) * 1000:7.0f} -> {(answered - origin) * 1000:5.0f} ms  "
                     f"{len(group):>2} x {first['operation']:<26} {'/'.join(key[-2:]) if len(group) == 1 else ''}")
        i = j
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default="s3-standard")
    parser.add_argument("--tasks", type=int, default=TASKS, help="tasks (each writes a file per day)")
    parser.add_argument("--days", type=int, default=PARTITIONS, help="partitions (days)")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--threads", type=int, default=None,
                        help="fs.s3a.committer.threads (default: the committer's own, as s3commit demo has it)")
    parser.add_argument("--snapshot", action="store_true",
                        help="each round's destination made a snapshot destination first, then appended to "
                             "(its uploads completed at task commit)")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from s3commit.spark import configure
    from s3commit.testing.server import S3TestServer

    with S3TestServer(profile=args.profile) as server:
        bucket = server.create_bucket("s3commit-demo")
        store = S3Store(StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                                     access_key="testing", secret_key="testing"))
        builder = (SparkSession.builder.master("local[2]").appName("s3commit-demo-timeline")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", str(args.tasks)))
        spark = configure(builder, committer="magic", endpoint_url=server.endpoint_url, region="us-east-1",
                          access_key="testing", secret_key="testing",
                          threads=args.threads).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            width = max(2, len(str(args.days)))
            day = f"concat('2026-11-', lpad(cast(id % {args.days} + 1 as string), {width}, '0')) as day"
            df = (spark.range(args.rows, numPartitions=args.tasks)
                  .selectExpr("id", day, "id * 0.5 as value", "sha2(cast(id as string), 256) as payload"))
            run = uuid.uuid4().hex[:8]
            warm_up(spark, df, f"s3a://{bucket}/warm-up-{run}", ["magic"])
            use_protocol(spark, "magic")
            commits, afters = [], []
            for round_ in range(args.rounds):
                dest = f"s3a://{bucket}/demo-{run}/magic-{round_}"
                if args.snapshot:
                    import s3commit

                    s3commit.enable_snapshots(dest.replace("s3a://", "s3://"), store=store)
                    server.reset_stats()
                started = time.time()
                report = measured_write(spark, ServerMeter(server), store, df, dest, "magic",
                                        mode="append" if args.snapshot else None)
                ended = started + report.total  # the write's end (before the harness reads what it left)
                log = server.request_log()
                tasks_start, tasks_end = spark_job_window(spark, "s3commit-demo-magic")
                after = [r for r in log if r["at"] >= tasks_end - 0.002]
                before = [r for r in log if r["at"] < tasks_start]
                commit = report.phases["job commit"]
                commits.append(commit)
                afters.append(ended - tasks_end)
                metrics = (report.success or {}).get("metrics", {})
                outside = report.total - (tasks_end - tasks_start)
                print(f"\nround {round_ + 1}: job commit {commit * 1000:.0f} ms (the demo's measure: Spark's own job "
                      f"commit time); the write's {report.total * 1000:.0f} ms less the Spark job's "
                      f"{(tasks_end - tasks_start) * 1000:.0f} ms: {outside * 1000:.0f} ms; "
                      f"the Spark job submitted {(tasks_start - started) * 1000:.0f} ms after the write began; "
                      f"the write ended {afters[-1] * 1000:.0f} ms after the last task")
                print(f" before the Spark job (job setup), ms after the write began: {len(before)} requests")
                print("\n".join(fold(before, started)))
                print(f" after the Spark job's last task, ms after it: {len(after)} requests")
                print("\n".join(fold(after, tasks_end)))
                print("  _SUCCESS timings: " + json.dumps({k: v for k, v in metrics.items()
                                                           if k.startswith("duration_")}))
                server.reset_stats()
            print(f"\njob commit over {args.rounds} rounds: median {statistics.median(commits) * 1000:.0f} ms "
                  f"(min {min(commits) * 1000:.0f}, max {max(commits) * 1000:.0f}); after the last task: median "
                  f"{statistics.median(afters) * 1000:.0f} ms (min {min(afters) * 1000:.0f}, "
                  f"max {max(afters) * 1000:.0f})")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
