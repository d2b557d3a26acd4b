"""The sidecar's CPU per GiB written against a bare boto3 client's, same bytes, same server, rounds interleaved.

``python benchmarks/write_cpu.py [--rounds 5] [--files 8] [--file-mib 128] [--part-mib 32] [--profile s3-standard]
[--no-crt] [--validate] [--spark | --against CHECKOUT]``

One test server (moto behind the simulator; ``s3-standard``: 80 MB/s per connection, as the ``datapath`` section)
and one sidecar (``python -m s3commit.bridge``) driven as the JVM's ``s3a://`` output streams drive it: two tasks
at a time each write their files part by part, every part written into a block file and handed over by name
(``fs.s3a.fast.upload.buffer=disk``, the default), ``fs.s3a.fast.upload.active.blocks`` 4, as PySpark's writes in
``datapath`` are. The reference writes the same files on the same server in a fresh Python process: boto3 with its
defaults (``upload_fileobj`` from a local file, two files at a time). Each round runs both, in turn (the first
alternates), and prints the CPU seconds per GiB of each (the sidecar's process from ``/proc``, the bare client's
own ``getrusage``) and their ratio; the end prints the medians and the median of the rounds' ratios.

``--no-crt``: every process of the run (the server, the sidecar, the bare client) as where ``awscrt`` is not
installed (a ``sitecustomize`` on their path makes ``import awscrt`` fail): botocore signs with its own signer and
computes CRC32 with ``zlib``, s3commit's ``auto`` checksum is CRC32. The script uses only names every version of
s3commit since 2026-11-26 has (the sidecar's client, the test server), so it measures an older checkout too:
``PYTHONPATH=<checkout> python benchmarks/write_cpu.py``; ``--against CHECKOUT`` runs a second sidecar from another
checkout in the same rounds (a bisection's A/B on one server). ``--validate``: the server refuses a part whose checksum
does not match, as S3 does (moto alone validates nothing, so the sidecar checks each part's ETag against its MD5).
``--spark``: the sidecar as PySpark's writes spend it (see :class:`SparkWriter`) instead of driven as the JVM would.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.sidecar_bench import proc_cpu

MIB = 1024 * 1024
SLOTS = 2
NO_CRT_SITE = "import sys\nsys.modules['awscrt'] = None  # as where awscrt is not installed (benchmarks/write_cpu.py)\n"


def bare_write(endpoint: str, bucket: str, prefix: str, files: int, path: str) -> dict[str, float]:
    """In a fresh process: ``upload_fileobj`` of ``path`` to ``files`` objects, boto3's defaults, two at a time."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")

    def one(index: int) -> None:
        with open(path, "rb") as f:
            client.upload_fileobj(f, bucket, f"{prefix}/part-{index:05d}")

    one(-1)  # imports, the connection pool, the transfer manager's threads: not the bytes
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu, started = usage.ru_utime + usage.ru_stime, time.perf_counter()
    with ThreadPoolExecutor(SLOTS) as pool:
        list(pool.map(one, range(files)))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": time.perf_counter() - started, "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu}


class Sidecar:
    """One sidecar, driven as a JVM's output streams drive it (block files handed over by name)."""

    def __init__(self, endpoint: str, part_mib: int, blocks_base: str, checkout: str | None = None) -> None:
        from s3commit.bridge.client import start_sidecar

        env = {"S3COMMIT_BUFFER_DIR": blocks_base}
        if checkout:  # another checkout's sidecar (same version: the hello compares it)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (checkout, os.environ.get("PYTHONPATH")) if p)
        self.process = start_sidecar(env=env)
        self.conf = {"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true", "fs.s3a.access.key": "testing",
                     "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
                     "fs.s3a.multipart.size": f"{part_mib}M", "fs.s3a.fast.upload.active.blocks": "4"}
        self._local = threading.local()
        self.conf_id = self._client().call("conf.register", conf=self.conf)[0]["conf_id"]

    def _client(self) -> Any:
        found = getattr(self._local, "client", None)
        if found is None:
            found = self._local.client = self.process.connect()
        return found

    def write(self, path: str, part: bytes, parts: int) -> None:
        client = self._client()
        opened = client.call("fs.open_write", conf_id=self.conf_id, path=path)[0]
        assert opened.get("ok"), opened
        for number in range(1, parts + 1):
            name = f"h{opened['handle']}-p{number}-bench.block"
            with open(os.path.join(opened["blocks_dir"], name), "wb") as f:
                f.write(part)
            header, _ = client.call("fs.close_write" if number == parts else "fs.write_block",
                                    handle=opened["handle"], block=name)
            assert header.get("ok"), header

    def stop(self) -> None:
        self.process.stop()


def sidecar_write(sidecar: Sidecar, bucket: str, prefix: str, files: int, part: bytes, parts: int) -> dict[str, float]:
    def one(index: int) -> None:
        sidecar.write(f"s3a://{bucket}/{prefix}/part-{index:05d}", part, parts)

    pid = sidecar.process.pid
    cpu, started = proc_cpu(pid), time.perf_counter()
    with ThreadPoolExecutor(SLOTS) as pool:
        list(pool.map(one, range(files)))
    return {"seconds": time.perf_counter() - started, "cpu_seconds": proc_cpu(pid) - cpu}


class SparkWriter:
    """PySpark (``local[2]``) writing the files through ``s3a://`` and the magic committer, as the ``datapath``
    section does: ``files`` text files of ``file_mib`` MiB in lines of 1 MiB, ``mode("overwrite")``. The sidecar's CPU
    is its whole job's: the tasks' parts, the task and job commits, the overwrite."""

    def __init__(self, endpoint: str, part_mib: int, files: int, file_mib: int) -> None:
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        from s3commit.spark import configure

        builder = (SparkSession.builder.master(f"local[{SLOTS}]").appName("s3commit-write-cpu")
                   .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", "2g"))
        self.spark = configure(builder, committer="magic", endpoint_url=endpoint, region="us-east-1",
                               access_key="testing", secret_key="testing", part_size=f"{part_mib}M",
                               rdd_writes=False, extra={"fs.s3a.fast.upload.active.blocks": 4}).getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        line = ("0123456789abcdef" * (MIB // 16))[:MIB - 1]  # + "\n": one MiB per line
        self.df = self.spark.range(0, files * file_mib, 1, files).select(F.lit(line).alias("value"))
        self.pid = 0

    def write(self, dest: str) -> dict[str, float]:
        if not self.pid:  # the sidecar starts with the first write
            self.df.limit(96).write.mode("overwrite").text(dest + "-warm-up")
            health = self.spark._jvm.s3commit.bridge.Sidecar.healthJson()
            self.pid = int(json.loads(health)["pid"])
        cpu, started = proc_cpu(self.pid), time.perf_counter()
        self.df.write.mode("overwrite").text(dest)
        return {"seconds": time.perf_counter() - started, "cpu_seconds": proc_cpu(self.pid) - cpu}

    def stop(self) -> None:
        self.spark.stop()


def in_child(endpoint: str, bucket: str, prefix: str, files: int, path: str) -> dict[str, float]:
    code = ("import json, sys; sys.path.insert(0, sys.argv[2]); import write_cpu; "
            "print(json.dumps(write_cpu.bare_write(*json.loads(sys.argv[1]))))")
    result = subprocess.run([sys.executable, "-c", code, json.dumps([endpoint, bucket, prefix, files, path]),
                             os.path.dirname(os.path.abspath(__file__))],
                            capture_output=True, text=True, check=False, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"the bare client failed:\n{result.stderr[-3000:]}")
    answer: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-mib", type=int, default=128)
    parser.add_argument("--part-mib", type=int, default=32)
    parser.add_argument("--profile", default="s3-standard")
    parser.add_argument("--spark", action="store_true",
                        help="the sidecar's CPU as PySpark's writes through the magic committer spend it (the whole "
                             "job's, one destination overwritten each round), not driven as the JVM would")
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="also a sidecar from another checkout (e.g. a worktree of an older commit), in the same "
                             "rounds: 'against' beside 'sidecar' and 'bare'")
    parser.add_argument("--validate", action="store_true",
                        help="the server refuses a part whose checksum does not match (BadDigest), as S3 does: the "
                             "sidecar then skips the ETag's MD5 and signs no payload (moto alone validates nothing)")
    parser.add_argument("--no-crt", action="store_true", help="every process as where awscrt is not installed")
    args = parser.parse_args(argv)
    if args.spark and args.against:
        parser.error("--against drives sidecars as the JVM would: not with --spark")
    scratch = tempfile.mkdtemp(prefix="s3commit-write-cpu-")
    if args.no_crt:
        with open(os.path.join(scratch, "sitecustomize.py"), "w") as f:
            f.write(NO_CRT_SITE)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (scratch, os.environ.get("PYTHONPATH")) if p)
        sys.modules["awscrt"] = None  # type: ignore[assignment]
    from s3commit.testing.server import S3TestServer

    gib = args.files * args.file_mib / 1024
    parts = args.file_mib // args.part_mib
    part = os.urandom(args.part_mib * MIB)
    local = os.path.join(scratch, "data")
    with open(local, "wb") as f:
        for _ in range(parts):
            f.write(part)
    cpu: dict[str, list[float]] = {"sidecar": [], "bare": [], **({"against": []} if args.against else {})}
    ratios: list[float] = []
    with S3TestServer(profile=args.profile) as server:
        if args.validate:
            server.configure(validate_checksums=True)  # probed again at create_bucket: the bucket is known to validate
        bucket = server.create_bucket("s3commit-write-cpu")
        if args.spark:
            spark = SparkWriter(server.endpoint_url, args.part_mib, args.files, args.file_mib)
        else:
            sidecar = Sidecar(server.endpoint_url, args.part_mib, scratch)
            sidecar.write(f"s3a://{bucket}/warm-up/sidecar", part, 2)  # the bucket's probe, imports, connections
            if args.against:
                against = Sidecar(server.endpoint_url, args.part_mib, scratch, args.against)
                against.write(f"s3a://{bucket}/warm-up/against", part, 2)
        try:
            for number in range(1, args.rounds + 1):
                measured: dict[str, dict[str, float]] = {}
                names = tuple(cpu)
                shift = (number - 1) % len(names)
                order = names[shift:] + names[:shift]  # each round starts one place later
                for name in order:
                    prefix = f"r{number}/{name}"
                    if name == "bare":
                        measured[name] = in_child(server.endpoint_url, bucket, prefix, args.files, local)
                    elif args.spark:
                        measured[name] = spark.write(f"s3a://{bucket}/spark")
                    else:
                        measured[name] = sidecar_write(sidecar if name == "sidecar" else against, bucket, prefix,
                                                       args.files, part, parts)
                for name in cpu:
                    cpu[name].append(measured[name]["cpu_seconds"] / gib)
                ratios.append(cpu["sidecar"][-1] / cpu["bare"][-1])
                against_text = (f"; against {cpu['against'][-1]:.3f} ({cpu['against'][-1] / cpu['bare'][-1]:.3f}x)"
                                if args.against else "")
                print(f"round {number}: sidecar {cpu['sidecar'][-1]:.3f} CPU s/GiB "
                      f"({measured['sidecar']['seconds']:.2f} s), bare boto3 {cpu['bare'][-1]:.3f} "
                      f"({measured['bare']['seconds']:.2f} s): {ratios[-1]:.3f}x{against_text}", flush=True)
        finally:
            (spark if args.spark else sidecar).stop()
            if args.against:
                against.stop()
            shutil.rmtree(scratch, ignore_errors=True)
    summary = {"gib": gib, "spark": args.spark, "validate": args.validate, "no_crt": args.no_crt,
               "profile": args.profile, "cpu_per_gib": cpu,
               "median_sidecar": statistics.median(cpu["sidecar"]), "median_bare": statistics.median(cpu["bare"]),
               "ratio_of_medians": statistics.median(cpu["sidecar"]) / statistics.median(cpu["bare"]),
               "median_ratio": statistics.median(ratios),
               **({"against": args.against, "median_against": statistics.median(cpu["against"]),
                   "against_ratio_of_medians": statistics.median(cpu["against"]) / statistics.median(cpu["bare"])}
                  if args.against else {}),
               "load_average": list(os.getloadavg())}
    print(f"medians: sidecar {summary['median_sidecar']:.3f}, bare boto3 {summary['median_bare']:.3f} CPU s/GiB; "
          f"ratio of medians {summary['ratio_of_medians']:.3f}x, median ratio {summary['median_ratio']:.3f}x "
          f"({'awscrt hidden' if args.no_crt else 'awscrt as installed'})")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
