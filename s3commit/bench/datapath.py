"""The data path benchmark: PySpark writing and reading large files on ``s3a://`` against a bare boto3 client
moving the same bytes, on the same simulated S3, in one run.

Spark (``local[2]``) writes ``files`` text files of ``file_mib`` MiB (lines of 1 MiB: the data costs Spark
almost nothing to produce, so what is measured is the road to S3) through ``magic``, ``directory`` and
Spark's FileOutputCommitter v1, then reads each result back (``spark.read.text(...).count()``: every line is
read). The bare client does what a careful boto3 program would with the same resources: two files at a time
(Spark's two task slots), each in parts of the same size with ``fs.s3a.fast.upload.active.blocks`` parts in
flight, written from memory and read back with ranged GETs into memory. Both use botocore with the same
settings (``S3Store``'s client). The latency profile limits every connection's bandwidth (80 MB/s on
``s3-standard``), so a serial upload or a synchronous read costs what it costs on S3.

Reported: seconds, MiB/s and the ratio to the bare client for each; the sidecar's CPU seconds per GiB next to
the bare client's own; the sidecar's peak memory (VmHWM); the parts and GETs in flight at the server; and, for
context, Spark doing the same job on local disk (its own cost, which no S3 client can remove).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from s3commit.config import MIB


def _client(endpoint: str) -> Any:
    from s3commit.config import StoreOptions
    from s3commit.store import S3Store

    return S3Store(StoreOptions(endpoint_url=endpoint, region="us-east-1", path_style=True, access_key="testing",
                                secret_key="testing")).client


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare_write(endpoint: str, bucket: str, prefix: str, files: int, size: int, part: int, in_flight: int,
               slots: int) -> dict[str, float]:
    """In a child process: upload ``files`` objects of ``size`` bytes as multipart uploads."""
    client = _client(endpoint)
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

    cpu, started = _cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        list(pool.map(one, range(files)))
    return {"seconds": time.perf_counter() - started, "cpu_seconds": _cpu_seconds() - cpu}


def bare_read(endpoint: str, bucket: str, prefix: str, files: int, size: int, part: int, in_flight: int,
              slots: int) -> dict[str, float]:
    """In a child process: read the objects back with ranged GETs of ``part`` bytes into memory."""
    client = _client(endpoint)
    parts_pool = ThreadPoolExecutor(slots * in_flight)

    def one(index: int) -> int:
        key = f"{prefix}/part-{index:05d}"

        def get(n: int) -> int:
            end = min(size, (n + 1) * part) - 1
            return len(client.get_object(Bucket=bucket, Key=key, Range=f"bytes={n * part}-{end}")["Body"].read())

        return sum(parts_pool.map(get, range(-(-size // part))))

    cpu, started = _cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        total = sum(pool.map(one, range(files)))
    assert total == files * size, (total, files * size)
    return {"seconds": time.perf_counter() - started, "cpu_seconds": _cpu_seconds() - cpu}


def _in_child(fn: Any, *args: Any) -> dict[str, float]:
    """Run ``fn(*args)`` in a fresh Python process, so that its CPU time is its own."""
    code = ("import json, sys; from s3commit.bench import datapath; "
            f"print(json.dumps(datapath.{fn.__name__}(*json.loads(sys.argv[1]))))")
    result = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                            check=False, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"{fn.__name__} failed:\n{result.stderr[-3000:]}")
    answer: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_peak_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def datapath_runs(server: Any, bucket: str, *, files: int, file_mib: int, part_mib: int,
                  in_flight: int = 4, labels: tuple[str, ...] = ("magic", "directory", "FileOutputCommitter-v1"),
                  local_dir: str | None = None) -> dict[str, Any]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from s3commit.measured import job_seconds, use_protocol
    from s3commit.spark import configure

    # A bucket of its own: a JVM keeps one s3a FileSystem per bucket (Hadoop's FileSystem cache), configured by
    # the first session that used it; an earlier section's session would hand this one its part size.
    bucket = server.create_bucket(f"{bucket}-datapath")
    size, part, slots = file_mib * MIB, part_mib * MIB, 2
    gib = files * size / (1024 * MIB)
    results: dict[str, Any] = {"files": files, "file_mib": file_mib, "part_mib": part_mib, "in_flight": in_flight,
                               "slots": slots, "gib": gib}
    endpoint = server.endpoint_url
    print(f"  datapath: bare boto3, {files} x {file_mib} MiB, parts of {part_mib} MiB, {in_flight} in flight",
          flush=True)
    server.reset_stats()
    bare_w = _in_child(bare_write, endpoint, bucket, "bare", files, size, part, in_flight, slots)
    bare_w["max_parts_in_flight"] = server.stats().max_in_flight.get("UploadPart", 0)
    server.reset_stats()
    bare_r = _in_child(bare_read, endpoint, bucket, "bare", files, size, part, in_flight, slots)
    bare_r["max_gets_in_flight"] = server.stats().max_in_flight.get("GetObject", 0)
    results["bare"] = {"write": bare_w, "read": bare_r}

    builder = (SparkSession.builder.master(f"local[{slots}]").appName("s3commit-bench-datapath")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g"))
    spark = configure(builder, committer="magic", endpoint_url=endpoint, region="us-east-1", access_key="testing",
                      secret_key="testing", part_size=f"{part_mib}M", rdd_writes=False,
                      extra={"fs.s3a.fast.upload.active.blocks": in_flight}).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark._jvm
    line = ("0123456789abcdef" * (MIB // 16))[:MIB - 1]  # + "\n": one MiB per line
    df = spark.range(0, files * file_mib, 1, files).select(F.lit(line).alias("value"))
    try:
        # Warm up every path (class loading, JIT, the sidecar's start) on a write and a read of a few parts.
        for label in labels:
            use_protocol(spark, label)
            df.limit(3 * part_mib).write.mode("overwrite").text(f"s3a://{bucket}/warm-up/{label.lower()}")
            spark.read.text(f"s3a://{bucket}/warm-up/{label.lower()}").count()
        pid = int(json.loads(jvm.s3commit.bridge.Sidecar.healthJson())["pid"])
        results["sidecar_pid"] = pid
        for label in labels:
            use_protocol(spark, label)
            dest = f"s3a://{bucket}/spark-{label.lower()}"
            print(f"  datapath: spark write through {label}", flush=True)
            server.reset_stats()
            description = f"s3commit-bench-datapath-{label}"
            spark.sparkContext.setJobDescription(description)
            cpu, started = _proc_cpu(pid), time.perf_counter()
            df.write.mode("overwrite").text(dest)
            total = time.perf_counter() - started
            spark.sparkContext.setJobDescription(None)
            tasks = job_seconds(spark, description)
            write: dict[str, Any] = {"seconds": total, "sidecar_cpu_seconds": _proc_cpu(pid) - cpu,
                                     "task_phase_seconds": tasks, "job_commit_seconds": max(0.0, total - tasks)}
            stats = server.stats()
            write.update(max_parts_in_flight=stats.max_in_flight.get("UploadPart", 0), copy_bytes=stats.copy_bytes,
                         requests=dict(stats.requests))
            print(f"  datapath: spark read of {label}'s output", flush=True)
            server.reset_stats()
            cpu, started = _proc_cpu(pid), time.perf_counter()
            lines = spark.read.text(dest).count()
            read = {"seconds": time.perf_counter() - started, "sidecar_cpu_seconds": _proc_cpu(pid) - cpu,
                    "lines": lines, "max_gets_in_flight": server.stats().max_in_flight.get("GetObject", 0),
                    "gets": server.stats().requests.get("GetObject", 0)}
            assert lines == files * file_mib, (lines, files * file_mib)
            results[label] = {"write": write, "read": read}
        results["sidecar_peak_bytes"] = _proc_peak_bytes(pid)
        if local_dir:
            print("  datapath: spark on local disk (its own cost)", flush=True)
            started = time.perf_counter()
            df.write.mode("overwrite").text(f"file://{local_dir}/local")
            local_write = time.perf_counter() - started
            started = time.perf_counter()
            spark.read.text(f"file://{local_dir}/local").count()
            results["local_disk"] = {"write_seconds": local_write, "read_seconds": time.perf_counter() - started}
    finally:
        spark.stop()
    results["ratios"] = ratios(results, labels)
    return results


def ratios(results: dict[str, Any], labels: tuple[str, ...]) -> dict[str, float]:
    bare = results["bare"]
    out: dict[str, float] = {}
    for label in labels:
        key = label.lower().replace("fileoutputcommitter-", "foc_")
        out[f"write_{key}_over_bare"] = results[label]["write"]["seconds"] / bare["write"]["seconds"]
        out[f"read_{key}_over_bare"] = results[label]["read"]["seconds"] / bare["read"]["seconds"]
        out[f"sidecar_cpu_per_gib_write_{key}"] = results[label]["write"]["sidecar_cpu_seconds"] / results["gib"]
    gib = results["gib"]
    out["bare_cpu_per_gib_write"] = bare["write"]["cpu_seconds"] / gib
    out["bare_cpu_per_gib_read"] = bare["read"]["cpu_seconds"] / gib
    if "magic" in labels:
        out["sidecar_cpu_per_gib_read"] = results["magic"]["read"]["sidecar_cpu_seconds"] / gib
        out["sidecar_over_bare_cpu_write"] = (results["magic"]["write"]["sidecar_cpu_seconds"]
                                              / bare["write"]["cpu_seconds"])
        out["sidecar_over_bare_cpu_read"] = (results["magic"]["read"]["sidecar_cpu_seconds"]
                                             / bare["read"]["cpu_seconds"])
    if "magic" in labels and "directory" in labels:
        out["magic_write_over_directory_write"] = (results["magic"]["write"]["seconds"]
                                                   / results["directory"]["write"]["seconds"])
        out["magic_task_phase_over_directory_task_phase"] = (results["magic"]["write"]["task_phase_seconds"]
                                                             / results["directory"]["write"]["task_phase_seconds"])
    return out
