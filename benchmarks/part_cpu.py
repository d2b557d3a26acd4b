"""What each integrity and signing option costs a part: this process's CPU per GiB of ``UploadRequests.upload_part``
from a block file, option by option, interleaved round by round on one test server.

    python benchmarks/part_cpu.py [--parts 8] [--part-mib 32] [--rounds 3]

Each round uploads ``parts`` parts of ``part_mib`` MiB, each loaded from a block file as the sidecar loads it,
through a store made for each variant (moto behind the simulator, profile ``none``; moto is another process and
its CPU is not counted). The variants:

- ``read, signed``: the part read into a new ``bytearray`` and its payload SHA-256 signed (the data path before
  issue 34, less the CRT's signer that ``s3commit.store.signing`` had already replaced);
- ``mapped, signed``: the part mapped from its file (``s3commit.transfer.parts``), payload signed;
- ``mapped, unsigned``: the default on moto (``s3commit.signing.payload=auto``: the ETag check compares MD5s);
- ``... no ETag check``: what a store that validates the checksum itself (AWS S3, SeaweedFS) costs: no MD5;
- the other checksum algorithms, mapped, unsigned, no ETag check (``CRC32C``, ``CRC64NVME`` need awscrt).

Also measured alone, on one 32 MiB buffer: each digest (MD5, SHA-256, CRC32 by zlib, CRC32C and CRC64NVME by
awscrt), and reading a part into a new buffer against mapping it. Reported: medians of the rounds and the runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import zlib
from collections.abc import Callable

from s3commit import S3Store, StoreOptions
from s3commit.store.capability_cache import known
from s3commit.testing.server import S3TestServer
from s3commit.transfer.parts import FilePart

GIB = 1 << 30


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def read_part(path: str, size: int) -> bytearray:
    """A part read into a new buffer, as ``FilePart.load`` did before parts were mapped."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        filled = 0
        while filled < size:
            filled += f.readinto(view[filled:])
    return buffer


def per_gib(fn: Callable[[], None], nbytes: int) -> float:
    started = cpu()
    fn()
    return (cpu() - started) / (nbytes / GIB)


def digests(path: str, size: int, repeats: int = 8) -> dict[str, float]:
    import hashlib

    data = read_part(path, size)
    found = {"MD5": lambda: hashlib.md5(data, usedforsecurity=False).digest(),
             "SHA-256": lambda: hashlib.sha256(data).digest(), "CRC32 (zlib)": lambda: zlib.crc32(data),
             "read into a new bytearray": lambda: read_part(path, size),
             "mapped (and released)": lambda: FilePart(path).release()}
    try:
        from awscrt import checksums

        found.update({"CRC32C (awscrt)": lambda: checksums.crc32c(data),
                      "CRC64NVME (awscrt)": lambda: checksums.crc64nvme(data),
                      "CRC32 (awscrt)": lambda: checksums.crc32(data)})
    except ImportError:
        pass
    return {name: statistics.median(per_gib(lambda f=fn: [f() for _ in range(repeats)], repeats * size)
                                    for _ in range(3)) for name, fn in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--part-mib", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    size = args.part_mib << 20
    with tempfile.TemporaryDirectory() as tmp, S3TestServer() as server:
        path = os.path.join(tmp, "part.block")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        bucket = server.create_bucket("bench-part-cpu")
        base = {"endpoint_url": server.endpoint_url, "region": "us-east-1", "path_style": True,
                "access_key": "testing", "secret_key": "testing"}
        variants: dict[str, tuple[bool, dict]] = {
            "read, signed": (False, {"payload_signing": "signed"}),
            "mapped, signed": (True, {"payload_signing": "signed"}),
            "mapped, unsigned (the default on moto)": (True, {}),
            "mapped, unsigned, no ETag check (a validating store)": (True, {"verify_etag": False}),
            "... checksum SHA256": (True, {"verify_etag": False, "checksum_algorithm": "SHA256"}),
            "... checksum none": (True, {"verify_etag": False, "checksum_algorithm": "none"}),
        }
        try:
            import awscrt  # noqa: F401

            variants["... checksum CRC32C"] = (True, {"verify_etag": False, "checksum_algorithm": "CRC32C"})
            variants["... checksum CRC64NVME"] = (True, {"verify_etag": False, "checksum_algorithm": "CRC64NVME"})
        except ImportError:
            pass
        stores = {}
        for name, (_, options) in variants.items():
            store = S3Store(StoreOptions(**base, **options))
            known(store, bucket)  # what moto honours: the signing and ETag decisions as the sidecar makes them
            stores[name] = store
        results: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, (mapped, _) in variants.items():
                store = stores[name]
                upload_id = store.uploads.create_multipart_upload(bucket, "bench")

                def send(store: S3Store = store, mapped: bool = mapped, upload_id: str = upload_id) -> None:
                    for number in range(1, args.parts + 1):
                        part = FilePart(path)
                        try:
                            store.uploads.upload_part(bucket, "bench", upload_id, number,
                                                      part.load() if mapped else read_part(path, size))
                        finally:
                            part.release()

                results[name].append(per_gib(send, args.parts * size))
                store.uploads.abort_multipart_upload(bucket, "bench", upload_id)
        print(f"UploadRequests.upload_part, {args.parts} parts of {args.part_mib} MiB a round, {args.rounds} rounds "
                     f"(load average {os.getloadavg()[0]:.1f}):")
        for name, values in results.items():
            print(f"  {name:<52} median {statistics.median(values):.2f} CPU s/GiB "
                  f"(runs: {', '.join(f'{v:.2f}' for v in values)})")
        print(f"Alone, on one {args.part_mib} MiB buffer:")
        for name, value in digests(path, size).items():
            print(f"  {name:<52} {value:.3f} CPU s/GiB")


if __name__ == "__main__":
    main()
