"""The commit lease's cost: what it adds to one job commit (requests, time; lease on against off, run by run), and N
jobs appending to one table at once (their total time against the sum of their commit phases run alone)."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.runs import store_for
from s3commit.committers import create_committer

PAYLOAD = b"x" * (64 << 10)


def prepared_job(endpoint: str, bucket: str, dest: str, files: int, lease: str, staging: str) -> tuple[Any, list]:
    """A magic job whose one task wrote ``files`` files and committed: ready for its job commit."""
    committer = create_committer("magic", dest, store=store_for(endpoint), threads=32, staging_dir=staging,
                                 lease=lease)
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    for n in range(files):
        with attempt.open(f"part-{committer.job_id}-{n:05d}.bin") as out:
            out.write(PAYLOAD)
    return committer, [committer.commit_task(attempt)]


def commit_seconds(committer: Any, messages: list) -> tuple[float, int]:
    """The job commit's wall time and requests (the lease's release, after ``_SUCCESS``, included)."""
    before = sum(committer.store.counters.snapshot()["requests"].values())
    started = time.perf_counter()
    committer.commit_job(messages)
    seconds = time.perf_counter() - started
    return seconds, sum(committer.store.counters.snapshot()["requests"].values()) - before


def overhead(endpoint: str, bucket: str, files: int, pairs: int, staging: str) -> dict[str, Any]:
    """Lease on against off, alternating, on one destination each pair."""
    on: list[float] = []
    off: list[float] = []
    requests: dict[str, int] = {}
    for _ in range(pairs):
        dest = f"s3://{bucket}/lease-{uuid.uuid4().hex[:8]}"
        for mode, runs in (("on", on), ("off", off)):
            committer, messages = prepared_job(endpoint, bucket, dest, files, mode, staging)
            seconds, count = commit_seconds(committer, messages)
            runs.append(seconds)
            requests[mode] = count
    return {"files": files, "pairs": pairs, "on_seconds": on, "off_seconds": off,
            "requests_on": requests["on"], "requests_off": requests["off"],
            "lease_requests": requests["on"] - requests["off"],
            "ratio": statistics.median(a / b for a, b in zip(on, off, strict=True))}


def appenders(endpoint: str, bucket: str, jobs: int, files: int, staging: str) -> dict[str, Any]:
    """``jobs`` jobs append to one table: each commit alone first, then all at once (threads, one store each)."""
    alone = []
    dest = f"s3://{bucket}/appenders-{uuid.uuid4().hex[:8]}"
    for _ in range(jobs):
        committer, messages = prepared_job(endpoint, bucket, dest, files, "on", staging)
        alone.append(commit_seconds(committer, messages)[0])
    dest = f"s3://{bucket}/appenders-{uuid.uuid4().hex[:8]}"
    prepared = [prepared_job(endpoint, bucket, dest, files, "on", staging) for _ in range(jobs)]
    start = threading.Barrier(jobs)
    ends: list[float] = []
    waits: list[int] = []

    def run(committer: Any, messages: list) -> None:
        start.wait()
        success = committer.commit_job(messages)
        ends.append(time.perf_counter())
        waits.append(int(success.metrics["committer_lease_wait_ms"]))

    threads = [threading.Thread(target=run, args=job) for job in prepared]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    together = max(ends) - began
    return {"jobs": jobs, "files": files, "alone_seconds": alone, "together_seconds": together,
            "lease_wait_ms": sorted(waits), "ratio": together / sum(alone)}


def lease_runs(endpoint: str, bucket: str, staging: str, fresh: Callable[[], None], *, quick: bool) -> dict[str, Any]:
    fresh()
    print("  lease: job commits with the lease on against off", flush=True)
    small = overhead(endpoint, bucket, files=10, pairs=2 if quick else 7, staging=staging)
    large = overhead(endpoint, bucket, files=40 if quick else 500, pairs=1 if quick else 5, staging=staging)
    fresh()
    print("  lease: appenders to one table at once", flush=True)
    together = appenders(endpoint, bucket, jobs=2 if quick else 4, files=10 if quick else 200, staging=staging)
    return {"overhead": {"small": small, "large": large}, "appenders": together}


def lease_markdown(lease: dict[str, Any]) -> list[str]:
    lines = ["## The commit lease", "", "| job | files | lease on (median s) | off (median s) | ratio (run by run) | "
             "requests the lease adds to the commit (its setup reads it once) |", "|---|---|---|---|---|---|"]
    for name, r in lease["overhead"].items():
        lines.append(f"| {name} | {r['files']} | {statistics.median(r['on_seconds']):.3f} | "
                     f"{statistics.median(r['off_seconds']):.3f} | {r['ratio']:.3f} | {r['lease_requests']} |")
    a = lease["appenders"]
    lines += ["", f"{a['jobs']} jobs of {a['files']} files appending to one table at once: "
              f"{a['together_seconds']:.2f} s in all, against {sum(a['alone_seconds']):.2f} s for their commits one "
              f"after another alone ({', '.join(f'{s:.2f}' for s in a['alone_seconds'])}); ratio {a['ratio']:.2f}. "
              "Lease waits (ms): "
              f"{', '.join(str(w) for w in a['lease_wait_ms'])}.", ""]
    return lines
