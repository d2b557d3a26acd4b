"""The job commit at the store's own limit: a magic job commit of 1,000 to 100,000 files against its floor, on S3Wire
(:mod:`s3commit.testing.memory_wire`: MemoryS3 behind a real botocore client, S3's ``s3-standard`` latencies, and
with ``--throttle`` S3's 3,500 writes a second per partitioned prefix, 503 SlowDown above it; ``--rate`` another
rate, to see the commit meet the throttle at a rate this machine's client can exceed).

Each case runs in a process of its own (its peak RSS is the case's): the uploads and their pendingsets are made
in the model directly (no latency, not timed), then :class:`~s3commit.commit.engine.CommitEngine` commits them over
the wire as a job commit does (pendingsets read, journal, Completes, an overwrite's deletes, ``_SUCCESS``, clean-up),
with the store's default retry policy and adaptive concurrency.

The floor is the issue's: ``max(writes / the prefix's write rate, files x Complete latency / in-flight requests)``
where the writes are the Completes plus, for an overwrite, the old files' deletes (each key of a DeleteObjects
counts as one write on S3), the throttle's rate (none when not throttled), and the in-flight requests the
adaptive limit's ceiling (``s3commit.store.concurrency.max``). The client's CPU is the process's CPU time during the
commit less the store's own (the wire's answers, measured by ``benchmarks/fast_store_rate.py`` at ~0.07 ms a
request): reported as Completes per CPU-second of the whole process, which bounds the commit when it is lower than
the rate the floor allows.

With ``--lean`` (``s3commit.store.lean-requests``) the case runs as a user's commit with that setting runs: the
store (the same S3Wire, on a loopback socket: :class:`~s3commit.testing.memory_wire.WireListener`) in a child process
of its own, this process the client alone, its Completes sent from one event loop on connections of its own
(``UploadRequests.complete_many``) and its other requests by botocore over HTTP; the client's CPU (this process's)
and the store's (the child's) are reported apart, with the phases' durations (``load``: the pendingsets read and
checked before the first Complete). ``--store go`` (with ``--lean``) puts the Go store (``testbed.go_store``:
the same model and envelope, many times the answers per CPU-second) in that child's place, the job seeded there,
its stats read for the store's CPU, answers, SlowDowns and splits (``store_headroom``: the store's answers per
CPU-second during the commit over the client's Completes per CPU-second). After the commit, not timed with it,
``store_capacity`` is what a fresh Go store with the same latencies (unthrottled) answers at most:
:meth:`~testbed.go_store.GoStore.complete_capacity`, 40,000 Completes shaped as the lean path's sent over 4,000
connections by a Go program of one thread, the connections' opening and closing left out, three times (the round
of median answers per CPU-second reported, with all three: one round moves by +-10% on this machine's shared
cores); ``capacity_headroom`` is that median over the client's requests per CPU-second in the commit (each the most
it can do a second on a core of its own).

``--committer directory`` (with ``--store go``) commits the directory committer's own job instead (see
:func:`run_go_case`). ``--ahead`` (with ``--store go``) reports each task's commit to the driver before the job
commit, as Spark's ``onTaskCommit`` does while the other tasks run: the job commit takes the pendingsets read then
(:mod:`s3commit.commit.preload`).

The ``scale`` section of ``benchmarks/run.py`` (:func:`section_runs`) runs every case as a user's commit runs
(``--lean``), on the Go store where Go is installed, with each task's commit reported as Spark reports it
(``--ahead``): 100 to 100,000 files, throttled and not, the magic committer's commit, its overwrite of as many old
files and the directory committer's (~5 minutes), with its table and plot.

    python -m benchmarks.scale_bench --files 1000,10000 [--throttle both] [--overwrite] [--lean [--store go
        [--committer directory] [--ahead]]] [--out f]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from typing import Any

from s3commit.commit.engine import CommitEngine
from s3commit.commit.lease import lease_for
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.preload import PendingsetPreloads
from s3commit.commit.process_state import ProcessState, SeenObjects
from s3commit.committers import create_committer
from s3commit.config.options import CommitterOptions, RetryPolicy, StoreOptions
from s3commit.model.manifests import PendingSet, PendingUpload, SuccessData
from s3commit.model.paths import JobLayout
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store
from s3commit.testing._sim.classify import S3Operation
from s3commit.testing._sim.profiles import ThrottleSpec, get_profile
from s3commit.testing.memory import MemoryS3, aws_capabilities
from s3commit.testing.memory_wire import S3Wire
from testbed.go_store import GoStore, GoStoreError, build_go_program, build_go_store

BUCKET = "scale"
FILES_PER_TASK = 100
PROFILE = "s3-standard"
CAPACITY_ROUNDS = 3
"""How many times a fresh Go store's capacity is measured after each case (the median reported)."""


def old_key(dest: S3Uri, n: int) -> str:
    """The key of the ``n``-th old file of an overwrite."""
    return f"{dest.key}/day={n % 30}/old-{n:06d}.parquet"


def new_key(dest: S3Uri, job_id: str, n: int) -> str:
    """The key of the job's ``n``-th file."""
    return f"{dest.key}/day={n % 30}/part-{n // FILES_PER_TASK:05d}-{job_id}-c{n:06d}.parquet"


def task_id_of(task: int) -> str:
    """The id of the task whose first file is number ``task``."""
    return f"task_scale_0000_m_{task // FILES_PER_TASK:06d}"


def attempt_id_of(task: int) -> str:
    """The id of that task's (only) attempt."""
    return f"attempt_scale_0000_m_{task // FILES_PER_TASK:06d}_0"


def pendingset(layout: JobLayout, job_id: str, task: int, commits: list[PendingUpload]) -> tuple[str, bytes]:
    """The key and body of task ``task``'s pendingset (``task``: its first file's number)."""
    key = layout.pendingset_key(task_id_of(task))
    return key, PendingSet(commits=tuple(commits)).with_job(job_id, attempt_id_of(task)).to_json()


def pending_upload(key: str, upload_id: str, etag: str) -> PendingUpload:
    """One file's upload of one small part (``b"new"``)."""
    return PendingUpload(bucket=BUCKET, destination_key=key, upload_id=upload_id, etags=(etag,), length=3,
                         uri=f"s3a://{BUCKET}/{key}")


def prepare(s3: MemoryS3, dest: S3Uri, layout: JobLayout, job_id: str, files: int, *, old: int,
            early: bool = False) -> list[str]:
    """``files`` uploads of one small part each, in pendingsets of FILES_PER_TASK; ``old`` files already there.
    ``early``: the uploads completed and their entries marked so, as task commits on a snapshot destination do
    (``s3commit.snapshot.complete-at-task-commit``)."""
    client = s3.store().requests.client  # the model's own client: no latency, no throttle
    for n in range(old):
        client.put_object(Bucket=BUCKET, Key=old_key(dest, n), Body=b"old")
    keys = []
    for task in range(0, files, FILES_PER_TASK):
        commits = []
        for n in range(task, min(files, task + FILES_PER_TASK)):
            key = new_key(dest, job_id, n)
            upload_id = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
            etag = client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=1, Body=b"new")["ETag"]
            commit = pending_upload(key, upload_id, etag)
            if early:
                client.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id,
                                                 MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
                commit = commit.as_completed()
            commits.append(commit)
        pendingset_key, body = pendingset(layout, job_id, task, commits)
        client.put_object(Bucket=BUCKET, Key=pendingset_key, Body=body)
        keys.append(pendingset_key)
    return keys


def prepare_go(go: GoStore, dest: S3Uri, layout: JobLayout, job_id: str, files: int, *, old: int) -> list[str]:
    """:func:`prepare`'s job on the Go store: its uploads seeded (one part ``b"new"`` each), the old files and the
    pendingsets PUT through its admin endpoint (no latency, no throttle, not timed)."""
    if old:
        go.put_objects(BUCKET, {old_key(dest, n): b"old" for n in range(old)})
    seeded = go.seed(BUCKET, [new_key(dest, job_id, n) for n in range(files)], b"new")
    pendingsets: dict[str, bytes] = {}
    for task in range(0, files, FILES_PER_TASK):
        commits = [pending_upload(u["key"], u["upload_id"], u["etag"]) for u in seeded[task:task + FILES_PER_TASK]]
        key, body = pendingset(layout, job_id, task, commits)
        pendingsets[key] = body
    go.put_objects(BUCKET, pendingsets)
    return list(pendingsets)


def floor_seconds(files: int, *, old: int, rate: float | None, in_flight: int) -> float:
    latency = get_profile(PROFILE).first_byte(S3Operation.COMPLETE_MULTIPART_UPLOAD)
    by_latency = files * latency / in_flight
    by_rate = (files + old) / rate if rate else 0.0
    return max(by_latency, by_rate)


class CommitProper:
    """The job commit proper, as the issue measured S3A's and s3commit's side by side: from the first Complete sent
    (``complete_many`` called, or the first Complete from a thread) to the ``_SUCCESS`` PUT answered; the pendingsets'
    load and the journal before it, the clean-up after it left out. Watches ``store``'s own calls."""

    def __init__(self, store: Any, success_key: str) -> None:
        self.first: float | None = None
        self.marked: float | None = None
        uploads, objects = store.uploads, store.objects
        many, one, put = uploads.complete_many, uploads.complete_multipart_upload, objects.put_object

        def started() -> None:
            if self.first is None:
                self.first = time.perf_counter()

        def complete_many(*args: Any, **kwargs: Any) -> Any:
            started()
            return many(*args, **kwargs)

        def complete_multipart_upload(*args: Any, **kwargs: Any) -> Any:
            started()
            return one(*args, **kwargs)

        def put_object(bucket: str, key: str, *args: Any, **kwargs: Any) -> Any:
            etag = put(bucket, key, *args, **kwargs)
            if key == success_key:
                self.marked = time.perf_counter()
            return etag

        uploads.complete_many, objects.put_object = complete_many, put_object
        if not uploads.can_complete_many(BUCKET):  # (asked of the class: one from a thread each)
            uploads.complete_multipart_upload = complete_multipart_upload

    @property
    def seconds(self) -> float | None:
        return None if self.first is None or self.marked is None else self.marked - self.first


def run_case(files: int, *, rate: float | None, overwrite: bool) -> dict[str, Any]:
    """A case whose Completes botocore sends from a thread each, over S3Wire in this process."""
    lean = False
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    job_id = str(uuid.uuid4())
    dest = S3Uri(BUCKET, "table")
    layout = JobLayout(dest.key, job_id)
    old = files if overwrite else 0
    keys = prepare(s3, dest, layout, job_id, files, old=old)
    wire = S3Wire(s3, profile=PROFILE, throttle=ThrottleSpec(writes_per_second=rate) if rate else None)
    store = wire.store(retry=RetryPolicy(), lean_requests=lean)
    in_flight = StoreOptions().concurrency_max
    engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic",
                          options=CommitterOptions(journal=True))
    plan = OverwritePlan(delete_paths=("",)) if overwrite else OverwritePlan()
    started, cpu = time.perf_counter(), time.process_time()
    success = engine.run(keys, plan)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    visible = s3.objects(BUCKET, f"{dest.key}/")
    committed = sum(1 for k in visible if "/part-" in k)
    exact = committed == files and not any("/old-" in k for k in visible if overwrite) and not s3.uploads(BUCKET)
    floor = floor_seconds(files, old=old, rate=rate, in_flight=in_flight)
    metrics = success.metrics
    return {
        "files": files, "overwrite": overwrite, "writes_per_second": rate, "lean": lean, "exact": exact,
        "seconds": round(seconds, 3), "floor_seconds": round(floor, 3), "ratio": round(seconds / floor, 2),
        "cpu_seconds": round(cpu_seconds, 3), "completes_per_cpu_second": round(files / cpu_seconds),
        "requests": store.counters.snapshot()["total_requests"],
        "slowdowns_answered": sum(wire.throttled.values()),
        "failures": sum(store.counters.snapshot()["failures"].values()),
        "concurrency": {k: metrics.get(f"committer_concurrency_{k}") for k in ("low", "high", "final")},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "partitions_split": len(wire.throttle.splits(BUCKET)) if wire.throttle is not None else 0,
    }


def serve_case(files: int, *, rate: float | None, overwrite: bool) -> None:
    """The store of a ``--lean`` case, in this process (the child of :func:`run_served_case`): the job prepared in
    the model, the wire listening on a loopback socket; one JSON line when ready (endpoint, job, pendingsets), and
    one more, what the commit left and this process's CPU, once the parent writes a line to stdin."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    job_id = str(uuid.uuid4())
    dest = S3Uri(BUCKET, "table")
    keys = prepare(s3, dest, JobLayout(dest.key, job_id), job_id, files, old=files if overwrite else 0)
    # The prepared model (100,000 uploads and their parts) left out of the collector's passes: each full pass over
    # it stalled the store's one loop, and every answer with it (a test store's own cost, not the client's).
    gc.freeze()
    wire = S3Wire(s3, profile=PROFILE, throttle=ThrottleSpec(writes_per_second=rate) if rate else None)
    url = wire.listen()
    cpu, logged = time.process_time(), len(s3.log)
    print(json.dumps({"url": url, "job_id": job_id, "keys": keys}), flush=True)
    sys.stdin.readline()
    visible = s3.objects(BUCKET, f"{dest.key}/")
    committed = sum(1 for k in visible if "/part-" in k)
    exact = committed == files and not any("/old-" in k for k in visible if overwrite) and not s3.uploads(BUCKET)
    print(json.dumps({"exact": exact, "store_cpu_seconds": round(time.process_time() - cpu, 3),
                      "store_requests": len(s3.log) - logged, "slowdowns_answered": sum(wire.throttled.values()),
                      "partitions_split": len(wire.throttle.splits(BUCKET)) if wire.throttle is not None else 0,
                      "store_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}),
          flush=True)
    wire.close()


def warm_up(store: S3Store) -> None:
    """One request before the timed commit, as a job's setup sends from the process that commits it: the client and
    its service model made (tens of thousands of objects) before, not inside, the commit."""
    list(store.objects.list_objects(BUCKET, "warm-up/"))


def run_served_case(files: int, *, rate: float | None, overwrite: bool) -> dict[str, Any]:
    """A ``--lean`` case: the store in a child process (:func:`serve_case`) on a socket, this process the client
    alone: its Completes sent by the lean path from one event loop (``UploadRequests.complete_many``), everything
    else by botocore over HTTP. The client's CPU is this process's; the store's is reported beside it."""
    case = f"{files},{rate or 0},{int(overwrite)},1"
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.scale_bench", "--serve", case],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        ready = json.loads(child.stdout.readline())
        url, job_id = ready["url"], ready["job_id"]
        options = StoreOptions(endpoint_url=url, region="us-east-1", path_style=True, access_key="memory",
                               secret_key="memory-secret", use_ssl=False, lean_requests=True, retry=RetryPolicy())
        store = S3Store(options)
        store.capabilities[BUCKET] = aws_capabilities(BUCKET, endpoint=url, conditional=True)
        warm_up(store)
        dest = S3Uri(BUCKET, "table")
        engine = CommitEngine(store, dest=dest, layout=JobLayout(dest.key, job_id), job_id=job_id,
                              committer="magic", options=CommitterOptions(journal=True))
        plan = OverwritePlan(delete_paths=("",)) if overwrite else OverwritePlan()
        started, cpu = time.perf_counter(), time.process_time()
        success = engine.run(ready["keys"], plan)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        child.stdin.write("check\n")
        child.stdin.flush()
        found = json.loads(child.stdout.readline())
    finally:
        child.kill()
        child.wait()
    old = files if overwrite else 0
    floor = floor_seconds(files, old=old, rate=rate, in_flight=options.concurrency_max)
    metrics, counted = success.metrics, store.counters.snapshot()
    return {
        "files": files, "overwrite": overwrite, "writes_per_second": rate, "lean": True, "exact": found["exact"],
        "seconds": round(seconds, 3), "floor_seconds": round(floor, 3), "ratio": round(seconds / floor, 2),
        "cpu_seconds": round(cpu_seconds, 3), "completes_per_cpu_second": round(files / cpu_seconds),
        "store_cpu_seconds": found["store_cpu_seconds"],
        "store_answers_per_cpu_second": round(found["store_requests"] / max(found["store_cpu_seconds"], 1e-9)),
        "requests": counted["total_requests"], "slowdowns_answered": found["slowdowns_answered"],
        "failures": sum(counted["failures"].values()), "retries": sum(counted["retries"].values()),
        "concurrency": {k: metrics.get(f"committer_concurrency_{k}") for k in ("low", "high", "final")},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "store_peak_rss_mib": found["store_peak_rss_mib"], "partitions_split": found["partitions_split"],
        "over": "socket", "durations_ms": {k[len("duration_"):-3]: v for k, v in metrics.items()
                                           if k.startswith("duration_")},
    }


def run_go_case(files: int, *, rate: float | None, overwrite: bool, committer: str = "magic",
                ahead: bool = False) -> dict[str, Any]:
    """A ``--lean --store go`` case: :func:`run_served_case` with the Go store (``testbed.go_store``) in the child
    process instead of the Python wire, the job prepared there (:func:`prepare_go`); the store's CPU, answers,
    SlowDowns and splits read from its stats before and after the commit, what the commit left from its counts.

    ``committer="directory"``: the directory committer's own job, set up (not timed) and committed as a user's is,
    from its tasks' commit messages: conflict mode ``fail`` (its setup's check that the destination is empty, each
    Complete made with ``If-None-Match``), ``replace`` for an overwrite (the old files deleted after the Completes).
    Else the engine's commit of the magic committer's pendingsets (what ``commit_job`` runs after its checks), under the
    destination's commit lease as ``commit_job`` takes it (read free at the setup, taken with one PUT).

    ``ahead``: each task's commit reported to the driver before the job commit (as Spark's ``onTaskCommit`` does
    while the other tasks run: ``Committer.task_committed``), its pendingset read then (untimed); the job commit
    takes what was read (:mod:`s3commit.commit.preload`, up to its 10,000 files) and reads the rest."""
    throttle = ThrottleSpec(writes_per_second=rate) if rate else None
    with GoStore(profile=PROFILE, throttle=throttle, cpu_profile=os.environ.get("S3COMMIT_GOSTORE_CPUPROFILE")) as go:
        go.create_bucket(BUCKET)
        job_id = str(uuid.uuid4())
        dest = S3Uri(BUCKET, "table")
        old = files if overwrite else 0
        store = go.store(retry=RetryPolicy(), lean_requests=True, buckets=(BUCKET,))
        if committer == "directory":
            job = create_committer("directory", dest, job_id=job_id, store=store, process=ProcessState(),
                                   conflict_mode="replace" if overwrite else "fail")
            job.setup_job()  # (before the old files are there: fail's check passes; replace checks nothing)
            keys = prepare_go(go, dest, job.layout, job_id, files, old=old)
            messages = [TaskCommitMessage(job_id=job_id, task_id=task_id_of(n), task_attempt_id=attempt_id_of(n),
                                          pendingset_key=key, files=min(FILES_PER_TASK, files - n),
                                          bytes=3 * min(FILES_PER_TASK, files - n))
                        for n, key in zip(range(0, files, FILES_PER_TASK), keys, strict=True)]
            if ahead:
                for message in messages:
                    job.task_committed(message)
                job.process.preloads.wait_read(dest, job_id)
            commit = functools.partial(job.commit_job, messages)
        else:
            layout = JobLayout(dest.key, job_id)
            keys = prepare_go(go, dest, layout, job_id, files, old=old)
            options = CommitterOptions(journal=True)
            # The lease as commit_job takes it: read at the job's setup (untimed here), which remembers it free, then
            # taken at the commit with one conditional PUT.
            seen = SeenObjects()
            lease = lease_for(store, dest, job_id, options, seen=seen)
            lease.remember()
            engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic", options=options,
                                  lease=lease, seen=seen)
            plan = OverwritePlan(delete_paths=("",)) if overwrite else OverwritePlan()
            accepted = {key: {attempt_id_of(n)} for n, key in zip(range(0, files, FILES_PER_TASK), keys, strict=True)}
            preloads = PendingsetPreloads()
            if ahead:  # the reports as the tasks commit, and their reads (commit_job takes them, as here)
                for n, key in zip(range(0, files, FILES_PER_TASK), keys, strict=True):
                    count = min(FILES_PER_TASK, files - n)
                    preloads.add(store, dest, TaskCommitMessage(
                        job_id=job_id, task_id=task_id_of(n), task_attempt_id=attempt_id_of(n), pendingset_key=key,
                        files=count, bytes=3 * count))
                preloads.wait_read(dest, job_id)

            def commit() -> SuccessData:
                return engine.run(keys, plan, accepted, preloaded=preloads.take(dest, job_id, accepted))
        warm_up(store)
        proper = CommitProper(store, JobLayout(dest.key, job_id).success_key)
        before, counted_before = go.stats(), store.counters.snapshot()
        started, cpu = time.perf_counter(), time.process_time()
        success = commit()
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        after = go.stats()
        left = go.counts(BUCKET, f"{dest.key}/", contains=["/part-", "/old-"])
        outstanding = go.counts(BUCKET, "")["uploads"]
    exact = left["containing"]["/part-"] == files and left["containing"]["/old-"] == 0 and outstanding == 0
    store_cpu = after["cpu_seconds"] - before["cpu_seconds"]
    answers = after["requests_total"] - before["requests_total"]
    floor = floor_seconds(files, old=old, rate=rate, in_flight=store.options.concurrency_max)
    metrics, counted = success.metrics, store.counters.snapshot()
    client_rate = files / cpu_seconds
    store_rate = answers / max(store_cpu, 1e-9)
    sent = counted["total_requests"] - counted_before["total_requests"]
    peak_rss_mib = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # (the commit's: before drive's)
    with GoStore(profile=PROFILE) as fresh:  # (unthrottled: its answers, not its SlowDowns, are what it can do)
        rounds = sorted((fresh.complete_capacity() for _ in range(CAPACITY_ROUNDS)),
                        key=lambda r: r["answers_per_cpu_second"])
        capacity = rounds[len(rounds) // 2]
    return {
        "files": files, "overwrite": overwrite, "writes_per_second": rate, "lean": True, "store": "go",
        "committer": committer,
        "exact": exact, "seconds": round(seconds, 3), "floor_seconds": round(floor, 3),
        "ratio": round(seconds / floor, 2), "cpu_seconds": round(cpu_seconds, 3), "read_ahead": ahead,
        "preloaded": metrics.get("committer_pendingsets_preloaded", 0),
        "proper_seconds": None if proper.seconds is None else round(proper.seconds, 3),
        "proper_ratio": None if proper.seconds is None else round(proper.seconds / floor, 2),
        "completes_per_cpu_second": round(client_rate), "store_cpu_seconds": round(store_cpu, 3),
        "store_requests": answers, "store_answers_per_cpu_second": round(store_rate),
        "store_headroom": round(store_rate / client_rate, 2),
        "requests": sent, "requests_per_cpu_second": round(sent / cpu_seconds),
        "store_capacity": {**{k: capacity[k] for k in ("answered", "seconds", "store_cpu_seconds",
                                                       "answers_per_second", "answers_per_cpu_second")},
                           "rounds_answers_per_cpu_second": [r["answers_per_cpu_second"] for r in rounds]},
        "capacity_headroom": round(capacity["answers_per_cpu_second"] / (sent / cpu_seconds), 2),
        "slowdowns_answered": after["slowdowns_answered"] - before["slowdowns_answered"],
        "failures": sum(counted["failures"].values()) - sum(counted_before["failures"].values()),
        # (by operation: the lease's first read of a destination that never had one is a GET answered 404)
        "failed": {op: n - counted_before["failures"].get(op, 0) for op, n in counted["failures"].items()
                   if n > counted_before["failures"].get(op, 0)},
        "retries": sum(counted["retries"].values()) - sum(counted_before["retries"].values()),
        "concurrency": {k: metrics.get(f"committer_concurrency_{k}") for k in ("low", "high", "final")},
        "peak_rss_mib": peak_rss_mib,
        "store_peak_rss_mib": round(after["peak_rss_mib"]), "partitions_split": after["partitions_split"],
        "store_connections": after["connections_accepted"] - before["connections_accepted"], "over": "socket",
        "durations_ms": {k[len("duration_"):-3]: v for k, v in metrics.items() if k.startswith("duration_")},
    }


def scale_runs(file_counts: list[int], *, throttled: list[bool], rate: float = 3500.0, overwrite: bool = False,
               lean: bool = False, store: str = "wire", committer: str = "magic",
               ahead: bool = False) -> dict[str, Any]:
    """Every case (files x throttled or not, and an overwrite of as many old files where asked), each in a process
    of its own."""
    kinds = [(committer, False), *([(committer, True)] if overwrite else [])]
    return _runs(file_counts, throttled=throttled, rate=rate, kinds=kinds, lean=lean, store=store, ahead=ahead)


SECTION_KINDS = (("magic", False), ("magic", True), ("directory", False))
"""The section's commits: the magic committer's, its overwrite of as many old files, the directory committer's."""


def section_runs(*, quick: bool, rate: float = 3500.0) -> dict[str, Any]:
    """The ``scale`` section of ``benchmarks/main.py``: commits as a user's run them (lean requests, the default), of
    100 to 100,000 files, throttled and not, on the Go store where Go is installed (a store that is not the limit:
    ``capacity_headroom`` says by how much), else on the Python wire in a child process (the magic committer only;
    from ~10,000 files that store is the limit, and the report says which store it was). ``quick``: 1,000 files,
    not throttled, the magic committer."""
    try:
        build_go_store()
        build_go_program("drive")
        store = "go"
    except GoStoreError as err:
        print(f"  scale: the Go store is not available ({err}); on the Python wire, whose CPU bounds the larger "
              "cases", flush=True)
        store = "wire"
    kinds = [kind for kind in SECTION_KINDS if store == "go" or kind[0] == "magic"]
    return _runs([1000] if quick else [100, 1000, 10_000, 100_000], throttled=[False] if quick else [False, True],
                 rate=rate, kinds=kinds[:1] if quick else kinds, lean=True, store=store, ahead=store == "go")


def _runs(file_counts: list[int], *, throttled: list[bool], rate: float, kinds: list[tuple[str, bool]], lean: bool,
          store: str, ahead: bool = False) -> dict[str, Any]:
    results = []
    for files in file_counts:
        for committer, replaces in kinds:
            for throttle in throttled:
                case = f"{files},{rate if throttle else 0},{int(replaces)},{int(lean)},{store},{committer},{int(ahead)}"
                out = subprocess.run([sys.executable, "-m", "benchmarks.scale_bench", "--case", case],
                                     capture_output=True, text=True, check=True).stdout
                results.append({"committer": committer, **json.loads(out.strip().splitlines()[-1])})
                print(f"  scale: {json.dumps(results[-1])}", flush=True)
    return {"profile": PROFILE, "rate": rate, "lean": lean, "store": store, "read_ahead": ahead,
            "committers": sorted({committer for committer, _ in kinds}), "cases": results}


def _kind(case: dict[str, Any]) -> str:
    """A case's commit, as its table row and plot line name it."""
    committer = case.get("committer", "magic")
    return f"{committer}, overwrite" if case["overwrite"] else committer


def scale_markdown(scale: dict[str, Any]) -> list[str]:
    store = "the Go store" if scale.get("store") == "go" else "S3Wire"
    lean = "; lean requests" if scale.get("lean") else ""
    lean += "; pendingsets read as their tasks commit" if scale.get("read_ahead") else ""
    lines = [f"## The job commit at scale ({store}, `{scale['profile']}`{lean}; throttled: {scale['rate']:.0f} writes "
             "a second per prefix)", "",
             "| files | commit | throttled | seconds | floor s | ratio | Completes per CPU-s | SlowDowns | failures "
             "| concurrency low / high / final | peak RSS MiB | exact | the store's capacity over the client's rate |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: |"]
    for c in scale["cases"]:
        conc = c["concurrency"]
        headroom = f"{c['capacity_headroom']:.2f}x" if c.get("capacity_headroom") is not None else "-"
        lines.append(f"| {c['files']:,} | {_kind(c)} | "
                     f"{'yes' if c['writes_per_second'] else 'no'} | {c['seconds']:.2f} | {c['floor_seconds']:.2f} | "
                     f"{c['ratio']:.2f} | {c['completes_per_cpu_second']:,} | {c['slowdowns_answered']} | "
                     f"{c['failures']} | {conc['low']} / {conc['high']} / {conc['final']} | {c['peak_rss_mib']} | "
                     f"{'yes' if c['exact'] else 'NO'} | {headroom} |")
    return [*lines, "",
            "The floor is `max(writes / the prefix's rate, files x Complete latency / in-flight)`: it leaves out the "
            "round trips every commit makes whatever its size (the lease, the pendingsets' GETs, the journal, the "
            "last wave of Completes, an overwrite's deletes after them, `_SUCCESS`, the clean-up: ~0.3-0.5 s here), "
            "so below ~10,000 files the ratio is mostly those.",
            *(["", "Each task's commit is reported to the driver before the job commits, as Spark's `onTaskCommit` "
               "does while the other tasks run (`Committer.task_committed`): the job commit takes the pendingsets "
               "read then (up to 10,000 files' worth) and reads the rest."] if scale.get("read_ahead") else []),
            ""]


def scale_plot(scale: dict[str, Any], out: Any) -> None:
    """The job commit against files, each commit beside its floor (log-log): not throttled, and throttled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(False, "not throttled"), (True, f"throttled at {scale['rate']:.0f} writes/s a prefix")]
    panels = [(t, label) for t, label in panels if any(bool(c["writes_per_second"]) is t for c in scale["cases"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    kinds = list(dict.fromkeys(_kind(c) for c in scale["cases"]))
    for ax, (throttled, label) in zip(axes[0], panels, strict=True):
        floors: dict[tuple[tuple[int, float], ...], list[str]] = {}
        for kind in kinds:
            cases = sorted((c["files"], c["seconds"], c["floor_seconds"]) for c in scale["cases"]
                           if bool(c["writes_per_second"]) is throttled and _kind(c) == kind)
            if cases:
                ax.plot([f for f, _, _ in cases], [s for _, s, _ in cases], marker="o", label=kind)
                floors.setdefault(tuple((f, fl) for f, _, fl in cases), []).append(kind)
        for (points, named), style in zip(floors.items(), ("--", ":", "-.", "--"), strict=False):
            # (one line where several commits share a floor)
            ax.plot([f for f, _ in points], [fl for _, fl in points], linestyle=style, color="grey",
                    label=f"floor ({', '.join(named)})" if len(floors) > 1 else "floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("files")
        ax.set_ylabel("job commit, seconds")
        ax.set_title(label)
        ax.legend(fontsize="small")
    store = "the Go store" if scale.get("store") == "go" else "S3Wire"
    fig.suptitle(f"job commit at scale ({store}, {scale['profile']})")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="1000,10000", help="comma-separated file counts")
    parser.add_argument("--throttle", choices=("on", "off", "both"), default="both")
    parser.add_argument("--overwrite", action="store_true", help="also an overwrite deleting as many old files")
    parser.add_argument("--rate", type=float, default=3500.0, help="the throttle's writes a second per prefix")
    parser.add_argument("--lean", action="store_true", help="Completes by the lean path (s3commit.store.lean-requests)")
    parser.add_argument("--store", choices=("wire", "go"), default="wire",
                        help="the store of the --lean cases: the Python wire in a child (wire) or the Go store (go)")
    parser.add_argument("--committer", choices=("magic", "directory"), default="magic",
                        help="with --store go: the magic committer's engine commit, or the directory committer's "
                             "own job (conflict mode fail; replace for --overwrite)")
    parser.add_argument("--ahead", action="store_true",
                        help="with --store go: each task's commit reported before the job commit, as Spark's "
                             "onTaskCommit does (its pendingset read then: Committer.task_committed)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # the store of a --lean case, in this process
    parser.add_argument("--case", help=argparse.SUPPRESS)  # files,throttled,overwrite,lean[,store]: one case here
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.store == "go" and not (args.lean or args.case):
        parser.error("--store go is for the --lean cases")
    if args.serve:
        files, throttled, overwrite, _ = args.serve.split(",")
        serve_case(int(files), rate=float(throttled) or None, overwrite=overwrite == "1")
        return 0
    if args.case:
        files, throttled, overwrite, lean, *where = args.case.split(",")
        store, committer, ahead = (where + ["wire", "magic", "0"][len(where):])[:3]
        if committer != "magic" and store != "go":
            parser.error("--committer directory runs on the Go store (--lean --store go)")
        if lean != "1":
            result = run_case(int(files), rate=float(throttled) or None, overwrite=overwrite == "1")
        elif store == "go":
            result = run_go_case(int(files), rate=float(throttled) or None, overwrite=overwrite == "1",
                                 committer=committer, ahead=ahead == "1")
        else:
            result = run_served_case(int(files), rate=float(throttled) or None, overwrite=overwrite == "1")
        print(json.dumps(result))
        return 0
    throttles = {"on": [True], "off": [False], "both": [False, True]}[args.throttle]
    if args.committer != "magic" and args.store != "go":
        parser.error("--committer directory runs on the Go store (--lean --store go)")
    scale = scale_runs([int(f) for f in args.files.split(",")], throttled=throttles, rate=args.rate,
                       overwrite=args.overwrite, lean=args.lean, store=args.store, committer=args.committer,
                       ahead=args.ahead)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "profile": PROFILE,
                       "results": scale["cases"]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
