"""The measured runs: one committer job, a bare boto3 completion pool, the 100,000-upload memory run.

Every timing comes from ``time.perf_counter`` around one phase; request counts from the store's counters;
bytes copied from the store (CopyObject sizes). Runs are against the simulated S3 (:mod:`s3commit.testing`)
so that latency and COPY bandwidth are those of the chosen profile, the same for every committer.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import threading
import time
import tracemalloc
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from s3commit.commit.engine import CommitEngine
from s3commit.commit.overwrite import OverwritePlan
from s3commit.committers import create_committer
from s3commit.config.options import CommitterOptions, StoreOptions
from s3commit.model import checksums
from s3commit.model.manifests import PendingSet, PendingUpload
from s3commit.model.paths import JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store


def paired_median(runs: Sequence[float], baselines: Sequence[float]) -> float:
    """The median of ``runs[i] / baselines[i]``: each run against the baseline measured beside it."""
    return statistics.median(r / b for r, b in zip(runs, baselines, strict=True))


@dataclass
class JobResult:
    """One committer job: N tasks x M files of S bytes."""

    committer: str
    tasks: int
    files: int
    file_size: int
    threads: int
    task_commit_seconds: list[float] = field(default_factory=list)
    job_commit_seconds: float = 0.0
    job_commit_cpu_seconds: float = 0.0
    """This process's CPU (every thread's) during the job commit: the client's own work, which the server's
    speed does not move."""
    write_seconds: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    job_commit_requests: dict[str, int] = field(default_factory=dict)
    bytes_copied: int = 0
    job_commit_peak_bytes: int = 0

    @property
    def task_commit_total(self) -> float:
        return sum(self.task_commit_seconds)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        seconds = self.task_commit_seconds or [0.0]
        data.update(task_commit_sum=sum(seconds), task_commit_median=statistics.median(seconds),
                    task_commit_max=max(seconds), total_requests=sum(self.requests.values()),
                    requests_per_file=sum(self.requests.values()) / max(1, self.files),
                    total_seconds=self.write_seconds + self.task_commit_total + self.job_commit_seconds)
        del data["task_commit_seconds"]
        return data


def store_for(endpoint_url: str, *, pool: int = 128, checksum: str | None = "CRC32") -> S3Store:
    """A store on the benchmark's server; ``checksum``: its part checksum algorithm (s3commit's default)."""
    return S3Store(StoreOptions(endpoint_url=endpoint_url, region="us-east-1", path_style=True,
                                access_key="testing", secret_key="testing", max_pool_connections=pool,
                                checksum_algorithm=checksum))


def run_job(endpoint_url: str, bucket: str, committer_name: str, *, tasks: int, files: int, file_size: int,
            threads: int, staging_dir: str, checksum: str | None = "CRC32") -> JobResult:
    """Write ``files`` files spread over ``tasks`` tasks, commit each task, then the job; ``checksum`` as in
    :func:`store_for` (``None``: no part checksums, ``fs.s3a.create.checksum.algorithm=none``)."""
    store = store_for(endpoint_url, pool=max(64, threads * 2), checksum=checksum)
    committer = create_committer(committer_name, f"s3://{bucket}/bench-{uuid.uuid4().hex[:8]}", store=store,
                                 threads=threads, staging_dir=staging_dir, part_size=max(5 << 20, file_size + 1))
    result = JobResult(committer_name, tasks, files, file_size, threads)
    payload = b"x" * file_size
    committer.setup_job()
    messages = []
    per_task = [files // tasks + (1 if t < files % tasks else 0) for t in range(tasks)]
    for task, count in enumerate(per_task):
        attempt = committer.setup_task(committer.new_task_attempt_id(task))
        started = time.perf_counter()

        def write_one(n: int, attempt: Any = attempt, task: int = task) -> None:
            # Spark's naming: the job id is in every name (no upload markers needed).
            with attempt.open(f"part={n % 4}/part-{task:05d}-{committer.job_id}-c{n:04d}.bin") as f:
                f.write(payload)

        # Files of one task are written concurrently, as a task's writers would stream them.
        with ThreadPoolExecutor(min(16, max(1, count))) as writers:
            list(writers.map(write_one, range(count)))
        result.write_seconds += time.perf_counter() - started
        started = time.perf_counter()
        messages.append(committer.commit_task(attempt))
        result.task_commit_seconds.append(time.perf_counter() - started)
    before = store.counters.snapshot()
    with RssSampler() as rss:
        started, cpu = time.perf_counter(), time.process_time()
        committer.commit_job(messages)
        result.job_commit_seconds = time.perf_counter() - started
        result.job_commit_cpu_seconds = time.process_time() - cpu
    result.job_commit_peak_bytes = rss.peak_above_start
    after = store.counters.snapshot()
    result.requests = after["requests"]
    result.job_commit_requests = {op: n - before["requests"].get(op, 0) for op, n in after["requests"].items()
                                  if n - before["requests"].get(op, 0)}
    result.bytes_copied = after["bytes_copied"]
    return result


class RssSampler:
    """Samples this process's resident memory every 10 ms (cheap, unlike tracemalloc, so timings stay true)."""

    def __init__(self) -> None:
        self.start = self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> RssSampler:
        self.start = self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def peak_above_start(self) -> int:
        return self.peak - self.start


class PoolRun(NamedTuple):
    seconds: float
    cpu_seconds: float
    """This process's CPU (every thread's) while the pool completed."""


def bare_pool_completes(endpoint_url: str, bucket: str, *, files: int, threads: int, file_size: int = 1,
                        checksum: str | None = None) -> PoolRun:
    """The limit: a bare boto3 thread pool completing ``files`` uploads of one ``file_size`` part each
    (prepared first, not timed). ``checksum`` (e.g. ``CRC32``): each upload is made with it and its Complete
    names the part's, as s3commit's are by default (``fs.s3a.create.checksum.algorithm``)."""
    store = store_for(endpoint_url, pool=max(64, threads * 2))
    client = store.requests.client
    prefix = f"bare-{uuid.uuid4().hex[:8]}"
    payload = b"x" * file_size
    field = {checksums.request_field(checksum): checksums.checksum(checksum, payload)} if checksum else {}

    def prepare(n: int) -> tuple[str, str, str]:
        key = f"{prefix}/part-{n:05d}.bin"
        create = {"ChecksumAlgorithm": checksum} if checksum else {}
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"]
        etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=payload,
                                  **field)["ETag"]
        return key, upload_id, etag

    with ThreadPoolExecutor(32) as pool:
        uploads = list(pool.map(prepare, range(files)))

    def complete(item: tuple[str, str, str]) -> None:
        key, upload_id, etag = item
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                         MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag, **field}]})

    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(complete, uploads))
    return PoolRun(time.perf_counter() - started, time.process_time() - cpu)


class PendingsetsOnlyClient:
    """Just enough of a boto3 S3 client for a job commit without a server, under a real :class:`S3Store`: pendingsets
    served from memory, every write answered and forgotten. For measuring the engine's own memory at scale."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get_object(self, *, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.objects[Key]), "ETag": '"read"'}

    def put_object(self, **_: Any) -> dict[str, Any]:
        return {"ETag": '"put"'}

    def complete_multipart_upload(self, **_: Any) -> dict[str, Any]:
        return {"ETag": '"done"'}

    def list_objects_v2(self, **_: Any) -> dict[str, Any]:
        return {"Contents": [], "IsTruncated": False}

    def list_multipart_uploads(self, **_: Any) -> dict[str, Any]:
        return {"Uploads": [], "IsTruncated": False}

    def delete_object(self, **_: Any) -> dict[str, Any]:
        return {}

    def delete_objects(self, **_: Any) -> dict[str, Any]:
        return {"Errors": []}


def memory_run(*, uploads: int, pendingsets: int) -> dict[str, Any]:
    """Peak memory (tracemalloc, Python allocations) of a job commit of ``uploads`` pending uploads in
    ``pendingsets`` pendingsets, above what the serialized pendingsets themselves occupy."""
    job_id = str(uuid.uuid4())
    dest = S3Uri("bench", "table")
    layout = JobLayout(dest.key, job_id)
    objects: dict[str, bytes] = {}
    keys = []
    per_set = uploads // pendingsets
    for t in range(pendingsets):
        commits = tuple(PendingUpload(
            bucket="bench", destination_key=f"table/day={n % 30}/part-{t:05d}-{job_id}-c{n:04d}.parquet",
            upload_id=f"upload-{t}-{n}-" + "u" * 40, etags=(f'"{uuid.uuid4().hex}"',), length=1 << 20,
            uri=f"s3a://bench/table/day={n % 30}/part-{t:05d}-{job_id}-c{n:04d}.parquet")
            for n in range(per_set))
        key = layout.pendingset_key(f"task_bench_0000_m_{t:06d}")
        objects[key] = PendingSet(commits=commits).with_job(job_id, f"attempt_bench_0000_m_{t:06d}_0").to_json()
        keys.append(key)
    serialized = sum(len(v) for v in objects.values())
    store = S3Store(StoreOptions(), client=PendingsetsOnlyClient(objects))
    options = CommitterOptions(threads=32, journal=True)
    engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic", options=options)
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    engine.run(keys, OverwritePlan())
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] - baseline
    tracemalloc.stop()
    completed = store.counters.requests["CompleteMultipartUpload"]
    return {"uploads": uploads, "pendingsets": pendingsets, "completed": completed,
            "peak_bytes_above_baseline": peak, "serialized_pendingset_bytes": serialized, "seconds": seconds,
            "measure": "tracemalloc peak of Python allocations during CommitEngine.run"}


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)
