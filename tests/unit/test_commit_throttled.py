"""A job commit that meets the store's throttling ends exact, none of its requests failed by it: the store's adaptive
concurrency limit (s3commit.store.concurrency) backs off, and the commit keeps as many Completes in flight as that
limit allows, not ``threads``.

The store is :class:`~s3commit.testing.memory.MemoryS3`, throttled per prefix by a token bucket (the simulator's
:class:`~s3commit.testing._sim.profiles.TokenBucket`) on a clock of the test's: each write moves it on by a request's
latency divided by the sending process's limit, the time a request takes at the rate that limit allows (its slots
kept full, as a commit's pool keeps them). So the store takes ``RATE x LATENCY`` writes in flight, and a process
sending more than that meets 503 SlowDown. Nothing sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from s3commit import create_committer
from s3commit.commit.process_state import ProcessState
from s3commit.config.options import CommitterOptions, StoreOptions
from s3commit.model.paths import is_scratch_key
from s3commit.store.s3store import S3Store
from s3commit.store.uploads import UploadRequests
from s3commit.testing._sim.profiles import TokenBucket
from s3commit.testing.memory import MemoryS3, Request, s3_error

BUCKET = "b"
DEST = f"s3://{BUCKET}/t"
RATE = 200.0
"""Writes a second the store takes per prefix."""
LATENCY = 0.1
"""Seconds a request takes: the store takes RATE x LATENCY = 20 writes in flight."""
WRITES = frozenset({"put_object", "create_multipart_upload", "upload_part", "complete_multipart_upload",
                    "abort_multipart_upload", "delete_object", "delete_objects", "copy_object"})
SETTLE = 30.0


class ThrottledS3:
    """The store's per-prefix write rate, on a clock moved by the requests (module docstring)."""

    def __init__(self, s3: MemoryS3) -> None:
        self.s3 = s3
        self.now = 0.0
        self._buckets: dict[str, TokenBucket] = {}
        self.refused = 0

    def store(self, **kwargs) -> S3Store:
        """A process's store, throttled."""
        sending: list[S3Store] = []
        store = self.s3.store(fail=lambda request: self.admit(request, sending[0]), **kwargs)
        sending.append(store)
        return store

    def admit(self, request: Request, store: S3Store) -> Exception | None:
        if request.operation not in WRITES:
            return None
        self.now += LATENCY / store.requests.limit(request.bucket, request.key).limit
        prefix = request.key.split("/", 1)[0]
        bucket = self._buckets.setdefault(prefix, TokenBucket(rate=RATE, capacity=RATE * LATENCY / 2,
                                                              clock=lambda: self.now))
        if bucket.try_take():
            return None
        self.refused += 1
        return s3_error("SlowDown", 503, "Please reduce your request rate.")


def write_job(s3: ThrottledS3, files: int, *, options: CommitterOptions, driver_store: S3Store):
    """A magic job of ``files`` files in 4 tasks, written by an executor process; returns the driver's committer, the
    task commit messages and the files (key -> bytes)."""
    driver = create_committer("magic", DEST, store=driver_store, options=options, process=ProcessState())
    driver.setup_job()
    executor = create_committer("magic", DEST, job_id=driver.job_id, store=s3.store(), options=options,
                                process=ProcessState())
    written: dict[str, bytes] = {}
    messages = []
    for task in range(4):
        attempt = executor.setup_task(executor.new_task_attempt_id(task))
        for f in range(task, files, 4):
            name, body = f"year={f % 3}/part-{f:05d}.txt", f"file {f}".encode()
            with attempt.open(name) as out:
                out.write(body)
            written[f"t/{name}"] = body
        messages.append(executor.commit_task(attempt))
    return driver, messages, written


def visible(s3: MemoryS3) -> dict[str, bytes]:
    return {k: v for k, v in s3.objects(BUCKET, "t/").items() if not is_scratch_key(k) and not k.endswith("_SUCCESS")}


def test_a_job_commit_throttled_per_prefix_ends_exact_with_no_request_failed_and_the_limit_backed_off():
    memory = MemoryS3()
    memory.create_bucket(BUCKET)
    s3 = ThrottledS3(memory)
    options = CommitterOptions(threads=4)
    driver_store = s3.store(options=StoreOptions(concurrency_max=64))
    driver, messages, written = write_job(s3, 300, options=options, driver_store=driver_store)

    success = driver.commit_job(messages)

    assert visible(memory) == written and memory.uploads(BUCKET) == []
    counted = driver_store.counters.snapshot()
    # No write failed (the GETs of records not there yet, 404s, are counted as failures; SlowDown is retried).
    assert not {op for op in counted["failures"] if op.startswith(("Put", "Complete", "Delete", "Create", "Upload"))}
    assert counted["throttles"].get("CompleteMultipartUpload", 0) > 0 and s3.refused > 0
    metrics = success.metrics
    assert metrics["committer_commits_completed"] == 300
    assert metrics["committer_throttles"] > 0 and metrics["committer_concurrency_decreases"] > 0
    assert metrics["committer_concurrency_low"] < metrics["committer_concurrency_high"] == 64
    limit = driver_store.requests.limit(BUCKET, "t/x").state()
    assert limit.low < 64 and limit.in_flight == 0
    assert success.diagnostics["s3commit.store.concurrency.max"] == "64"


class HeldCompletes(UploadRequests):
    """Every Complete waits at ``gate`` (a barrier the test sets) before it is sent; ``most`` is how many were in
    flight at once."""

    gate: Callable[[], object] = staticmethod(lambda: None)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.now = self.most = 0

    def complete_multipart_upload(self, *args, **kwargs):
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            type(self).gate()
            return super().complete_multipart_upload(*args, **kwargs)
        finally:
            with self._lock:
                self.now -= 1


class HeldStore(S3Store):
    uploads_class = HeldCompletes


def test_the_commit_keeps_as_many_completes_in_flight_as_the_limit_allows_where_threads_are_not_set():
    memory = MemoryS3()
    memory.create_bucket(BUCKET)
    s3 = ThrottledS3(memory)
    eight = threading.Barrier(8, timeout=SETTLE)  # the commit ends only if 8 Completes wait here at once
    HeldCompletes.gate = staticmethod(eight.wait)
    try:
        store = s3.store(options=StoreOptions(concurrency_max=8), store_class=HeldStore)
        driver, messages, written = write_job(s3, 32, options=CommitterOptions(), driver_store=store)
        driver.commit_job(messages)
    finally:
        HeldCompletes.gate = staticmethod(lambda: None)
    assert visible(memory) == written
    assert store.uploads.most == 8


def test_threads_a_user_set_bound_the_completes_as_s3as_committers_take_them():
    memory = MemoryS3()
    memory.create_bucket(BUCKET)
    store = memory.store(store_class=HeldStore)
    driver, messages, written = write_job(ThrottledS3(memory), 32, options=CommitterOptions(threads=2),
                                          driver_store=store)
    driver.commit_job(messages)
    assert visible(memory) == written
    assert store.uploads.most <= 2


def test_with_the_adaptive_limit_off_threads_bound_the_completes_again():
    memory = MemoryS3()
    memory.create_bucket(BUCKET)
    store = memory.store(options=StoreOptions(concurrency_adaptive=False), store_class=HeldStore)
    driver, messages, written = write_job(ThrottledS3(memory), 32, options=CommitterOptions(threads=2),
                                          driver_store=store)
    success = driver.commit_job(messages)
    assert visible(memory) == written
    assert store.uploads.most <= 2
    assert success.diagnostics["s3commit.store.concurrency.adaptive"] == "false"
