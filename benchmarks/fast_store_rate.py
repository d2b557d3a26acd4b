"""How fast the memory store over botocore's wire (``s3commit.testing.S3Wire``) answers, against how fast the client
under test (``S3Store``: boto3/botocore) sends: the test store must not be what a scale run measures.

Three measurements of one operation (CompleteMultipartUpload of a one-part upload by default, the commit path's
request; ``--operation put`` for conditional PUTs), in this process:

1. ``through the store``: ``--requests`` requests through ``S3Store`` over the wire from ``--threads`` threads, no
   latency: wall time and this process's CPU per request (the client's and the store's together);
2. ``store alone``: the same prepared requests (recorded in 1) answered again by a fresh wire's
   :meth:`S3Wire.answer` directly, on a model in the same state: the store's CPU per request;
3. ``with s3-standard``: 1 again with the ``s3-standard`` latency profile: the rate a latency-bound run reaches.

The client's CPU per request is 1 minus 2. Both sides hold the GIL for nearly all their CPU, so a CPU-second is
what each can do a second in one process: requests answered per CPU-second by the store against sent per
CPU-second by the client is the margin (the issue asks for >= 5x).

    PYTHONPATH=. .venv/bin/python benchmarks/fast_store_rate.py [--requests 2000] [--threads 32] [--operation complete]
        [--lean]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from s3commit.testing import MemoryS3, S3Wire, wire_of

BUCKET = "rate"
PART = b"p" * 1024


def _model(requests: int, operation: str) -> tuple[MemoryS3, list[tuple[str, str, str]]]:
    """A model holding what the requests need: for Completes, one upload of one part per request (ids are the
    model's deterministic ones, so a second model made alike has the same)."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    todo: list[tuple[str, str, str]] = []
    process = S3Wire(s3).process
    for n in range(requests):
        key = f"out/year={n % 8}/part-{n:06d}.parquet"
        if operation == "complete":
            upload = process.send("create_multipart_upload", {"Bucket": BUCKET, "Key": key})["UploadId"]
            etag = process.send("upload_part", {"Bucket": BUCKET, "Key": key, "UploadId": upload, "PartNumber": 1,
                                                "Body": PART})["ETag"]
            todo.append((key, upload, etag))
        else:
            todo.append((key, "", ""))
    return s3, todo


def _send(store: Any, operation: str) -> Callable[[tuple[str, str, str]], None]:
    if operation == "complete":
        return lambda item: store.uploads.complete_multipart_upload(BUCKET, item[0], item[1], [item[2]],
                                                                    if_none_match=True)
    return lambda item: store.objects.put_object(BUCKET, item[0], PART, if_none_match=True)


def _through_store(requests: int, threads: int, operation: str, profile: str | None,
                   record: list[Any] | None = None, lean: bool = False) -> dict[str, float]:
    s3, todo = _model(requests, operation)
    wire = S3Wire(s3, profile=profile)
    store = wire.store(lean_requests=lean)
    if record is not None:
        answer = wire.answer

        def recording(request: Any) -> Any:
            record.append(request)
            return answer(request)

        wire.answer = recording  # type: ignore[method-assign]
    send = _send(store, operation)
    send(todo[0])  # botocore's first call builds its caches: not what a run of thousands costs
    cpu, wall = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(send, todo[1:]):
            pass
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    sent = requests - 1
    assert wire_of(store) is wire and len(wire.process.requests) == requests
    return {"requests": sent, "wall_s": wall, "cpu_s": cpu, "per_s": sent / wall, "cpu_ms": 1000 * cpu / sent}


def _store_alone(recorded: list[Any], requests: int, operation: str) -> dict[str, float]:
    s3, _ = _model(requests, operation)
    wire = S3Wire(s3)
    cpu, wall = time.process_time(), time.perf_counter()
    for request in recorded:
        response = wire.answer(request)
        assert response.status_code == 200, response.content
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"requests": len(recorded), "wall_s": wall, "cpu_s": cpu, "cpu_ms": 1000 * cpu / len(recorded)}


def measure(requests: int = 2000, threads: int = 32, operation: str = "complete", lean: bool = False) -> dict[str, Any]:
    recorded: list[Any] = []
    both = _through_store(requests, threads, operation, None, recorded, lean)
    alone = _store_alone(recorded[1:], requests, operation)  # (the first was the warm-up's, in the model already)
    for request in recorded[1:]:
        if hasattr(request.body, "seek"):
            request.body.seek(0)
    latency = _through_store(requests, threads, operation, "s3-standard", lean=lean)
    client_ms = both["cpu_ms"] - alone["cpu_ms"]
    return {
        "operation": operation, "lean": lean, "requests": requests, "threads": threads, "cpus": os.cpu_count(),
        "through_store": both, "store_alone": alone, "s3_standard": latency,
        "client_cpu_ms": client_ms,
        "client_sends_per_cpu_s": 1000 / client_ms,
        "store_answers_per_cpu_s": 1000 / alone["cpu_ms"],
        "margin": client_ms / alone["cpu_ms"],
    }


def report(result: dict[str, Any]) -> str:
    both, alone, latency = result["through_store"], result["store_alone"], result["s3_standard"]
    return "\n".join([
        f"{result['operation']}{' (lean)' if result.get('lean') else ''}: {result['requests']} requests, "
        f"{result['threads']} threads, {result['cpus']} CPUs",
        f"  through S3Store over the wire, no latency: {both['per_s']:.0f}/s wall, "
        f"{both['cpu_ms']:.3f} ms CPU a request (client + store)",
        f"  the store alone (S3Wire.answer on the recorded requests): {alone['cpu_ms']:.3f} ms CPU a request",
        f"  the client: {result['client_cpu_ms']:.3f} ms CPU a request",
        f"  store answers {result['store_answers_per_cpu_s']:.0f}/CPU-s, client sends "
        f"{result['client_sends_per_cpu_s']:.0f}/CPU-s: margin {result['margin']:.1f}x",
        f"  with s3-standard latency: {latency['per_s']:.0f}/s wall, {latency['cpu_ms']:.3f} ms CPU a request",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--operation", choices=("complete", "put"), default="complete")
    parser.add_argument("--lean", action="store_true",
                        help="the store with s3commit.store.lean-requests (Completes sent by lean_complete)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    result = measure(args.requests, args.threads, args.operation, args.lean)
    print(report(result))
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "fast-store-rate"
    sys.exit(main())
