"""Entry point of ``python benchmarks/run.py`` (``s3commit bench`` in a clone): runs the sections, writes results."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, TypedDict

from benchmarks.report import write_markdown, write_plots
from benchmarks.runs import PoolRun, bare_pool_completes, memory_run, paired_median, run_job

COMPLETE_LATENCY = 0.050
"""The s3-standard profile's CompleteMultipartUpload latency (s3commit/testing/profiles.py)."""
SECTIONS = ("commit", "scaling", "memory", "spark", "small-files", "datapath", "datapath-moto", "sidecar", "streaming",
            "engines", "lease", "decommission", "peers", "scale")
"""The benchmark's sections, in the order they run. ``datapath-moto`` is the data path again on a server that keeps
moto's own costs (a ranged GET reads the whole object, a Complete copies every part: :mod:`s3commit.testing.server`),
as a moto server a user starts has them. ``peers`` is s3commit against Hadoop's S3A (its jars from Maven Central,
cached): :mod:`benchmarks.peers_bench`. ``scale`` is the job commit of 100 to 100,000 files (magic, an overwrite of as
many old files, directory), throttled at S3's per-prefix rate and not, against its floor, as a user's commit runs
(lean requests) on the Go store (on the Python wire where Go is not installed): :mod:`benchmarks.scale_bench`."""


OPT_IN = ("peers", "scale")
"""Sections run only when ``--sections`` names them: ``peers`` needs S3A's jars (686 MB from Maven Central, once)
and takes about half an hour; ``scale`` commits 100,000 files six times (about five minutes on the Go store)."""


def _machine() -> dict[str, Any]:
    memory = ""
    try:
        with open("/proc/meminfo") as f:
            memory = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory": memory, "python": platform.python_version(),
            "platform": platform.platform()}



def _merged(path: Path, results: dict[str, Any], sections: Collection[str]) -> dict[str, Any]:
    """A run of some sections keeps the other sections of the earlier run at ``path``, each with the date of the
    run that measured it (``ran``), so that one results file holds the latest figure of every section."""
    ran = {name: results["started"] for name in sections if name in results}
    if not path.exists():
        return {**results, "ran": ran}
    earlier = json.loads(path.read_text())
    if earlier.get("quick") != results["quick"]:
        return {**results, "ran": ran}
    kept = {name: earlier[name] for name in SECTIONS if name in earlier and name not in ran}
    dates = {name: earlier.get("ran", {}).get(name, earlier.get("started")) for name in kept}
    return {**kept, **results, "ran": {**dates, **ran}}

MAGIC_VARIANTS = {"magic": "CRC32", "magic-no-checksums": None}
"""magic as measured beside a bare pool: by default (a CRC32 with every part, named by its Complete) and with
part checksums off, each against a bare pool sending the same requests."""


def section_commit(endpoint: str, bucket: str, sizes: dict[str, int], staging: str,
                   fresh: Callable[[], None]) -> dict[str, Any]:
    results = {}
    bare_runs: dict[str | None, list[PoolRun]] = {checksum: [] for checksum in MAGIC_VARIANTS.values()}
    for name in (*MAGIC_VARIANTS, "directory", "partitioned", "rename-v1", "rename-v2"):
        # magic's job commit is CPU-bound on the simulated S3 (noisy on a shared machine): it is repeated, the run
        # with the median job commit reported, and each run followed by a bare boto3 pool completing as many
        # uploads with the same checksums (the limit); the rename baseline is latency-bound (sleeps).
        committer, checksum = ("magic", MAGIC_VARIANTS[name]) if name in MAGIC_VARIANTS else (name, "CRC32")
        measured: list[dict[str, Any]] = []
        for _ in range(sizes["repeats"] if name in MAGIC_VARIANTS else 1):
            fresh()
            print(f"  commit: {name} ({sizes['files']} files x {sizes['file_size']} bytes in {sizes['tasks']} "
                  "tasks)", flush=True)
            measured.append(run_job(endpoint, bucket, committer, tasks=sizes["tasks"], files=sizes["files"],
                                    file_size=sizes["file_size"], threads=sizes["threads"],
                                    staging_dir=staging, checksum=checksum).summary())
            if name in MAGIC_VARIANTS:
                fresh()
                print(f"  commit: bare boto3 pool, {sizes['files']} Completes of {sizes['file_size']} bytes"
                      f"{f' naming {checksum} part checksums' if checksum else ''}", flush=True)
                bare_runs[checksum].append(bare_pool_completes(endpoint, bucket, files=sizes["files"],
                                                               threads=sizes["threads"],
                                                               file_size=sizes["file_size"], checksum=checksum))
        # in order, to pair with the bare pools' runs index by index
        in_order = {"job_commit_runs": [r["job_commit_seconds"] for r in measured],
                    "job_commit_cpu_runs": [r["job_commit_cpu_seconds"] for r in measured]}
        measured.sort(key=lambda r: r["job_commit_seconds"])
        results[name] = measured[len(measured) // 2] | in_order
    bare = statistics.median(run.seconds for run in bare_runs[None])
    magic, rename = results["magic"], results["rename-v1"]
    ratios = {
        "job_commit_rename_v1_over_magic": rename["job_commit_seconds"] / magic["job_commit_seconds"],
        "total_rename_v1_over_magic": rename["total_seconds"] / magic["total_seconds"],
        "rename_v1_job_commit_over_bare_pool": rename["job_commit_seconds"] / bare,
    }
    for name, checksum in MAGIC_VARIANTS.items():
        # each magic run against the pool run right after it, the median of those ratios: the server's speed
        # drifts between pairs (its own CPU on a shared machine), far less within one. The client's CPU is the
        # part the server's speed does not move: what s3commit adds per Complete, measured apart from the noise.
        label = name.replace("-", "_")
        pools = bare_runs[checksum]
        ratios[f"{label}_job_commit_over_bare_pool"] = paired_median(
            results[name]["job_commit_runs"], [run.seconds for run in pools])
        ratios[f"{label}_job_commit_client_cpu_over_bare_pool"] = paired_median(
            results[name]["job_commit_cpu_runs"], [run.cpu_seconds for run in pools])
    # Task commit independent of bytes: one task of a few files, 1 MiB vs 64 MiB per task.
    task_sizes = {}
    for label, size in (("1MiB", 1 << 20), ("64MiB", 64 << 20)):
        per_file = size // 4
        runs = [run_job(endpoint, bucket, "magic", tasks=1, files=4, file_size=per_file, threads=sizes["threads"],
                        staging_dir=staging).task_commit_seconds[0] for _ in range(sizes["repeats"])]
        task_sizes[label] = min(runs)
    ratios["magic_task_commit_64MiB_over_1MiB"] = task_sizes["64MiB"] / task_sizes["1MiB"]
    return {"sizes": sizes, "committers": results, "magic_task_commit_seconds": task_sizes,
            "bare_pool_seconds": bare, "bare_pool_runs": [run.seconds for run in bare_runs[None]],
            "bare_pool_checksum_runs": [run.seconds for run in bare_runs["CRC32"]],
            "bare_pool_cpu_runs": [run.cpu_seconds for run in bare_runs[None]],
            "bare_pool_checksum_cpu_runs": [run.cpu_seconds for run in bare_runs["CRC32"]], "ratios": ratios}


def section_scaling(endpoint: str, bucket: str, sizes: dict[str, Any], staging: str,
                    fresh: Callable[[], None], set_profile: Callable[[str], object],
                    profile: str) -> dict[str, Any]:
    files_curve: dict[str, list[dict[str, float]]] = {"magic": [], "rename-v1": [], "bare-pool": []}
    threads = sizes["threads"]
    for count in sizes["file_counts"]:
        print(f"  scaling: {count} files", flush=True)
        fresh()
        tasks = max(1, count // 100)
        magic = run_job(endpoint, bucket, "magic", tasks=tasks, files=count, file_size=1024, threads=threads,
                        staging_dir=staging)
        files_curve["magic"].append({"files": count, "seconds": magic.job_commit_seconds})
        files_curve["bare-pool"].append({"files": count, "seconds": bare_pool_completes(
            endpoint, bucket, files=count, threads=threads).seconds})
        if count <= sizes["rename_max_files"]:
            rename = run_job(endpoint, bucket, "rename-v1", tasks=tasks, files=count, file_size=1024,
                             threads=threads, staging_dir=staging)
            files_curve["rename-v1"].append({"files": count, "seconds": rename.job_commit_seconds})
    threads_curve = []
    count = sizes["threads_files"]
    for n in sizes["thread_counts"]:
        print(f"  scaling: {count} files, {n} threads", flush=True)
        fresh()
        magic = run_job(endpoint, bucket, "magic", tasks=max(1, count // 100), files=count, file_size=1024,
                        threads=n, staging_dir=staging)
        bare = bare_pool_completes(endpoint, bucket, files=count, threads=n).seconds
        threads_curve.append({"threads": n, "seconds": magic.job_commit_seconds, "bare_pool_seconds": bare,
                              "bound_seconds": count * COMPLETE_LATENCY / n})
    # What the simulated S3 itself can do on this machine: the same Completes with no latency added, so the
    # server's own CPU time (moto and the proxy are Python processes) is the only cost.
    print(f"  scaling: {count} files, {max(sizes['thread_counts'])} threads, no added latency", flush=True)
    fresh()
    set_profile("none")
    try:
        ceiling = bare_pool_completes(endpoint, bucket, files=count, threads=max(sizes["thread_counts"])).seconds
    finally:
        set_profile(profile)
    largest = files_curve["magic"][-1]
    bare_largest = files_curve["bare-pool"][-1]
    return {
        "files_curve": files_curve, "threads_curve": threads_curve,
        "ratios": {
            "magic_job_commit_over_bare_pool": largest["seconds"] / bare_largest["seconds"],
            "magic_job_commit_over_bound": largest["seconds"] / (largest["files"] * COMPLETE_LATENCY / threads),
        },
        "bound": f"files x {COMPLETE_LATENCY * 1000:.0f} ms / threads",
        "server_ceiling": {"files": count, "threads": max(sizes["thread_counts"]), "seconds": ceiling,
                           "completes_per_second": count / ceiling},
    }


def section_spark(endpoint_server: Any, bucket: str, rows: int, tasks: int) -> dict[str, Any]:
    from benchmarks.spark_bench import spark_runs

    return spark_runs(endpoint_server, bucket, rows=rows, tasks=tasks)


def section_streaming(server: Any, bucket: str, *, quick: bool) -> dict[str, Any]:
    from benchmarks.streaming_bench import streaming_runs

    if quick:
        return streaming_runs(server, bucket, batches=2, rows=100, trigger_seconds=2.5, stateful=False, skip=1)
    return streaming_runs(server, bucket, batches=10, rows=1000, trigger_seconds=4.0, stateful=True, skip=2)


def _optional(what: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A section's results, or why it was skipped (``what`` is not installed)."""
    try:
        return run()
    except ModuleNotFoundError as err:
        # Only a third-party package missing skips a section; a name missing from s3commit or the benchmarks is a
        # defect, and raises.
        if (err.name or "").split(".")[0] in ("s3commit", "benchmarks", "testbed"):
            raise
        return {"skipped": f"{what} is not available: {err}"}


class _DatapathSizes(TypedDict):
    files: int
    file_mib: int
    part_mib: int


def _datapath_sizes(quick: bool) -> _DatapathSizes:
    """The files both data path sections move: 8 x 128 MiB in parts of 32 MiB (quick: 2 x 12 MiB, parts of 5)."""
    return (_DatapathSizes(files=2, file_mib=12, part_mib=5) if quick else
            _DatapathSizes(files=8, file_mib=128, part_mib=32))


def _datapath(server: Any, bucket: str, quick: bool, staging: str) -> dict[str, Any]:
    from benchmarks.datapath import datapath_runs

    return datapath_runs(server, bucket, **_datapath_sizes(quick), local_dir=staging, rounds=1 if quick else 5)


def _datapath_moto(profile: str, quick: bool, staging: str) -> dict[str, Any]:
    """The data path on a server of its own that keeps moto's costs (five rounds; no JVM or GIL runs)."""
    from benchmarks.datapath import datapath_runs
    from s3commit.testing.server import S3TestServer

    with S3TestServer(profile=profile, moto_costs=True) as server:
        # A bucket name the datapath section did not use: this JVM's s3a FileSystem of that bucket is cached with
        # the other server's endpoint (Hadoop's FileSystem cache), and the job would write and commit there.
        bucket = server.create_bucket("s3commit-bench-moto")
        print(f"  datapath on moto's own costs: {server.endpoint_url}", flush=True)
        return {**datapath_runs(server, bucket, **_datapath_sizes(quick), local_dir=staging,
                                rounds=1 if quick else 5, jvm_and_gil=False), "moto_costs": True}


def _sidecar(server: Any, quick: bool, profile: str) -> dict[str, Any]:
    """The ``sidecar`` section on the benchmark's moto (no latency added meanwhile) and, where its binary is
    installed, on SeaweedFS."""
    from benchmarks.sidecar_bench import sidecar_section

    servers: dict[str, Any] = {"moto": server}
    try:
        from testbed.seaweed import SeaweedServer, weed_binary

        weed_binary()
        servers["seaweedfs"] = SeaweedServer().start()
    except Exception as err:  # no weed binary (the test extra has it), or it would not start
        print(f"  sidecar: SeaweedFS is not available ({err}); moto only", flush=True)
    server.configure(profile="none")
    try:
        return sidecar_section(servers, quick=quick)
    finally:
        server.configure(profile=profile)
        if "seaweedfs" in servers:
            servers["seaweedfs"].stop()


def _engines(server: Any, bucket: str, quick: bool) -> dict[str, Any]:
    from benchmarks.engines_bench import engine_runs

    return engine_runs(server, bucket, quick=quick)


def _decommission(server: Any, bucket: str, quick: bool, staging: str) -> dict[str, Any]:
    if quick:  # a standalone cluster and three applications: minutes, not a smoke run's seconds
        return {"skipped": "not in a quick run (a standalone cluster, three applications): --sections decommission"}
    from benchmarks.decommission_bench import decommission_runs

    return decommission_runs(server, bucket, mib=384, maps=8, reduces=8, workdir=Path(staging) / "decommission")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="s3commit bench", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run (CI): checks the benchmark works")
    parser.add_argument("--sections", default=",".join(s for s in SECTIONS if s not in OPT_IN),
                        help=f"comma-separated: {', '.join(SECTIONS)}; a run of some keeps the others' earlier figures"
                        f" ({', '.join(OPT_IN)}: only when named)")
    parser.add_argument("--peers-shapes", default=None,
                        help="peers: what to run, comma-separated, each NAME or NAME:ROUNDS: demo, small, commit-heavy "
                        "(2,000 files), commit-10k (10,000 files; only when named), snap-100, snap-1k, snap-10k "
                        "(s3commit magic to a plain and to a snapshot destination, S3A magic; only when named), "
                        "datapath; 'none': the data path alone; the others keep the earlier run's figures")
    parser.add_argument("--profile", default="s3-standard")
    parser.add_argument("--out", default=None, help="results directory (default: results/ beside this module)")
    args = parser.parse_args(argv)
    from s3commit.testing.server import S3TestServer

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {', '.join(unknown)}: choose from {', '.join(SECTIONS)}")
    out = Path(args.out or (Path(__file__).resolve().parent / "results"))
    out.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    commit_sizes = ({"tasks": 4, "files": 40, "file_size": 64 << 10, "threads": 16, "repeats": 1} if quick else
                    {"tasks": 20, "files": 2000, "file_size": 1 << 20, "threads": 32, "repeats": 5})
    scaling_sizes = ({"file_counts": [20, 60], "rename_max_files": 60, "threads": 16, "threads_files": 60,
                      "thread_counts": [4, 16]} if quick else
                     {"file_counts": [100, 1000, 3000, 10000], "rename_max_files": 3000, "threads": 32,
                      "threads_files": 2000, "thread_counts": [4, 8, 16, 32, 64]})
    results: dict[str, Any] = {"machine": _machine(), "profile": args.profile, "quick": quick,
                               "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    started = time.perf_counter()
    with S3TestServer(profile=args.profile) as server, tempfile.TemporaryDirectory() as staging:
        bucket = server.create_bucket("s3commit-bench")

        def fresh() -> None:
            # Forget earlier runs' objects (moto holds them in memory) before each measured job.
            server.reset()
            server.create_bucket(bucket)

        print(f"simulated S3 at {server.endpoint_url} (profile {args.profile})", flush=True)
        if "commit" in sections:
            results["commit"] = section_commit(server.endpoint_url, bucket, commit_sizes, staging, fresh)
        if "scaling" in sections:
            results["scaling"] = section_scaling(server.endpoint_url, bucket, scaling_sizes, staging, fresh,
                                                 lambda p: server.configure(profile=p), args.profile)
        if "memory" in sections:
            print("  memory: job commit of pending uploads in an in-memory store", flush=True)
            results["memory"] = memory_run(uploads=2000 if quick else 100_000, pendingsets=20 if quick else 1000)
        spark_missing = "pyspark or the bridge"
        if "spark" in sections:
            fresh()
            results["spark"] = _optional(spark_missing, lambda: section_spark(
                server, bucket, rows=20_000 if quick else 2_000_000, tasks=2 if quick else 8))
        if "small-files" in sections:
            fresh()
            print("  small files: 40 files of a few KiB, PySpark end to end", flush=True)
            results["small-files"] = _optional(spark_missing, lambda: section_spark(
                server, bucket, rows=400 if quick else 4_000, tasks=2 if quick else 10))
        if "datapath" in sections:
            fresh()
            results["datapath"] = _optional(spark_missing, lambda: _datapath(server, bucket, quick, staging))
        if "datapath-moto" in sections:
            results["datapath-moto"] = _optional(spark_missing, lambda: _datapath_moto(args.profile, quick, staging))
        if "sidecar" in sections:
            fresh()
            results["sidecar"] = _sidecar(server, quick, args.profile)
        if "streaming" in sections:
            fresh()
            results["streaming"] = _optional(spark_missing, lambda: section_streaming(server, bucket, quick=quick))
        if "engines" in sections:
            fresh()
            results["engines"] = _optional("dask or pyarrow", lambda: _engines(server, bucket, quick))
        if "lease" in sections:
            from benchmarks.lease_bench import lease_runs

            results["lease"] = lease_runs(server.endpoint_url, bucket, staging, fresh, quick=quick)
        if "decommission" in sections:
            fresh()
            results["decommission"] = _optional(spark_missing, lambda: _decommission(server, bucket, quick, staging))
        if "peers" in sections:
            from benchmarks.peers_bench import peers_runs, peers_sizes

            # quick: the demo at 20,000 rows, 100 files for the commit-heavy job, 2 x 12 MiB, one round
            results["peers"] = _optional(spark_missing, lambda: peers_runs(
                server, bucket, sizes=peers_sizes(quick, args.peers_shapes), workdir=staging))
    if "scale" in sections:
        from benchmarks.scale_bench import section_runs

        print("  scale: the job commit against files, throttled and not", flush=True)
        results["scale"] = section_runs(quick=quick)
    results["seconds"] = time.perf_counter() - started
    name = "quick" if quick else "results"
    if args.peers_shapes is not None and "peers" in results and (out / f"{name}.json").exists():
        from benchmarks.peers_bench import merge_earlier

        earlier = json.loads((out / f"{name}.json").read_text())
        results["peers"] = merge_earlier(results["peers"], earlier.get("peers"),
                                         earlier.get("ran", {}).get("peers", earlier.get("started", "earlier")))
    results = _merged(out / f"{name}.json", results, sections)
    (out / f"{name}.json").write_text(json.dumps(results, indent=2, sort_keys=True))
    write_markdown(results, out / f"{name}.md")
    if not quick:
        write_plots(results, out)
    print((out / f"{name}.md").read_text())
    return 0
