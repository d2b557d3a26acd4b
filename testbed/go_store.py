"""A simulated S3 in Go for commit-path scale: ``testbed/gostore`` (stdlib only), the model of
:mod:`s3commit.testing.memory` answered as :mod:`s3commit.testing.memory_wire` renders it, on 127.0.0.1 over HTTP/1.1,
with S3's latencies (a :class:`~s3commit.testing._sim.profiles.LatencyProfile`) and per-partition request rates (a
:class:`~s3commit.testing._sim.profiles.ThrottleSpec`, 503 SlowDown above them, a partition splitting after sustained
throttling) passed from their Python definitions as JSON. It answers many times the requests per CPU-second the
Python wire does, so that a benchmark of the client measures the client.

:class:`GoStore` builds the binary with ``go build`` (cached under ``~/.cache/s3commit/gostore/<hash of the
sources>/``; :class:`GoStoreError` names the cause when ``go`` is missing or the build fails), starts it as a child
that dies when its stdin closes, and gives botocore clients, :class:`~s3commit.store.s3store.S3Store` s on it, and
its admin endpoints (``/_gostore/``): ``stats`` (requests by operation, SlowDowns answered, partitions split, the
process's CPU seconds and peak RSS), ``seed`` (uploads of one part each, made at once), ``put`` (objects, at once)
and ``counts`` (objects under a prefix, outstanding uploads). Signatures are not checked.

What it can answer is measured by :meth:`GoStore.complete_capacity`: Completes shaped as s3commit's lean path sends
them, sent by ``drive`` (``testbed/gostore/drive``, built the same way) as fast as the store answers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from s3commit.config.options import RetryPolicy, StoreOptions
from s3commit.store.s3store import S3Store
from s3commit.testing._sim.profiles import LatencyProfile, ThrottleSpec, get_profile
from s3commit.testing.memory import aws_capabilities
from s3commit.testing.server import ACCESS_KEY, REGION, SECRET_KEY

GO_SOURCES = Path(__file__).parent / "gostore"
"""The Go module of the store."""
CACHE_ROOT = Path.home() / ".cache" / "s3commit" / "gostore"
"""Where built binaries are kept, one directory per hash of the sources."""
GO_FALLBACK = Path("/usr/local/go/bin/go")
"""Where Go's own installer puts the toolchain, looked at when ``go`` is not on PATH."""

TICK = 0.001
"""The epoll front end's tick where latencies are simulated (GoStore's ``tick``)."""
ADMIN_BATCH = 5000
"""Uploads seeded, or objects put, per admin request."""
ADMIN_BATCH_BYTES = 4_000_000
"""The bytes of objects put per admin request, at most (and one object)."""


class GoStoreError(RuntimeError):
    """The Go store could not be built or started."""


def go_binary() -> str:
    """The ``go`` command: on PATH, else Go's default install location."""
    found = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.is_file() else None)
    if found is None:
        raise GoStoreError("the go command was not found on PATH (nor at /usr/local/go/bin/go): install Go >= 1.22 "
                           "to build testbed/gostore")
    return found


def go_sources_hash() -> str:
    """A hash of the Go sources (names and contents): the cache's key."""
    digest = hashlib.sha256()
    for path in sorted(p for p in GO_SOURCES.rglob("*") if p.suffix == ".go" or p.name == "go.mod"):
        digest.update(path.relative_to(GO_SOURCES).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_go_store() -> Path:
    """The store's binary, built with ``go build`` unless the cache holds one for these sources."""
    return build_go_program("gostore")


def build_go_program(name: str) -> Path:
    """A command of the Go module, built unless the cache holds it for these sources: ``gostore`` (the store, the
    module's root) or ``drive`` (its load, ``testbed/gostore/drive``)."""
    if name not in ("gostore", "drive"):
        raise GoStoreError(f"no Go command {name!r} in {GO_SOURCES} (gostore, drive)")
    cache = CACHE_ROOT / go_sources_hash()
    binary = cache / name
    if binary.is_file():
        return binary
    go = go_binary()
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=cache)) / name
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    package = "." if name == "gostore" else f"./{name}"
    try:
        done = subprocess.run([go, "build", "-trimpath", "-o", str(partial), package], cwd=GO_SOURCES, env=env,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise GoStoreError(f"go build of {GO_SOURCES} failed ({go}, exit {done.returncode}):\n"
                               f"{(done.stderr or done.stdout)[-3000:]}")
        os.replace(partial, binary)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise GoStoreError(f"go build of {GO_SOURCES} could not run: {err}") from err
    finally:
        shutil.rmtree(partial.parent, ignore_errors=True)
    return binary


class GoStore:
    """The Go store in a child process on 127.0.0.1 (see the module).

    Args:
        profile: S3's latency (a profile or its name, ``"s3-standard"``); None: no wait.
        throttle: per-partition request rates; None: no limit.
        conditional: honour ``If-None-Match`` / ``If-Match`` (False: ignore them, as rclone does).
        frontend: ``"epoll"`` (one event loop serves every connection; the default on Linux) or ``"goroutines"`` (a
            goroutine a connection, over Go's poller; the default elsewhere).
        tick: with the epoll front end, while requests come or answers wait, look for requests once every ``tick``
            seconds instead of at every arrival: fewer wake-ups (~30% less CPU an answer in a scale run), a request
            applied and answered up to a tick later. Default: 1 ms where the profile has latencies (tens of ms on
            S3), 0 otherwise.
        procs: the store's GOMAXPROCS (default 1: the fewest CPU-seconds per answer, no thread woken for another's
            work; more for a client that sends more than one core's worth, ~16,000 answers a second here).
        cpu_profile: a file the store writes its CPU profile to (``runtime/pprof``; ``go tool pprof``) until it stops.
    """

    name = "gostore"

    def __init__(self, *, profile: str | LatencyProfile | None = None, throttle: ThrottleSpec | None = None,
                 conditional: bool = True, frontend: str | None = None, tick: float | None = None, procs: int = 1,
                 cpu_profile: str | None = None) -> None:
        self.profile = get_profile(profile) if profile is not None else None
        self.throttle = throttle
        self.conditional = conditional
        self.frontend = frontend or ("epoll" if sys.platform.startswith("linux") else "goroutines")
        slow = self.profile is not None and (self.profile.default_first_byte_seconds > 0
                                             or any(self.profile.first_byte_seconds.values()))
        self.tick = (TICK if slow else 0.0) if tick is None else tick
        self.procs = procs
        self.cpu_profile = cpu_profile
        self._process: subprocess.Popen[str] | None = None
        self._url = ""
        self._client: Any = None
        self._store_client: Any = None

    def config(self) -> dict[str, Any]:
        """What the binary is given (``-config``): the profile's and the throttle's ``to_dict()``."""
        return {"profile": self.profile.to_dict() if self.profile is not None else None,
                "throttle": self.throttle.to_dict() if self.throttle is not None else None,
                "conditional": self.conditional}

    def start(self) -> GoStore:
        if self._process is not None:
            return self
        binary = build_go_store()
        command = [str(binary), "-config", json.dumps(self.config()), "-procs", str(self.procs),
                   "-frontend", self.frontend, "-tick", f"{self.tick}s"]
        if self.cpu_profile:
            command += ["-cpuprofile", self.cpu_profile]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            error = process.stderr.read() if process.stderr is not None else ""
            process.wait()
            raise GoStoreError(f"the Go store exited at start (exit {process.returncode}): {error[-2000:]}")
        self._url = json.loads(line)["url"]
        self._process = process
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()  # it exits when its stdin closes
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()

    def __enter__(self) -> GoStore:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        if not self._url:
            raise GoStoreError("the Go store is not running")
        return self._url

    @property
    def pid(self) -> int:
        if self._process is None:
            raise GoStoreError("the Go store is not running")
        return self._process.pid

    # --- clients and stores --------------------------------------------------------------------------------------

    def client(self, *, max_attempts: int = 1, max_pool_connections: int = 32) -> Any:
        """A new boto3 S3 client for this store (path-style, the test credentials; botocore retries nothing by
        default, leaving retries to the code under test)."""
        import boto3
        from botocore.config import Config

        config = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": max_attempts,
                                                                  "mode": "standard"},
                        max_pool_connections=max_pool_connections, connect_timeout=10, read_timeout=120)
        return boto3.client("s3", endpoint_url=self.endpoint_url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION, config=config)

    def create_bucket(self, name: str) -> str:
        if self._client is None:
            self._client = self.client()
        self._client.create_bucket(Bucket=name)
        return name

    def options(self, *, retry: RetryPolicy | None = None, lean_requests: bool = False) -> StoreOptions:
        """The options of a store on this endpoint (path-style, the test credentials, one region)."""
        return StoreOptions(endpoint_url=self.endpoint_url, region=REGION, path_style=True, access_key=ACCESS_KEY,
                            secret_key=SECRET_KEY, use_ssl=False, lean_requests=lean_requests,
                            retry=retry or RetryPolicy())

    def store(self, *, retry: RetryPolicy | None = None, lean_requests: bool = False, conditional: bool | None = None,
              buckets: Iterable[str] | None = None) -> S3Store:
        """A real :class:`S3Store` on this endpoint, knowing AWS's capabilities (:func:`aws_capabilities`, with
        ``conditional`` default this store's) for ``buckets`` (default: every bucket now), so no probe runs. Its
        botocore client is built once and shared by every store made here (as the memory wire's are: building one
        loads the service's model, ~0.2 s); each store has its own retries and counters."""
        if self._store_client is None:
            from s3commit.store.client import build_s3_client

            self._store_client = build_s3_client(self.options())  # one attempt a request: a store retries
        store = S3Store(self.options(retry=retry, lean_requests=lean_requests), client=self._store_client)
        honours = self.conditional if conditional is None else conditional
        for bucket in self.admin("buckets") if buckets is None else buckets:
            store.capabilities[bucket] = aws_capabilities(bucket, endpoint=self.endpoint_url, conditional=honours)
        return store

    # --- admin ---------------------------------------------------------------------------------------------------

    def admin(self, name: str, body: Any = None, **query: Any) -> Any:
        """One admin endpoint's JSON answer (``/_gostore/<name>``; a POST of ``body`` as JSON when given)."""
        url = f"{self.endpoint_url}/_gostore/{name}"
        if query:
            url += "?" + urllib.parse.urlencode(query, doseq=True)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=120) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as err:
            raise GoStoreError(f"/_gostore/{name}: {err.code} {err.read()[:500]!r}") from err

    def stats(self) -> dict[str, Any]:
        """Requests by operation (``requests``, ``requests_total``), SlowDowns answered (``slowdowns``,
        ``slowdowns_answered``), partitions split (``partitions_split``, ``splits``), the process's CPU seconds
        (``cpu_seconds``, getrusage) and peak RSS (``peak_rss_mib``)."""
        return dict(self.admin("stats"))

    def seed(self, bucket: str, keys: list[str], body: bytes = b"new") -> list[dict[str, str]]:
        """An upload of one part (``body``, text) at each key, made at once (no latency, no throttle): each its
        ``key``, ``upload_id`` and part ``etag``."""
        made: list[dict[str, str]] = []
        for start in range(0, len(keys), ADMIN_BATCH):  # (batches: the store's memory stays that of its contents)
            batch = {"bucket": bucket, "keys": keys[start:start + ADMIN_BATCH], "body": body.decode()}
            made.extend(self.admin("seed", batch)["uploads"])
        return made

    def put_objects(self, bucket: str, objects: Mapping[str, bytes]) -> dict[str, str]:
        """Objects (text bodies) stored at once (no latency, no throttle): key -> ETag."""
        etags: dict[str, str] = {}
        batch: dict[str, str] = {}
        size = 0
        for key, body in objects.items():
            batch[key] = body.decode()
            size += len(key) + len(body)
            if len(batch) >= ADMIN_BATCH or size >= ADMIN_BATCH_BYTES:
                etags.update(self.admin("put", {"bucket": bucket, "objects": batch})["etags"])
                batch, size = {}, 0
        if batch:
            etags.update(self.admin("put", {"bucket": bucket, "objects": batch})["etags"])
        return etags

    # --- its capacity --------------------------------------------------------------------------------------------

    def drive(self, method: str, requests: list[tuple[str, str]], *, connections: int,
              headers: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
        """``requests`` (each a target, ``/bucket/key?query``, and a body) sent by ``drive`` (a Go program of one
        thread, ``testbed/gostore/drive``) over ``connections`` keep-alive connections, one request at a time on
        each, as fast as this store answers. Gives drive's report (``sent``, ``answered``, ``statuses``,
        ``seconds``, ``error``) and this store's part, measured from when every connection is open to when every
        answer is in (their opening and closing left out, as a client's are over a commit): its CPU-seconds
        (``store_cpu_seconds``), its answers a second (``answers_per_second``) and per CPU-second
        (``answers_per_cpu_second``)."""
        plan = {"address": self.endpoint_url.removeprefix("http://"), "connections": connections, "method": method,
                "headers": [list(h) for h in headers],
                "requests": [{"target": target, "body": body} for target, body in requests]}
        with subprocess.Popen([str(build_go_program("drive"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as process:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            try:
                process.stdin.write(json.dumps(plan) + "\n")
                process.stdin.flush()
                connected = process.stdout.readline()
                before = self.stats()
                process.stdin.write("go\n")
                process.stdin.flush()
                answered_line = process.stdout.readline()
                after = self.stats()
            except BrokenPipeError:
                connected = answered_line = ""
            finally:
                with contextlib.suppress(BrokenPipeError):  # (it ended first: its error says why)
                    process.stdin.close()
                error = process.stderr.read()
            process.wait(timeout=60)
        if not connected or not answered_line:
            raise GoStoreError(f"drive failed (exit {process.returncode}): {error[-2000:]}")
        report: dict[str, Any] = json.loads(answered_line)
        cpu = after["cpu_seconds"] - before["cpu_seconds"]
        answered = after["requests_total"] - before["requests_total"]
        report.update(store_cpu_seconds=round(cpu, 3), store_answers=answered,
                      answers_per_second=round(answered / max(report["seconds"], 1e-9)),
                      answers_per_cpu_second=round(answered / max(cpu, 1e-9)))
        return report

    def complete_capacity(self, *, uploads: int = 40_000, connections: int = 4_000) -> dict[str, Any]:
        """How many CompleteMultipartUploads a second this store answers at most: ``uploads`` uploads of one part
        seeded in a fresh bucket, then completed by :meth:`drive` over ``connections`` connections (enough that
        the latency is not the limit: 4,000 at 50 ms allow 80,000 a second). Its ``answers_per_cpu_second`` is the
        store's capacity on a core of its own; ``answers_per_second`` is bounded by drive's one thread too (on 2
        cores here, drive keeps the store ~90% busy). Each request is shaped as s3commit's lean path sends it (the
        same six headers, a SigV4 Authorization of the same length, which this store does not check; the same
        body). Gives :meth:`drive`'s report; ``complete`` counts the uploads completed."""
        bucket = self.create_bucket(f"capacity-{uuid.uuid4().hex[:12]}")
        keys = [f"table/day={n % 100}/part-{n:06d}-{uuid.uuid4()}-c000.parquet" for n in range(uploads)]
        made = self.seed(bucket, keys)
        host = self.endpoint_url.removeprefix("http://")
        signature = "0" * 64
        headers = [("Host", host), ("User-Agent", "s3commit drive"), ("X-Amz-Date", "20261201T000000Z"),
                   ("X-Amz-Content-SHA256", "0" * 64),
                   ("Authorization", f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20261201/{REGION}/s3/aws4_request, "
                                     f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={signature}")]
        requests = [(f"/{bucket}/{urllib.parse.quote(upload['key'])}?uploadId={upload['upload_id']}",
                     '<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><PartNumber>1'
                     f'</PartNumber><ETag>{upload["etag"]}</ETag></Part></CompleteMultipartUpload>')
                    for upload in made]
        report = self.drive("POST", requests, connections=connections, headers=headers)
        report["complete"] = self.counts(bucket)["objects"]
        return report

    def counts(self, bucket: str, prefix: str = "", contains: Iterable[str] = ()) -> dict[str, Any]:
        """Objects under ``prefix`` (``objects``), those whose key contains each of ``contains`` (``containing``),
        and the uploads outstanding under it (``uploads``)."""
        return dict(self.admin("counts", bucket=bucket, prefix=prefix, contains=list(contains)))
