"""The clients the data path is measured against, each run in a fresh Python process so that its CPU is its own.

- **bare boto3, defaults** (the reference): ``boto3.client("s3")`` as a user makes it, writing each file with
  ``upload_fileobj`` from a local file (boto3's default transfer settings: 8 MiB parts, 10 threads a file, a CRC32
  with each part as botocore computes it by default) and reading each object with one ``get_object``. Where
  awscrt is installed botocore signs and computes CRC32 through it; ``without_crt`` measures boto3 without it.
- **bare boto3, tuned**: the same client doing what the ``s3a://`` path does with the same resources: parts of the
  same size with as many in flight per file, from memory; ranged GETs of a part each into memory.
- **awscrt's S3 client**, where installed: AWS's native client (C: HTTP, signing, CRC32), the same files written
  from a local file with a CRC32 header and read whole into memory; its retries are off, as botocore's.

Two files at a time (Spark's two task slots). Each returns ``{"seconds", "cpu_seconds"}``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _default_client(endpoint: str) -> Any:
    if os.environ.get("S3COMMIT_BENCH_NO_CRT"):  # boto3 as installed without awscrt: botocore's own signer, zlib
        sys.modules["awscrt"] = None  # type: ignore[assignment]
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS)


def _tuned_client(endpoint: str) -> Any:
    from s3commit.config.options import StoreOptions
    from s3commit.store.s3store import S3Store

    return S3Store(StoreOptions(endpoint_url=endpoint, region="us-east-1", path_style=True, access_key="testing",
                                secret_key="testing")).requests.client


def _timed_pool(slots: int, files: int, one: Any) -> dict[str, float]:
    cpu, started = cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        list(pool.map(one, range(files)))
    return {"seconds": time.perf_counter() - started, "cpu_seconds": cpu_seconds() - cpu}


def default_write(endpoint: str, bucket: str, prefix: str, files: int, path: str, slots: int) -> dict[str, float]:
    """``upload_fileobj`` of the local file ``path`` to ``files`` objects, with boto3's defaults."""
    client = _default_client(endpoint)

    def one(index: int) -> None:
        with open(path, "rb") as f:
            client.upload_fileobj(f, bucket, f"{prefix}/part-{index:05d}")

    return _timed_pool(slots, files, one)


def default_read(endpoint: str, bucket: str, prefix: str, files: int, size: int, slots: int) -> dict[str, float]:
    """One ``get_object`` of each object, read whole into memory, with boto3's defaults."""
    client = _default_client(endpoint)

    def one(index: int) -> None:
        got = len(client.get_object(Bucket=bucket, Key=f"{prefix}/part-{index:05d}")["Body"].read())
        assert got == size, (got, size)

    return _timed_pool(slots, files, one)


def tuned_write(endpoint: str, bucket: str, prefix: str, files: int, size: int, part: int, in_flight: int,
                slots: int) -> dict[str, float]:
    """Multipart uploads from memory, ``in_flight`` parts of ``part`` bytes at a time per file."""
    client = _tuned_client(endpoint)
    data = os.urandom(size)
    parts_pool = ThreadPoolExecutor(slots * in_flight)

    def one(index: int) -> None:
        key = f"{prefix}/part-{index:05d}"
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        view = memoryview(data)

        def send(n: int) -> str:
            body = bytes(view[n * part:(n + 1) * part])  # botocore takes bytes
            return str(client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=n + 1,
                                          Body=body)["ETag"])

        etags = list(parts_pool.map(send, range(-(-size // part))))
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={
            "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})

    return _timed_pool(slots, files, one)


def tuned_read(endpoint: str, bucket: str, prefix: str, files: int, size: int, part: int, in_flight: int,
               slots: int) -> dict[str, float]:
    """Ranged GETs of ``part`` bytes into memory, ``in_flight`` at a time per file."""
    client = _tuned_client(endpoint)
    parts_pool = ThreadPoolExecutor(slots * in_flight)

    def one(index: int) -> None:
        key = f"{prefix}/part-{index:05d}"

        def get(n: int) -> int:
            end = min(size, (n + 1) * part) - 1
            return len(client.get_object(Bucket=bucket, Key=key, Range=f"bytes={n * part}-{end}")["Body"].read())

        assert sum(parts_pool.map(get, range(-(-size // part)))) == size

    return _timed_pool(slots, files, one)


def _crt_client(endpoint: str) -> tuple[Any, str]:
    from awscrt import auth, io, s3

    loop = io.EventLoopGroup()
    bootstrap = io.ClientBootstrap(loop, io.DefaultHostResolver(loop))
    https = endpoint.startswith("https://")
    client = s3.S3Client(bootstrap=bootstrap, region="us-east-1",
                         credential_provider=auth.AwsCredentialsProvider.new_static("testing", "testing"),
                         tls_mode=s3.S3RequestTlsMode.ENABLED if https else s3.S3RequestTlsMode.DISABLED,
                         retry_config=s3.S3RetryConfig(retry_mode=s3.S3RetryMode.NONE))
    return client, endpoint.split("://", 1)[1].rstrip("/")


def crt_write(endpoint: str, bucket: str, prefix: str, files: int, path: str, slots: int) -> dict[str, float]:
    """awscrt's PUT_OBJECT from the local file ``path`` (its own parts and parallelism), a CRC32 with each part."""
    from awscrt import http, s3

    client, host = _crt_client(endpoint)
    size = os.path.getsize(path)

    def one(index: int) -> None:
        headers = http.HttpHeaders([("Host", host), ("Content-Length", str(size)),
                                    ("Content-Type", "application/octet-stream")])
        request = http.HttpRequest("PUT", f"/{bucket}/{prefix}/part-{index:05d}", headers)
        checksum = s3.S3ChecksumConfig(algorithm=s3.S3ChecksumAlgorithm.CRC32, location=s3.S3ChecksumLocation.HEADER)
        client.make_request(type=s3.S3RequestType.PUT_OBJECT, request=request, send_filepath=path,
                            checksum_config=checksum).finished_future.result()

    return _timed_pool(slots, files, one)


def crt_read(endpoint: str, bucket: str, prefix: str, files: int, size: int, slots: int) -> dict[str, float]:
    """awscrt's GET_OBJECT of each object (its own ranged GETs in parallel), every byte handed to Python."""
    from awscrt import http, s3

    client, host = _crt_client(endpoint)

    def one(index: int) -> None:
        got = [0]

        def on_body(chunk: bytes, offset: int, **_: Any) -> None:
            got[0] += len(chunk)

        request = http.HttpRequest("GET", f"/{bucket}/{prefix}/part-{index:05d}", http.HttpHeaders([("Host", host)]))
        client.make_request(type=s3.S3RequestType.GET_OBJECT, request=request,
                            on_body=on_body).finished_future.result()
        assert got[0] == size, (got[0], size)

    return _timed_pool(slots, files, one)


def crt_available() -> bool:
    try:
        import awscrt.s3  # noqa: F401
    except ImportError:
        return False
    return True


def in_child(name: str, *args: Any, without_crt: bool = False) -> dict[str, float]:
    """Run this module's function ``name`` with ``args`` in a fresh Python process; its result. ``without_crt``:
    that process cannot import awscrt (boto3 as a user without it has it)."""
    code = ("import json, sys; from benchmarks import clients; "
            f"print(json.dumps(clients.{name}(*json.loads(sys.argv[1]))))")
    # The checkout's root on the child's path: ``benchmarks`` is a package of the clone, not of the wheel.
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    if without_crt:
        env["S3COMMIT_BENCH_NO_CRT"] = "1"
    result = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                            check=False, timeout=3600, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{result.stderr[-3000:]}")
    answer: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def write_file(path: str, size: int) -> str:
    """A local file of ``size`` random bytes (what the clients that upload from a file read)."""
    with open(path, "wb") as f:
        for start in range(0, size, 1 << 20):
            f.write(os.urandom(min(1 << 20, size - start)))
    return path
