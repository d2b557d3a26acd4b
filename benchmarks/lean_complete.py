"""The client's CPU per CompleteMultipartUpload with ``s3commit.store.lean-requests`` off (botocore's call) and on
(:mod:`s3commit.store.lean_complete`).

1. Over the in-process wire store (``S3Wire``), as ``fast_store_rate.py`` measures it: this process's CPU per
   Complete through ``S3Store`` minus the wire's own (``S3Wire.answer`` of the recorded requests), serially and from
   ``--threads`` threads.
2. Over sockets, on the moto server (a separate process, so this process's CPU is the client's alone): ``--http``
   one-part uploads created beforehand, then completed through ``S3Store`` serially and from ``--http-threads``
   threads; this process's CPU per Complete (the client, its HTTP session and urllib3 included), and the wall rate.

    PYTHONPATH=. .venv/bin/python benchmarks/lean_complete.py [--requests 2000] [--threads 32] [--http 400]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fast_store_rate import measure

from s3commit import S3Store, StoreOptions
from s3commit.config.options import RetryPolicy
from s3commit.testing.server import S3TestServer


def over_wire(requests: int, threads: int, lean: bool) -> float:
    """The client's CPU ms per Complete over S3Wire."""
    return float(measure(requests, threads, "complete", lean)["client_cpu_ms"])


def over_http(server: S3TestServer, requests: int, threads: int, lean: bool) -> dict[str, float]:
    options = StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True, access_key="bench",
                           secret_key="bench", lean_requests=lean, retry=RetryPolicy(max_attempts=3))
    store = S3Store(options)
    bucket = server.create_bucket(f"lean-{int(lean)}-{threads}-{time.monotonic_ns()}")
    todo: list[tuple[str, str, Any]] = []
    for n in range(requests + 1):
        key = f"out/part-{n:05d}.bin"
        upload = store.uploads.create_multipart_upload(bucket, key)
        todo.append((key, upload, store.uploads.upload_part(bucket, key, upload, 1, b"x" * 100)))

    def complete(item: tuple[str, str, Any]) -> None:
        key, upload, part = item
        store.uploads.complete_multipart_upload(bucket, key, upload, [part.etag],
                                                checksum_algorithm=store.uploads.checksum_algorithm(bucket),
                                                part_checksums=[part.checksum])

    complete(todo[0])  # the first builds botocore's caches (and the lean path's endpoint)
    cpu, wall = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(complete, todo[1:]))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    counted = store.counters.snapshot()["requests"]["CompleteMultipartUpload"]
    assert counted == requests + 1, counted
    return {"cpu_ms": 1000 * cpu / requests, "per_s": requests / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--http", type=int, default=400, help="Completes over the moto server (0: none)")
    parser.add_argument("--http-threads", type=int, default=8)
    args = parser.parse_args(argv)
    print(f"client CPU ms per CompleteMultipartUpload, {args.requests} over S3Wire, {args.http} over moto")
    for threads in (1, args.threads):
        off, on = over_wire(args.requests, threads, False), over_wire(args.requests, threads, True)
        print(f"  S3Wire, {threads:>2} threads: botocore {off:.3f}, lean {on:.3f} ({off / on:.1f}x)")
    if args.http:
        with S3TestServer(min_part_size=0) as server:
            for threads in (1, args.http_threads):
                off = over_http(server, args.http, threads, False)
                on = over_http(server, args.http, threads, True)
                print(f"  moto over HTTP, {threads:>2} threads: botocore {off['cpu_ms']:.3f} ({off['per_s']:.0f}/s), "
                      f"lean {on['cpu_ms']:.3f} ({on['per_s']:.0f}/s) ({off['cpu_ms'] / on['cpu_ms']:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
