"""The ``sidecar`` section: the sidecar's CPU and GIL per GiB, with no JVM, on moto and on SeaweedFS.

A sidecar process (``python -m s3commit.bridge``, as the jar starts it) is driven the way the JVM drives it
(:mod:`s3commit.bridge.client`): ``tasks`` task threads each write ``files`` files of ``file_mib`` MiB, every part
written by the task into a block file and handed over by name (``fs.s3a.fast.upload.buffer=disk``), then read
them back with ``fs.read`` requests of 8 MiB, 4 in flight per task (S3A's prefetch defaults). Beside it, on the
same server, the clients of :mod:`benchmarks.clients` move the same bytes: boto3 with its defaults (the
reference) and awscrt's S3 client. Rounds alternate the sidecar and the bare client, each measured several times.

Reported per server: CPU seconds per GiB (median of the rounds) written and read by each, their ratio; the GIL-held
time per GiB in the sidecar (:mod:`benchmarks.gil`) and the ceiling it implies; and the sidecar's throughput
and CPU with 1, 2 and 4 concurrent tasks. moto runs with no latency profile and SeaweedFS has none: the clients'
CPU is what is measured; on this 2-core machine their throughput is the servers' and the machine's, not S3's.
Every part carries a checksum (the bare client's default CRC32; the sidecar's ``auto``: CRC32C where awscrt is
installed, else CRC32); the sidecar checks part ETags against their MD5 on moto, which validates no checksum, and not
on SeaweedFS, which does (its probe says so: ``s3commit doctor``). ``benchmarks/write_cpu.py`` measures the write
alone, in more rounds, with awscrt hidden or not.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import clients
from benchmarks.gil import GilSampler, py_spy
from s3commit.config.options import MIB

READ_BLOCK = 8 * MIB
READS_IN_FLIGHT = 4


def stat_cpu(path: str) -> float:
    """CPU seconds (user + system) so far in a ``/proc`` stat file: a process's or one of its threads'."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    return stat_cpu(f"/proc/{pid}/stat")


class Driver:
    """One sidecar, driven as a JVM's tasks drive it."""

    def __init__(self, endpoint: str, part_mib: int) -> None:
        from s3commit.bridge.client import start_sidecar

        self.base = tempfile.mkdtemp(prefix="s3commit-bench-blocks-")
        self.process = start_sidecar(env={"S3COMMIT_BUFFER_DIR": self.base})
        self.conf = {"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true", "fs.s3a.access.key": "testing",
                     "fs.s3a.secret.key": "testing", "fs.s3a.endpoint.region": "us-east-1",
                     "fs.s3a.multipart.size": f"{part_mib}M"}
        self.part = os.urandom(part_mib * MIB)
        self._local = threading.local()
        self.conf_id = self._connection().call("conf.register", conf=self.conf)[0]["conf_id"]

    @property
    def pid(self) -> int:
        return self.process.pid

    def _connection(self) -> Any:
        """This thread's connection (the JVM keeps a pool of them)."""
        found = getattr(self._local, "client", None)
        if found is None:
            found = self._local.client = self.process.connect()
            header, _ = found.call("conf.register", conf=self.conf)
            assert header.get("ok"), header
        return found

    def write(self, path: str, parts: int) -> None:
        client = self._connection()
        opened = client.call("fs.open_write", conf_id=self.conf_id, path=path)[0]
        assert opened.get("ok"), opened
        for number in range(1, parts + 1):
            name = f"h{opened['handle']}-p{number}-bench.block"
            with open(os.path.join(opened["blocks_dir"], name), "wb") as f:
                f.write(self.part)
            op = "fs.close_write" if number == parts else "fs.write_block"
            header, _ = client.call(op, handle=opened["handle"], block=name)
            assert header.get("ok"), header

    def fetch(self, path: str, offset: int, length: int) -> int:
        channel = self._connection().channel
        channel.write_message({"op": "fs.read", "conf_id": self.conf_id, "path": path, "offset": offset,
                               "length": length})
        header, body = channel.read_message()
        assert header.get("ok") and body is not None, header
        got = body.readinto(bytearray(length))
        body.drain()
        return got

    def stop(self) -> None:
        self.process.stop()


def sidecar_phase(driver: Driver, bucket: str, prefix: str, *, tasks: int, files: int, file_mib: int,
                  part_mib: int, phase: str) -> dict[str, float]:
    """One write or read phase of ``tasks`` concurrent tasks; seconds and the sidecar's CPU seconds."""
    size, parts = file_mib * MIB, file_mib // part_mib
    fetchers = ThreadPoolExecutor(tasks * READS_IN_FLIGHT)

    def task(index: int) -> None:
        for number in range(files):
            path = f"s3a://{bucket}/{prefix}/t{index}/f{number}"
            if phase == "write":
                driver.write(path, parts)
            else:
                got = sum(fetchers.map(lambda at, p=path: driver.fetch(p, at, min(READ_BLOCK, size - at)),
                                       range(0, size, READ_BLOCK)))
                assert got == size, (got, size)

    cpu, started = proc_cpu(driver.pid), time.perf_counter()
    with ThreadPoolExecutor(tasks) as pool:
        list(pool.map(task, range(tasks)))
    seconds, cpu = time.perf_counter() - started, proc_cpu(driver.pid) - cpu
    fetchers.shutdown()
    return {"seconds": seconds, "cpu_seconds": cpu}


def server_runs(server: Any, label: str, *, rounds: int, tasks: int, files: int, file_mib: int, part_mib: int,
                concurrency: tuple[int, ...]) -> dict[str, Any]:
    """Every measurement of this section on one server."""
    bucket = server.create_bucket("s3commit-bench-sidecar")
    endpoint, size = server.endpoint_url, file_mib * MIB
    gib = tasks * files * file_mib / 1024
    local = clients.write_file(os.path.join(tempfile.mkdtemp(prefix="s3commit-bench-"), "data"), size)
    driver = Driver(endpoint, part_mib)
    runs: dict[str, dict[str, list[float]]] = {name: {"write": [], "read": []}
                                               for name in ("sidecar", "boto3", "boto3-no-crt", "crt")}
    seconds: dict[str, dict[str, list[float]]] = {name: {"write": [], "read": []} for name in runs}
    try:
        driver.write(f"s3a://{bucket}/warm-up", 2)  # the probe of the bucket, connections, imports
        for number in range(rounds):
            print(f"  sidecar: {label}, round {number + 1} of {rounds}", flush=True)
            for phase in ("write", "read"):
                measured = sidecar_phase(driver, bucket, f"r{number}", tasks=tasks, files=files, file_mib=file_mib,
                                         part_mib=part_mib, phase=phase)
                runs["sidecar"][phase].append(measured["cpu_seconds"] / gib)
                seconds["sidecar"][phase].append(measured["seconds"])
            for name, without_crt in (("boto3", False), ("boto3-no-crt", True)):
                if without_crt and not clients.crt_available():
                    continue  # boto3 is without it already
                bare_w = clients.in_child("default_write", endpoint, bucket, f"{name}{number}", tasks * files, local,
                                          tasks, without_crt=without_crt)
                bare_r = clients.in_child("default_read", endpoint, bucket, f"{name}{number}", tasks * files, size,
                                          tasks, without_crt=without_crt)
                for phase, measured in (("write", bare_w), ("read", bare_r)):
                    runs[name][phase].append(measured["cpu_seconds"] / gib)
                    seconds[name][phase].append(measured["seconds"])
            if clients.crt_available():
                crt_w = clients.in_child("crt_write", endpoint, bucket, f"crt{number}", tasks * files, local, tasks)
                crt_r = clients.in_child("crt_read", endpoint, bucket, f"crt{number}", tasks * files, size, tasks)
                for phase, measured in (("write", crt_w), ("read", crt_r)):
                    runs["crt"][phase].append(measured["cpu_seconds"] / gib)
                    seconds["crt"][phase].append(measured["seconds"])
        gil: dict[str, Any] = {}
        if py_spy() is not None:
            for phase in ("write", "read"):
                print(f"  sidecar: {label}, GIL-held time of a {phase} (py-spy --gil)", flush=True)
                with GilSampler(driver.pid) as sampler:
                    sidecar_phase(driver, bucket, "gil", tasks=tasks, files=files, file_mib=file_mib,
                                  part_mib=part_mib, phase=phase)
                gil[phase] = sampler.result(gib)
        scaling = []
        for count in concurrency:
            print(f"  sidecar: {label}, {count} concurrent task(s)", flush=True)
            row: dict[str, Any] = {"tasks": count}
            for phase in ("write", "read"):
                measured = sidecar_phase(driver, bucket, f"c{count}", tasks=count, files=files, file_mib=file_mib,
                                         part_mib=part_mib, phase=phase)
                moved = count * files * file_mib / 1024
                row[phase] = {"mib_per_second": moved * 1024 / measured["seconds"],
                              "cpu_per_gib": measured["cpu_seconds"] / moved}
            scaling.append(row)
    finally:
        driver.stop()
        os.unlink(local)
    medians = {name: {phase: statistics.median(values) for phase, values in by_phase.items() if values}
               for name, by_phase in runs.items()}
    ratios = {f"sidecar_over_{name.replace('-', '_')}_cpu_{phase}": medians["sidecar"][phase] / medians[name][phase]
              for name in ("boto3", "boto3-no-crt", "crt") if medians.get(name) for phase in ("write", "read")}
    return {"gib": gib, "cpu_per_gib": runs, "seconds": seconds, "median_cpu_per_gib": medians, "ratios": ratios,
            "gil": gil, "concurrency": scaling}


def sidecar_section(servers: dict[str, Any], *, quick: bool) -> dict[str, Any]:
    """The section on each server given (name -> a started server)."""
    sizes = ({"rounds": 1, "tasks": 2, "files": 1, "file_mib": 10, "part_mib": 5, "concurrency": (1, 2)} if quick
             else {"rounds": 3, "tasks": 2, "files": 2, "file_mib": 128, "part_mib": 32, "concurrency": (1, 2, 4)})
    results: dict[str, Any] = {"sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
                               "load_average_before": list(os.getloadavg())}
    for name, server in servers.items():
        results[name] = server_runs(server, name, **sizes)  # type: ignore[arg-type]
    results["load_average_after"] = list(os.getloadavg())
    return results
