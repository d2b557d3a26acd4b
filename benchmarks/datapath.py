"""The data path benchmark: PySpark writing and reading large files on ``s3a://`` against bare clients moving the
same bytes, on the same simulated S3, in one run.

Spark (``local[2]``) writes ``files`` text files of ``file_mib`` MiB (lines of 1 MiB: the data costs Spark
almost nothing to produce, so what is measured is the road to S3) through ``magic``, ``directory`` and
Spark's FileOutputCommitter v1, then reads each result back (``spark.read.text(...).count()``: every line is
read), and does the same on local disk (``file://``). The reference is boto3 with its defaults
(``upload_fileobj`` from a local file, one ``get_object`` per object, two files at a time:
:mod:`benchmarks.clients`); beside it, the same client tuned as the ``s3a://`` path is (parts of the same
size, as many in flight), and awscrt's S3 client, the native reference, where installed. The latency profile
limits every connection's bandwidth (80 MB/s on ``s3-standard``), so a serial upload or a synchronous read costs
what it costs on S3.

Reported: seconds, MiB/s and the ratio to the reference for each; CPU seconds per GiB of the sidecar and of each
bare client; the JVM's own CPU per GiB beyond what the same job costs it on ``file://`` (the FileSystem's
overhead); the sidecar's GIL-held time per GiB during a magic write and read (py-spy, where installed:
:mod:`benchmarks.gil`); the sidecar's peak memory (VmHWM); the parts and GETs in flight at the server.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from benchmarks import clients
from benchmarks.gil import GilSampler, py_spy
from benchmarks.runs import paired_median
from benchmarks.sidecar_bench import proc_cpu, stat_cpu
from s3commit.config.options import MIB


def compiler_cpu(pid: int) -> float:
    """CPU seconds so far of the JVM ``pid``'s JIT compiler threads (``C1 CompilerThread0``, ...)."""
    total = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if "CompilerThre" in f.read():
                    total += stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # the thread ended meanwhile
            continue
    return total


def jvm_cpu(pid: int) -> float:
    """CPU seconds so far of the JVM ``pid`` apart from its JIT compilers: compiling is a cost of the code's first
    runs, not of the bytes (one job's compiling moved between 0.2 and 1.7 s here, more than a GiB's transfer costs
    the FileSystem), so every JVM figure of this section leaves it out."""
    return proc_cpu(pid) - compiler_cpu(pid)


def _proc_peak_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _bare_runs(server: Any, bucket: str, *, files: int, size: int, part: int, in_flight: int, slots: int,
               local_file: str) -> dict[str, Any]:
    """The bare clients' writes and reads, with the parts and GETs in flight at the server."""
    endpoint, runs = server.endpoint_url, {}
    plans: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {
        "bare": (("default_write", endpoint, bucket, "bare", files, local_file, slots),
                 ("default_read", endpoint, bucket, "bare", files, size, slots)),
        "bare-tuned": (("tuned_write", endpoint, bucket, "tuned", files, size, part, in_flight, slots),
                       ("tuned_read", endpoint, bucket, "tuned", files, size, part, in_flight, slots))}
    if clients.crt_available():
        plans["crt"] = (("crt_write", endpoint, bucket, "crt", files, local_file, slots),
                        ("crt_read", endpoint, bucket, "crt", files, size, slots))
    for name, (write, read) in plans.items():
        print(f"  datapath: {name} ({write[0]}, {read[0]})", flush=True)
        server.reset_stats()
        server_cpu = proc_cpu(server.pid)
        measured_w = clients.in_child(str(write[0]), *write[1:])
        measured_w["server_cpu_seconds"] = proc_cpu(server.pid) - server_cpu
        measured_w["max_parts_in_flight"] = server.stats().max_in_flight.get("UploadPart", 0)
        server.reset_stats()
        server_cpu = proc_cpu(server.pid)
        measured_r = clients.in_child(str(read[0]), *read[1:])
        measured_r["server_cpu_seconds"] = proc_cpu(server.pid) - server_cpu
        measured_r["max_gets_in_flight"] = server.stats().max_in_flight.get("GetObject", 0)
        runs[name] = {"write": measured_w, "read": measured_r}
    return runs


def median_of_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures from several rounds of it: the median of every number (each on its own), the rest from the
    first round; ``round_seconds`` lists each round's time, so the spread is in the report."""
    out = dict(rounds[0])
    for key, value in rounds[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in rounds)
    if "seconds" in out:
        out["round_seconds"] = [r["seconds"] for r in rounds]
    return out


ONE_ROUND = ("FileOutputCommitter-v1",)
"""Paths measured in the first round only."""


def round_order(entries: tuple[str, ...], number: int) -> tuple[str, ...]:
    """The order of round ``number`` (from 1): ``entries`` rotated by one more each round, so that no path always
    runs first, or always after the same one (the server's state after a run, its memory and temporary files,
    changes what the next run costs it)."""
    shift = (number - 1) % len(entries)
    return entries[shift:] + entries[:shift]


def datapath_runs(server: Any, bucket: str, *, files: int, file_mib: int, part_mib: int,
                  in_flight: int = 4, labels: tuple[str, ...] = ("magic", "directory", "FileOutputCommitter-v1"),
                  local_dir: str, rounds: int = 5, jvm_and_gil: bool = True) -> dict[str, Any]:
    """Every path's write and read, ``rounds`` times in turn (the bare clients, then each Spark path, then again,
    each round in another order: :func:`round_order`), reported as medians: on a shared 2-core machine one round
    of a path moves by 10-20% from the next. The rename baseline (:data:`ONE_ROUND`, five times slower than the
    rest, its ratio never near a target) runs in the first round only. ``jvm_and_gil``: also the JVM's marginal
    CPU per GiB and the sidecar's GIL (they do not depend on the store, so a second run on another server leaves
    them out)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from s3commit.demo.measure import use_protocol
    from s3commit.spark import configure

    # A bucket of its own: a JVM keeps one s3a FileSystem per bucket (Hadoop's FileSystem cache), configured by
    # the first session that used it; an earlier section's session would hand this one its part size.
    bucket = server.create_bucket(f"{bucket}-datapath")
    size, part, slots = file_mib * MIB, part_mib * MIB, 2
    gib = files * size / (1024 * MIB)
    results: dict[str, Any] = {"files": files, "file_mib": file_mib, "part_mib": part_mib, "in_flight": in_flight,
                               "slots": slots, "gib": gib, "rounds": rounds,
                               "load_average_before": list(os.getloadavg())}
    local_file = clients.write_file(os.path.join(local_dir, "bare-data"), size)
    builder = (SparkSession.builder.master(f"local[{slots}]").appName("s3commit-bench-datapath")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g"))
    spark = configure(builder, committer="magic", endpoint_url=server.endpoint_url, region="us-east-1",
                      access_key="testing", secret_key="testing", part_size=f"{part_mib}M", rdd_writes=False,
                      extra={"fs.s3a.fast.upload.active.blocks": in_flight}).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark._jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    line = ("0123456789abcdef" * (MIB // 16))[:MIB - 1]  # + "\n": one MiB per line
    df = spark.range(0, files * file_mib, 1, files).select(F.lit(line).alias("value"))
    try:
        # Warm up every path (class loading, JIT, the sidecar's start) on a write and a read of a few parts.
        for label in labels:
            use_protocol(spark, label)
            df.limit(3 * part_mib).write.mode("overwrite").text(f"s3a://{bucket}/warm-up/{label.lower()}")
            spark.read.text(f"s3a://{bucket}/warm-up/{label.lower()}").count()
        use_protocol(spark, "FileOutputCommitter-v1")
        df.write.mode("overwrite").text(f"file://{local_dir}/warm-up")
        pid = int(json.loads(jvm.s3commit.bridge.Sidecar.healthJson())["pid"])
        results["sidecar_pid"] = pid
        measured: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for number in range(1, rounds + 1):
            print(f"  datapath: round {number} of {rounds}", flush=True)
            for entry in round_order(("bare clients", *labels), number):
                if entry == "bare clients":
                    runs = _bare_runs(server, bucket, files=files, size=size, part=part, in_flight=in_flight,
                                      slots=slots, local_file=local_file)
                elif entry in ONE_ROUND and number > 1:
                    continue
                else:
                    runs = {entry: _spark_run(spark, server, df, entry, f"s3a://{bucket}/spark-{entry.lower()}",
                                              files * file_mib, pid, jvm_pid, number)}
                for name, run in runs.items():
                    for phase in ("write", "read"):
                        measured.setdefault(name, {}).setdefault(phase, []).append(run[phase])
        for name, phases in measured.items():
            results[name] = {phase: median_of_rounds(runs) for phase, runs in phases.items()}
        results["sidecar_peak_bytes"] = _proc_peak_bytes(pid)
        print("  datapath: spark on local disk (file://: its own cost)", flush=True)
        use_protocol(spark, "FileOutputCommitter-v1")  # Spark's own protocol (S3CommitProtocol writes to S3 only)
        jvm_before, started = jvm_cpu(jvm_pid), time.perf_counter()
        df.write.mode("overwrite").text(f"file://{local_dir}/local")
        local_write, local_write_cpu = time.perf_counter() - started, jvm_cpu(jvm_pid) - jvm_before
        jvm_before, started = jvm_cpu(jvm_pid), time.perf_counter()
        spark.read.text(f"file://{local_dir}/local").count()
        results["local_disk"] = {"write_seconds": local_write, "read_seconds": time.perf_counter() - started,
                                 "write_jvm_cpu_seconds": local_write_cpu,
                                 "read_jvm_cpu_seconds": jvm_cpu(jvm_pid) - jvm_before}
        if "magic" in labels and jvm_and_gil:
            results["jvm_marginal"] = _jvm_marginal(spark, jvm_pid, f"s3a://{bucket}/jvm", f"file://{local_dir}/jvm",
                                                    files=files, file_mib=file_mib, line=line,
                                                    repeats=1 if file_mib < 64 else 3)
        if py_spy() is not None and "magic" in labels and jvm_and_gil:
            results["gil"] = _gil_runs(spark, df, pid, f"s3a://{bucket}/spark-gil", gib)
    finally:
        spark.stop()
        os.unlink(local_file)
    results["load_average_after"] = list(os.getloadavg())
    results["ratios"] = ratios(results, labels)
    return results


def _spark_run(spark: Any, server: Any, df: Any, label: str, dest: str, lines_expected: int, pid: int,
               jvm_pid: int, round_number: int) -> dict[str, dict[str, Any]]:
    """One write of ``df`` to ``dest`` through ``label`` and one read of it, timed, with CPU and server stats."""
    from s3commit.demo.measure import job_seconds, use_protocol

    use_protocol(spark, label)
    print(f"  datapath: spark write through {label}", flush=True)
    server.reset_stats()
    description = f"s3commit-bench-datapath-{label}-{round_number}"  # the task phase: this round's job alone
    spark.sparkContext.setJobDescription(description)
    server_cpu = proc_cpu(server.pid)
    cpu, jvm_before, started = proc_cpu(pid), jvm_cpu(jvm_pid), time.perf_counter()
    df.write.mode("overwrite").text(dest)
    total = time.perf_counter() - started
    spark.sparkContext.setJobDescription(None)
    tasks = job_seconds(spark, description)
    write: dict[str, Any] = {"seconds": total, "sidecar_cpu_seconds": proc_cpu(pid) - cpu,
                             "jvm_cpu_seconds": jvm_cpu(jvm_pid) - jvm_before,
                             "server_cpu_seconds": proc_cpu(server.pid) - server_cpu,
                             "task_phase_seconds": tasks, "job_commit_seconds": max(0.0, total - tasks)}
    stats = server.stats()
    write.update(max_parts_in_flight=stats.max_in_flight.get("UploadPart", 0), copy_bytes=stats.copy_bytes,
                 requests=dict(stats.requests))
    print(f"  datapath: spark read of {label}'s output", flush=True)
    server.reset_stats()
    server_cpu = proc_cpu(server.pid)
    cpu, jvm_before, started = proc_cpu(pid), jvm_cpu(jvm_pid), time.perf_counter()
    lines = spark.read.text(dest).count()
    read = {"seconds": time.perf_counter() - started, "sidecar_cpu_seconds": proc_cpu(pid) - cpu,
            "jvm_cpu_seconds": jvm_cpu(jvm_pid) - jvm_before, "lines": lines,
            "server_cpu_seconds": proc_cpu(server.pid) - server_cpu,
            "max_gets_in_flight": server.stats().max_in_flight.get("GetObject", 0),
            "gets": server.stats().requests.get("GetObject", 0)}
    assert lines == lines_expected, (lines, lines_expected)
    return {"write": write, "read": read}


def _jvm_marginal(spark: Any, jvm_pid: int, s3a: str, local: str, *, files: int, file_mib: int,
                  line: str, repeats: int) -> dict[str, float]:
    """The JVM's CPU per GiB that the s3a:// FileSystem adds to each byte, apart from what each job and file costs
    (tasks, the commit protocol, listings): magic and file:// each write and read the job's files at full size and
    at 1 MiB (``repeats`` runs of each, the smallest CPU kept); the JVM's CPU between the two sizes, per GiB moved
    between them, for s3a:// less for file://."""
    from pyspark.sql import functions as F

    from s3commit.demo.measure import use_protocol

    cpu: dict[tuple[str, str, int], float] = {}
    for mib in (1, file_mib):
        frame = spark.range(0, files * mib, 1, files).select(F.lit(line).alias("value"))
        for base in (s3a, local):
            use_protocol(spark, "magic" if base == s3a else "FileOutputCommitter-v1")  # file://: Spark's own
            for phase in ("write", "read"):
                runs = []
                for _ in range(repeats):
                    before = jvm_cpu(jvm_pid)
                    if phase == "write":
                        frame.write.mode("overwrite").text(f"{base}-{mib}")
                    else:
                        spark.read.text(f"{base}-{mib}").count()
                    runs.append(jvm_cpu(jvm_pid) - before)
                cpu[(base, phase, mib)] = min(runs)
    gib = files * (file_mib - 1) / 1024
    return {f"{phase}_cpu_per_gib": ((cpu[(s3a, phase, file_mib)] - cpu[(s3a, phase, 1)])
                                     - (cpu[(local, phase, file_mib)] - cpu[(local, phase, 1)])) / gib
            for phase in ("write", "read")}


def _gil_runs(spark: Any, df: Any, pid: int, dest: str, gib: float) -> dict[str, Any]:
    """The sidecar's GIL-held time during one more magic write and read (py-spy attached: not the timed runs)."""
    from s3commit.demo.measure import use_protocol

    use_protocol(spark, "magic")
    found = {}
    print("  datapath: the sidecar's GIL-held time of a magic write and read (py-spy --gil)", flush=True)
    with GilSampler(pid) as sampler:
        df.write.mode("overwrite").text(dest)
    found["write"] = sampler.result(gib)
    with GilSampler(pid) as sampler:
        spark.read.text(dest).count()
    found["read"] = sampler.result(gib)
    return found


def ratios(results: dict[str, Any], labels: tuple[str, ...]) -> dict[str, float]:
    """Every ratio against the reference (boto3's defaults), CPU per GiB, and the JVM's own cost per GiB beyond
    ``file://``'s (the FileSystem's overhead)."""
    bare, gib = results["bare"], results["gib"]
    out: dict[str, float] = {}
    for label in labels:
        key = label.lower().replace("fileoutputcommitter-", "foc_")
        write, read = results[label]["write"], results[label]["read"]
        out[f"write_{key}_over_bare"] = write["seconds"] / bare["write"]["seconds"]
        out[f"read_{key}_over_bare"] = read["seconds"] / bare["read"]["seconds"]
        for phase, run in (("write", write), ("read", read)):  # each round against the bare client's same round
            rounds = run.get("round_seconds") or [run["seconds"]]
            baselines = bare[phase].get("round_seconds") or [bare[phase]["seconds"]]
            out[f"{phase}_{key}_over_bare_paired"] = paired_median(rounds, baselines[:len(rounds)])
        out[f"sidecar_cpu_per_gib_write_{key}"] = write["sidecar_cpu_seconds"] / gib
        out[f"sidecar_cpu_per_gib_read_{key}"] = read["sidecar_cpu_seconds"] / gib
        out[f"sidecar_over_bare_cpu_write_{key}"] = write["sidecar_cpu_seconds"] / bare["write"]["cpu_seconds"]
        out[f"sidecar_over_bare_cpu_read_{key}"] = read["sidecar_cpu_seconds"] / bare["read"]["cpu_seconds"]
        local = results.get("local_disk")
        if local and "jvm_cpu_seconds" in write:
            out[f"jvm_overhead_cpu_per_gib_write_{key}"] = (write["jvm_cpu_seconds"]
                                                            - local["write_jvm_cpu_seconds"]) / gib
            out[f"jvm_overhead_cpu_per_gib_read_{key}"] = (read["jvm_cpu_seconds"]
                                                           - local["read_jvm_cpu_seconds"]) / gib
    for name in ("bare", "bare-tuned", "crt"):
        if name in results:
            key = name.replace("-", "_")
            out[f"{key}_cpu_per_gib_write"] = results[name]["write"]["cpu_seconds"] / gib
            out[f"{key}_cpu_per_gib_read"] = results[name]["read"]["cpu_seconds"] / gib
    for name in ("bare", "bare-tuned", "crt", *labels):
        for phase in ("write", "read"):
            server_cpu = results.get(name, {}).get(phase, {}).get("server_cpu_seconds")
            if server_cpu is not None:
                key = name.lower().replace("-", "_").replace("fileoutputcommitter_", "foc_")
                out[f"server_cpu_per_gib_{phase}_{key}"] = server_cpu / gib
    if "magic" in labels:  # the headline figures: magic against boto3's defaults
        out["sidecar_over_bare_cpu_write"] = out["sidecar_over_bare_cpu_write_magic"]
        out["sidecar_over_bare_cpu_read"] = out["sidecar_over_bare_cpu_read_magic"]
    for phase in ("write", "read"):
        marginal = results.get("jvm_marginal", {}).get(f"{phase}_cpu_per_gib")
        if marginal is not None:
            out[f"jvm_marginal_cpu_per_gib_{phase}"] = marginal
        held = results.get("gil", {}).get(phase)
        if held:
            out[f"gil_held_cpu_per_gib_{phase}"] = held["gil_held_cpu_per_gib"]
    if "magic" in labels and "directory" in labels:
        out["magic_write_over_directory_write"] = (results["magic"]["write"]["seconds"]
                                                   / results["directory"]["write"]["seconds"])
        out["magic_task_phase_over_directory_task_phase"] = (results["magic"]["write"]["task_phase_seconds"]
                                                             / results["directory"]["write"]["task_phase_seconds"])
    return out
