"""``s3commit demo``: write a partitioned dataset to an embedded, simulated S3 through the magic committer
and through the rename baseline, and show what each cost.

The embedded S3 is moto on 127.0.0.1 behind the latency simulator (profile ``s3-standard``: tens of ms per
request, server-side COPY at ~66 MB/s), so the comparison shows the real shape of the difference: the magic
commit costs one Complete per file and copies nothing; the rename commit copies every byte twice.

Engines: ``spark`` (PySpark through ``S3CommitProtocol`` vs Spark's default FileOutputCommitter protocol;
needs pyspark and a JDK) and ``python`` (pyarrow Parquet through the Python API). ``auto`` picks Spark when
it is usable. With ``--bucket`` (and ``--endpoint-url`` for an S3 other than AWS's) it runs against that S3
instead, with credentials from boto3's chain; requests are then counted at the client.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from s3commit.committers import create_committer
from s3commit.config import StoreOptions
from s3commit.store import S3Store


@dataclass
class RunReport:
    """What one write cost: phases, requests, bytes."""

    label: str
    files: int = 0
    bytes: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    bytes_copied: int = 0
    success: dict[str, Any] | None = None

    @property
    def total(self) -> float:
        return sum(self.phases.values())


PAYLOAD_BYTES = 48
"""Random (incompressible) bytes per row, so the files are as large as the data: renames copy real bytes."""


def _table(rows: int, partitions: int) -> Any:
    import random

    import pyarrow as pa

    noise = random.Random(0).randbytes(rows * PAYLOAD_BYTES)
    payload = pa.FixedSizeBinaryArray.from_buffers(pa.binary(PAYLOAD_BYTES), rows, [None, pa.py_buffer(noise)])
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "day": pa.array([f"2026-11-{1 + i % partitions:02d}" for i in range(rows)]),
        "value": pa.array([i * 0.5 for i in range(rows)]),
        "payload": payload,
    })


def run_python_write(store: S3Store, dest: str, committer_name: str, *, tasks: int, rows: int,
                     partitions: int, threads: int) -> RunReport:
    """Each "task" writes one Parquet file per partition; commit tasks, then the job."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    report = RunReport(committer_name)
    committer = create_committer(committer_name, dest, store=store, threads=threads)
    table = _table(rows, partitions)
    days = sorted(set(table.column("day").to_pylist()))
    store.counters.reset()
    t0 = time.perf_counter()
    committer.setup_job()
    messages = []
    write_time = commit_time = 0.0
    for task in range(tasks):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        slice_ = table.slice(task * rows // tasks, rows // tasks)
        w0 = time.perf_counter()
        for day in days:
            part = slice_.filter(pc.equal(slice_.column("day"), day))
            with attempt.open(f"day={day}/part-{task:05d}-{committer.job_id}.c000.snappy.parquet") as f:
                pq.write_table(part.drop(["day"]), f, compression="snappy")
        c0 = time.perf_counter()
        message = committer.commit_task(attempt)
        commit_time += time.perf_counter() - c0
        write_time += c0 - w0
        messages.append(message)
        report.files += message.files
        report.bytes += message.bytes
    report.phases["setup"] = time.perf_counter() - t0 - write_time - commit_time
    report.phases["write"] = write_time
    report.phases["task commit"] = commit_time
    j0 = time.perf_counter()
    success = committer.commit_job(messages)
    report.phases["job commit"] = time.perf_counter() - j0
    counters = store.counters.snapshot()
    report.requests = counters["requests"]
    report.bytes_copied = counters["bytes_copied"]
    report.success = success.to_dict()
    return report


def print_report(reports: Sequence[RunReport], *, out: Any = None) -> None:
    """The summary a user wants: time per phase, requests by type, bytes copied, files, _SUCCESS; to ``out``
    (default: ``sys.stdout`` at the time of the call)."""
    def line(text: str = "") -> None:
        print(text, file=out or sys.stdout)

    phases = list(dict.fromkeys(p for r in reports for p in r.phases))
    width = max(len(r.label) for r in reports) + 2
    line("Time per phase (seconds)")
    line(" " * 16 + "".join(f"{r.label:>{width}}" for r in reports))
    for phase in [*phases, "total"]:
        values = [r.total if phase == "total" else r.phases.get(phase, 0.0) for r in reports]
        line(f"  {phase:<14}" + "".join(f"{v:>{width}.2f}" for v in values))
    line()
    line("Requests by type")
    ops = sorted({op for r in reports for op in r.requests})
    for op in ops:
        line(f"  {op:<24}" + "".join(f"{r.requests.get(op, 0):>{width}}" for r in reports))
    line(f"  {'total':<24}" + "".join(f"{sum(r.requests.values()):>{width}}" for r in reports))
    line()
    for r in reports:
        line(f"{r.label}: {r.files} files, {r.bytes / 1e6:.1f} MB written, "
             f"{r.bytes_copied / 1e6:.1f} MB copied server-side")
    if len(reports) >= 2 and reports[0].phases.get("job commit"):
        base, ours = reports[-1], reports[0]
        line(f"job commit: {ours.label} {ours.phases['job commit']:.2f}s vs {base.label} "
             f"{base.phases['job commit']:.2f}s ({base.phases['job commit'] / ours.phases['job commit']:.1f}x); "
             f"whole write {base.total / ours.total:.1f}x")
    for r in reports:
        if r.success:
            line()
            line(f"_SUCCESS of the {r.label} job:")
            fields = ("committer", "jobId", "hostname", "date")
            summary: dict[str, Any] = {k: r.success[k] for k in fields if k in r.success}
            summary["files listed"] = len(r.success.get("filenames", []))
            summary["first files"] = r.success.get("filenames", [])[:3]
            summary["metrics"] = {k: v for k, v in r.success.get("metrics", {}).items()
                                  if k.startswith(("committer_", "duration_"))}
            line(json.dumps(summary, indent=2))


def _spark_usable() -> bool:
    import importlib.util

    needed = ("pyspark", "s3commit.spark", "s3commit.spark_demo")
    return all(importlib.util.find_spec(m) is not None for m in needed) and shutil.which("java") is not None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="s3commit demo", description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["auto", "spark", "python"], default="auto")
    parser.add_argument("--profile", default="s3-standard", help="latency profile of the embedded S3")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--endpoint-url", help="use this S3 endpoint instead of the embedded one")
    parser.add_argument("--bucket",
                        help="a bucket of a real S3 to write to (AWS unless --endpoint-url) instead of the embedded S3")
    parser.add_argument("--region")
    args = parser.parse_args(argv)

    if args.endpoint_url and not args.bucket:
        parser.error("--bucket is required with --endpoint-url")
    engine = args.engine
    if engine == "auto":
        engine = "spark" if _spark_usable() else "python"
    if engine == "spark":
        from s3commit.spark_demo import run_spark_demo

        return run_spark_demo(args)

    server = None
    if args.bucket:
        options = StoreOptions(endpoint_url=args.endpoint_url, region=args.region, path_style=bool(args.endpoint_url))
        bucket = args.bucket
    else:
        from s3commit.testing.server import S3TestServer

        server = S3TestServer(profile=args.profile).start()
        bucket = server.create_bucket("s3commit-demo")
        options = StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                               access_key="testing", secret_key="testing")
        print(f"embedded S3 at {server.endpoint_url} (moto on 127.0.0.1, latency profile {args.profile})")
    try:
        run = uuid.uuid4().hex[:8]
        reports = []
        for name in ("magic", "rename-v1"):
            dest = f"s3://{bucket}/demo-{run}/{name}"
            print(f"writing {args.rows} rows in {args.tasks} tasks x {args.partitions} partitions "
                  f"to {dest} through {name} ...", flush=True)
            reports.append(run_python_write(S3Store(options), dest, name, tasks=args.tasks, rows=args.rows,
                                            partitions=args.partitions, threads=args.threads))
        print()
        print_report(reports)
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
