"""How long ``close()`` of one file waits for its last part, sent whole or cut in pieces that upload side by side.

A file of 128 MiB in parts of 32 MiB, deferred (a magic file) on the simulated S3 (profile ``s3-standard``: 80 MB/s
per connection). The first three parts are handed over and given a second to go up, as a JVM that is still writing
the last one gives them; then ``close()`` gets the last part and is timed. Interleaved rounds, medians.

    .venv/bin/python benchmarks/tail_close.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import s3commit.transfer.writer as writer_module
from s3commit import S3Store, StoreOptions
from s3commit.store.capability_cache import known
from s3commit.testing.server import S3TestServer
from s3commit.transfer.parts import BufferPart

MIB = 1 << 20
PART = 32 * MIB


class _Deferred(writer_module.CompletionPolicy):
    def upload_ready(self, pending: object) -> bool:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    variants = {"the last part whole": 1 << 62, "the last part in pieces (the default)": writer_module.PIECE_MIN}
    with S3TestServer(profile="s3-standard") as server, ThreadPoolExecutor(16) as pool:
        bucket = server.create_bucket("bench-tail-close")
        store = S3Store(StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                                     access_key="testing", secret_key="testing"))
        known(store, bucket)
        data = bytes(range(256)) * (4 * PART // 256)
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, piece in variants.items():
                writer_module.PIECE_MIN = piece
                writer = writer_module.MultipartWriter(store, bucket, "file", part_size=PART, max_in_flight=4,
                                                       executor=pool, policy=_Deferred())
                for index in range(3):
                    writer.write_part(BufferPart(bytearray(data[index * PART:(index + 1) * PART])))
                time.sleep(1.0)
                started = time.perf_counter()
                writer.close(BufferPart(bytearray(data[3 * PART:])))
                seconds[name].append(time.perf_counter() - started)
                store.uploads.abort_multipart_upload(bucket, "file", writer.upload_id or "")
    print(f"close() of a 128 MiB file, parts of 32 MiB, s3-standard, {args.rounds} rounds (median, each round):")
    for name, runs in seconds.items():
        print(f"  {name}: {statistics.median(runs):.3f} s  {', '.join(f'{s:.3f}' for s in runs)}")


if __name__ == "__main__":
    main()
