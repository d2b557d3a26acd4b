"""Snapshot destinations (issue 55): what planning a read by the log costs against a plain listing, and the job
commit of a plain and of a snapshot destination against its files.

``plan``: a table of 1,000 Parquet files in 100 hive partitions on moto behind the simulator (``s3-standard``
latencies), made a snapshot destination. Each round plans a read three ways, in an order rotated each round: a plain
listing (``pyarrow.dataset.dataset`` over pyarrow's ``S3FileSystem``, as DuckDB, Trino and Athena list), the log
through s3commit's store (``s3commit.arrow.dataset``: one listing of ``_spark_metadata/`` and one GET of the entry),
and the log read by s3commit with pyarrow's ``S3FileSystem`` for the files. Planning ends when the dataset's file
list is known (``.files``). Medians and paired ratios against the listing.

``commit``: a magic job commit of N files (an overwrite of as many old files) on S3Wire
(:mod:`s3commit.testing.memory_wire`, ``s3-standard`` latencies, not throttled), each case in a process of its own,
the uploads and pendingsets made in the model as :mod:`benchmarks.scale_bench` prepares them (not timed), three
ways: to a plain destination; to a snapshot destination with every upload left to the job commit
(``s3commit.snapshot.complete-at-task-commit=false``); and with the uploads completed by the task commits and marked
in the pendingsets (the key's default: that work is the executors', in parallel, and not timed here). Timed: the
driver's job commit under the commit lease, as a driver that set the job up makes it (its setup read the lease,
free, and the log's settings; not timed); where the tasks completed their uploads, from their task commit messages
as the sidecar decodes them.

``peers`` (``--peers 100,1000``, only when asked): the same job commit through Spark, beside S3A's magic committer,
on moto behind the simulator (``s3-standard``, checksums validated): :mod:`benchmarks.peers_bench`'s shapes
``snap-100`` (10 tasks x 10 days) and ``snap-1k`` (10 x 100; ``snap-10k``, 50 x 200, when 10000 is named), 10 rows a
file, each written by s3commit's magic committer to a plain destination (``s3commit-magic``) and to an empty
snapshot destination (``s3commit-magic-snapshot``, appended to; uploads completed at task commit, the default), and
by S3A's magic committer (``s3a-magic``), each in its Spark application, rounds in an order rotated each round. The
job commit there is the whole write less the Spark jobs' time (job setup and planning included); nothing is
overwritten. Medians and paired ratios against S3A magic; the plot adds them as dashed series.

    python -m benchmarks.snapshot_bench [--plan-rounds 15] [--commit-files 100,1000,10000] [--peers 100,1000
        --peers-rounds 3] [--out results.json] [--plot snapshot-commit.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

PARTITIONS, FILES_PER_PARTITION = 100, 10


def plan_runs(rounds: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    import s3commit
    import s3commit.arrow
    from s3commit.config.options import StoreOptions
    from s3commit.testing.server import S3TestServer

    with S3TestServer(profile="s3-standard") as server:
        bucket = server.create_bucket("snapshot-bench")
        options = StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                               access_key="testing", secret_key="testing")
        store = s3commit.S3Store(options)
        dest = f"s3://{bucket}/t"
        rows = PARTITIONS * FILES_PER_PARTITION
        table = pa.table({"id": list(range(rows)), "day": [i % PARTITIONS for i in range(rows)]})
        for n in range(FILES_PER_PARTITION):  # ten appends: ten files in each of the 100 partitions
            s3commit.arrow.write_dataset(table.slice(n * PARTITIONS, PARTITIONS), dest, partitioning=["day"],
                                         store=store, threads=32)
        s3commit.enable_snapshots(dest, store=store)
        native = pafs.S3FileSystem(endpoint_override=server.endpoint_url.removeprefix("http://"), scheme="http",
                                   access_key="testing", secret_key="testing", region="us-east-1")
        paths = {
            "listing (pyarrow S3FileSystem)": lambda: ds.dataset(f"{bucket}/t", filesystem=native,
                                                                 partitioning="hive").files,
            "the log (s3commit.arrow.dataset)": lambda: s3commit.arrow.dataset(dest, store=store).files,
            "the log, files by pyarrow S3FileSystem": lambda: s3commit.arrow.dataset(
                dest, store=store, filesystem=native).files,
        }
        seconds: dict[str, list[float]] = {name: [] for name in paths}
        found: dict[str, int] = {}
        names = list(paths)
        for name in names:  # warm-up
            found[name] = len(paths[name]())
        for round_ in range(rounds):
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                started = time.perf_counter()
                paths[name]()
                seconds[name].append(time.perf_counter() - started)
        base = names[0]
        return {"files": found, "rounds": rounds, "server": "moto behind the simulator, s3-standard",
                "median_seconds": {n: round(statistics.median(s), 4) for n, s in seconds.items()},
                "paired_ratio_to_listing": {n: round(statistics.median(a / b for a, b in zip(s, seconds[base],
                                                                                              strict=True)), 3)
                                            for n, s in seconds.items()}}


VARIANTS = ("plain", "snapshot", "snapshot-task-commit")
"""The job commit's three ways: a plain destination; a snapshot destination, uploads completed at job commit; the
same, uploads completed at task commit."""


def commit_case(files: int, variant: str) -> dict[str, Any]:
    from benchmarks.scale_bench import BUCKET, PROFILE, prepare
    from s3commit.commit.engine import CommitEngine
    from s3commit.commit.lease import CommitLease
    from s3commit.commit.overwrite import OverwritePlan
    from s3commit.commit.process_state import ProcessState
    from s3commit.commit.snapshots import SnapshotLog, enable
    from s3commit.config.options import CommitterOptions, RetryPolicy
    from s3commit.model.paths import JobLayout
    from s3commit.model.task_message import TaskCommitMessage, carried_pendingsets
    from s3commit.model.uri import S3Uri
    from s3commit.testing.memory import MemoryS3
    from s3commit.testing.memory_wire import S3Wire

    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    job_id = str(uuid.uuid4())
    dest = S3Uri(BUCKET, "table")
    layout = JobLayout(dest.key, job_id)
    keys = prepare(s3, dest, layout, job_id, files, old=files, early=variant == "snapshot-task-commit")
    if variant != "plain":
        enable(s3.store(), dest, retention=86400.0)
    wire = S3Wire(s3, profile=PROFILE)
    store = wire.store(retry=RetryPolicy())
    # As the driver that set the job up holds them (not timed): the commit lease read at setup (free: the commit
    # takes it with one PUT) and, on a snapshot destination, the log's settings and latest entry.
    seen = ProcessState().seen
    lease = CommitLease(store, dest, job_id, seen=seen)
    lease.remember()
    SnapshotLog(store, dest, seen=seen).read_ahead()
    engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic",
                          options=CommitterOptions(journal=True), lease=lease, seen=seen)
    store.counters.reset()
    records = carried(s3, keys, job_id) if variant == "snapshot-task-commit" else None
    started = time.perf_counter()
    # Timed from the task commit messages as the sidecar receives them (decoded JSON), as the driver takes them.
    known = carried_pendingsets(map(TaskCommitMessage.from_dict, records), BUCKET) if records else None
    success = engine.run(keys, OverwritePlan(delete_paths=("",)), known=known)
    seconds = time.perf_counter() - started
    requests = store.counters.snapshot()["requests"]
    return {"files": files, "variant": variant, "seconds": round(seconds, 3), "requests": sum(requests.values()),
            "completes_sent": requests.get("CompleteMultipartUpload", 0),
            "deleted": success.metrics["committer_objects_deleted_by_overwrite"],
            "replaced": success.metrics.get("committer_files_replaced", 0),
            "timings_ms": {k.removeprefix("duration_").removesuffix("_ms"): v for k, v in success.metrics.items()
                           if k.startswith("duration_")}}


def peers_runs(files: list[int], rounds: int) -> dict[str, Any]:
    """:mod:`benchmarks.peers_bench`'s snapshot shapes (``snap-100``, ``snap-1k``, ``snap-10k``) on a server of
    their own, each shape ``rounds`` rounds (``snap-10k`` once unless ``rounds`` is given for it too)."""
    import tempfile

    from benchmarks.peers_bench import SNAPSHOT_SHAPES, peers_markdown, peers_sizes
    from benchmarks.peers_bench import peers_runs as run_peers
    from s3commit.testing.server import S3TestServer

    unknown = sorted(set(files) - set(SNAPSHOT_SHAPES))
    if unknown:
        raise SystemExit(f"--peers {unknown}: choose among {', '.join(map(str, SNAPSHOT_SHAPES))}")
    sizes = peers_sizes(False, ",".join(f"{SNAPSHOT_SHAPES[f]}:{rounds}" for f in files))
    with S3TestServer(profile="s3-standard") as server, tempfile.TemporaryDirectory() as work:
        bucket = server.create_bucket("snapshot-bench")
        peers = run_peers(server, bucket, sizes=sizes, workdir=work)
    print("\n".join(peers_markdown(peers)), flush=True)
    return peers


SPARK_SERIES = {"s3commit-magic": "s3commit magic, plain destination",
                "s3commit-magic-snapshot": "s3commit magic, snapshot destination (completed at task commit)",
                "s3a-magic": "S3A magic (plain destination)"}
"""The Spark job commits drawn beside the engine's (:func:`peers_runs`), by path."""


def spark_series(peers: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Per path, (files, median job commit seconds) over the snapshot shapes the run measured."""
    from benchmarks.peers_bench import SNAPSHOT_SHAPES

    series: dict[str, list[tuple[int, float]]] = {}
    for files, shape in sorted(SNAPSHOT_SHAPES.items()):
        for path, median in peers.get(shape, {}).get("medians", {}).items():
            series.setdefault(path, []).append((files, median["job_commit_seconds"]))
    return series


def carried(s3: Any, keys: list[str], job_id: str) -> list[dict[str, Any]]:
    """The task commit messages of the pendingsets ``keys`` (every upload completed at task commit), each as the
    sidecar decodes it from the JSON Spark carries: made from the model here, not timed."""
    import dataclasses
    import json

    from benchmarks.scale_bench import BUCKET
    from s3commit.model.manifests import PendingSet
    from s3commit.model.task_message import TaskCommitMessage, completed_files

    client = s3.store().requests.client
    records = []
    for key in keys:
        pendingset = PendingSet.from_json(client.get_object(Bucket=BUCKET, Key=key)["Body"].read(), source=key)
        message = TaskCommitMessage(job_id=job_id, task_id="t", task_attempt_id=pendingset.task_attempt_id,
                                    pendingset_key=key, files=len(pendingset.commits), bytes=pendingset.total_length,
                                    completed=completed_files(pendingset))
        records.append(json.loads(json.dumps(dataclasses.asdict(message))))
    return records


def plot(results: dict[str, Any], out: str) -> None:
    """The job commit against files (log-log): the engine in-process on S3Wire, plain and snapshot destinations;
    and, when the run has them (``--peers``), the Spark job commits of s3commit and S3A's magic committer on moto
    behind the simulator (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 6.5))
    engine = "in-process engine, S3Wire, overwrite: "
    for variant, label in (("plain", "plain destination (the overwrite deletes at commit)"),
                           ("snapshot", "snapshot destination (one log entry, no deletes)"),
                           ("snapshot-task-commit", "snapshot destination, uploads completed at task commit")):
        cases = sorted((c["files"], c["seconds"]) for c in results.get("commit", []) if c["variant"] == variant)
        if cases:
            ax.plot([f for f, _ in cases], [s for _, s in cases], marker="o", label=engine + label)
    spark = "through Spark, moto+simulator, append: "
    for path, cases in spark_series(results.get("peers", {})).items():
        ax.plot([f for f, _ in cases], [s for _, s in cases], marker="s", linestyle="--",
                label=spark + SPARK_SERIES.get(path, path))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("files committed")
    ax.set_ylabel("job commit, seconds")
    ax.set_title(f"magic job commit, s3-standard latencies ({results.get('date', '')})", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))  # below: the points stay seen
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plan-rounds", type=int, default=15, help="rounds of the planning comparison (0: skip)")
    parser.add_argument("--commit-files", default="100,1000,10000", help="job commit sizes ('': skip)")
    parser.add_argument("--peers", default="", help="the Spark comparison with S3A magic at these files (100,1000;"
                        " 10000 too): benchmarks.peers_bench's snap-* shapes ('': skip, the default)")
    parser.add_argument("--peers-rounds", type=int, default=3, help="rounds of each --peers size")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # files,variant: one commit case in this process
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--plot", help="draw the job commit against files here (PNG)")
    parser.add_argument("--from", dest="earlier", help="plot these earlier results (JSON) instead of running")
    args = parser.parse_args(argv)
    if args.earlier:
        with open(args.earlier) as f:
            plot(json.load(f), args.plot or "snapshot-commit.png")
        return 0
    if args.case:
        files, variant = args.case.split(",")
        print(json.dumps(commit_case(int(files), variant)))
        return 0
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.plan_rounds:
        results["plan"] = plan_runs(args.plan_rounds)
        print(json.dumps(results["plan"]), flush=True)
    commits = []
    for files in (int(f) for f in args.commit_files.split(",") if f):
        for variant in VARIANTS:
            case = f"{files},{variant}"
            out = subprocess.run([sys.executable, "-m", "benchmarks.snapshot_bench", "--case", case],
                                 capture_output=True, text=True, check=True).stdout
            commits.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(commits[-1]), flush=True)
    results["commit"] = commits
    if args.peers:
        results["peers"] = peers_runs([int(f) for f in args.peers.split(",") if f], args.peers_rounds)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
