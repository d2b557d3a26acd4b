"""The Python engine of ``s3commit demo``: pyarrow Parquet written through the Python API, by the magic committer
and by the rename baseline, on the embedded S3 or a real one."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from s3commit.committers import create_committer
from s3commit.config.options import StoreOptions
from s3commit.demo.measure import RunReport
from s3commit.demo.report import print_report
from s3commit.store.s3store import S3Store

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
                     partitions: int, threads: int | None) -> RunReport:
    """Each "task" writes one Parquet file per partition; commit tasks, then the job."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    report = RunReport(committer_name)
    chosen: dict[str, Any] = {} if threads is None else {"threads": threads}
    committer = create_committer(committer_name, dest, store=store, **chosen)
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


def run_python_demo(args: argparse.Namespace) -> int:
    """The demo through the Python API. Returns the exit code."""
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

