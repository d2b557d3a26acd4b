"""The client's CPU per GiB of ``UploadRequests.upload_part`` on a real connection, with and without the handler that
meets moto's in-process mock (``s3commit.store.moto_inprocess.adapt``), interleaved run by run on one test server.

    python benchmarks/upload_part_cpu.py [--parts 16] [--part-mib 32] [--rounds 5] [--threads 1]

Each round uploads ``parts`` parts of ``part_mib`` MiB from one ``bytearray`` (the writer's buffers are
bytearrays) through the store as it builds its client (the handler registered), then through the same client
with the handler removed: the code path of the store before the handler existed. Reported: this process's
CPU seconds (user + system) per GiB for each, their medians and the ratio. The server (moto behind the
simulator, profile ``none``) is another process: its CPU is not counted.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from s3commit import S3Store, StoreOptions
from s3commit.store import moto_inprocess
from s3commit.testing.server import S3TestServer

GIB = 1 << 30


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_round(store: S3Store, bucket: str, *, parts: int, body: bytearray, threads: int) -> float:
    """CPU seconds per GiB of ``parts`` UploadParts of ``body`` (one upload, aborted afterwards)."""
    upload_id = store.uploads.create_multipart_upload(bucket, "bench")
    started = cpu()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: store.uploads.upload_part(bucket, "bench", upload_id, n, body), range(1, parts + 1)))
    spent = cpu() - started
    store.uploads.abort_multipart_upload(bucket, "bench", upload_id)
    return spent / (parts * len(body) / GIB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=16)
    parser.add_argument("--part-mib", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    body = bytearray(time.time_ns().to_bytes(8, "little") * (args.part_mib * (1 << 20) // 8))
    with S3TestServer() as server:
        bucket = server.create_bucket("bench-upload-part")
        store = S3Store(StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                                     access_key="testing", secret_key="testing"))
        client = store.requests.client  # built as the store builds it: adapt() registered the handler
        one_round(store, bucket, parts=2, body=body, threads=args.threads)  # warm-up: connections, imports
        results: dict[str, list[float]] = {"with the handler": [], "without it": []}
        for _ in range(args.rounds):
            moto_inprocess.adapt(client)
            results["with the handler"].append(one_round(store, bucket, parts=args.parts, body=body,
                                                         threads=args.threads))
            client.meta.events.unregister("before-send", unique_id=moto_inprocess.BODY_HANDLER_ID)
            results["without it"].append(one_round(store, bucket, parts=args.parts, body=body,
                                                   threads=args.threads))
    for name, values in results.items():
        print(f"{name:>17}: median {statistics.median(values):.3f} CPU s/GiB "
              f"(runs: {', '.join(f'{v:.3f}' for v in values)})")
    ratio = statistics.median(results["with the handler"]) / statistics.median(results["without it"])
    print(f"ratio with/without: {ratio:.3f} ({args.rounds} rounds of {args.parts} x {args.part_mib} MiB, "
          f"{args.threads} thread(s))")


if __name__ == "__main__":
    main()
