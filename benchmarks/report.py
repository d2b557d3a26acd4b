"""Benchmark output: a Markdown table of every figure and PNG plots of the scaling curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.cpu_report import datapath_markdown, datapath_plot, sidecar_markdown, sidecar_plot
from benchmarks.engines_bench import GIB


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _seconds(values: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in values) + " s"


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [f"# s3commit benchmark ({'quick' if results.get('quick') else 'full'} run)", "",
             f"Profile `{results['profile']}`; machine: {results['machine']['cpus']} CPUs, "
             f"{results['machine']['memory']}, Python {results['machine']['python']}; started "
             f"{results['started']}; took {results.get('seconds', 0):.0f} s.", ""]
    ran = results.get("ran") or {}
    if len(set(ran.values())) > 1:
        lines += ["Sections measured by more than one run (each run started at): " +
                  ", ".join(f"{name} {date}" for name, date in ran.items()) + ".", ""]
    commit = results.get("commit")
    if commit:
        s = commit["sizes"]
        lines += [f"## Commit phase: {s['files']} files x {s['file_size']} bytes in {s['tasks']} tasks, "
                  f"{s['threads']} threads", "",
                  _row(["committer", "write s", "task commit sum / median / max s", "job commit s", "total s",
                        "requests", "per file", "bytes copied", "job-commit peak MB"]),
                  _row(["---"] * 9)]
        for name, r in commit["committers"].items():
            lines.append(_row([name, f"{r['write_seconds']:.2f}",
                               f"{r['task_commit_sum']:.2f} / {r['task_commit_median']:.3f} / "
                               f"{r['task_commit_max']:.3f}",
                               f"{r['job_commit_seconds']:.2f}", f"{r['total_seconds']:.2f}", r["total_requests"],
                               f"{r['requests_per_file']:.2f}", r["bytes_copied"],
                               f"{r['job_commit_peak_bytes'] / 1e6:.1f}"]))
        for name, suffix, pool in (("magic", "checksum_", "a bare boto3 pool whose uploads carry a CRC32 with each "
                                    "part and whose Completes name it"),
                                   ("magic-no-checksums", "", "a bare boto3 pool without checksums")):
            run = commit["committers"].get(name, {})
            runs, cpu = run.get("job_commit_runs", []), run.get("job_commit_cpu_runs", [])
            pools = commit.get(f"bare_pool_{suffix}runs") or []
            pools_cpu = commit.get(f"bare_pool_{suffix}cpu_runs") or []
            if runs and len(pools) == len(runs):
                lines += ["", f"{name}'s job commit in {len(runs)} runs, in order: " + _seconds(runs)
                          + f" (the median run is shown). Right after each, {pool} completed {s['files']} uploads of "
                          f"{s['file_size']} bytes on the same server in " + _seconds(pools) + ". The ratio is the "
                          "median of the run-by-run ratios."]
            if cpu and len(pools_cpu) == len(cpu):
                lines += ["", f"The client's CPU (every thread of the process) in those runs: {name} "
                          + _seconds(cpu) + ", the bare pool " + _seconds(pools_cpu) + "."]
        lines += ["", "Requests by operation:", "", _row(["committer", "requests"]), _row(["---", "---"])]
        for name, r in commit["committers"].items():
            ops = ", ".join(f"{op} {n}" for op, n in sorted(r["requests"].items()))
            lines.append(_row([name, ops]))
        lines += ["", "Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in commit["ratios"].items()), ""]
    scaling = results.get("scaling")
    if scaling:
        lines += ["## Job commit against file count", "", _row(["files", "magic s", "bare boto3 pool s",
                                                                "rename-v1 s"]), _row(["---"] * 4)]
        rename = {p["files"]: p["seconds"] for p in scaling["files_curve"]["rename-v1"]}
        for m, b in zip(scaling["files_curve"]["magic"], scaling["files_curve"]["bare-pool"], strict=True):
            r = rename.get(m["files"])
            lines.append(_row([m["files"], f"{m['seconds']:.2f}", f"{b['seconds']:.2f}",
                               f"{r:.2f}" if r is not None else "not run"]))
        lines += ["", "## Job commit against threads", "", _row(["threads", "magic s", "bare pool s",
                                                                  f"bound ({scaling['bound']}) s"]),
                  _row(["---"] * 4)]
        for p in scaling["threads_curve"]:
            lines.append(_row([p["threads"], f"{p['seconds']:.2f}", f"{p['bare_pool_seconds']:.2f}",
                               f"{p['bound_seconds']:.2f}"]))
        ceiling = scaling.get("server_ceiling")
        if ceiling:
            lines += ["", f"The simulated S3's own ceiling on this machine: {ceiling['files']} Completes with no "
                      f"added latency took {ceiling['seconds']:.2f} s at {ceiling['threads']} threads "
                      f"({ceiling['completes_per_second']:.0f}/s): no client can commit faster here."]
        lines += ["", "Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in scaling["ratios"].items()), ""]
    memory = results.get("memory")
    if memory:
        lines += ["## Memory", "", f"Job commit of {memory['uploads']:,} pending uploads in "
                  f"{memory['pendingsets']:,} pendingsets: peak {memory['peak_bytes_above_baseline'] / 1e6:.0f} MB "
                  f"above baseline ({memory['measure']}); the pendingsets are "
                  f"{memory['serialized_pendingset_bytes'] / 1e6:.0f} MB of JSON; {memory['seconds']:.1f} s.", ""]
    for section, title in (("spark", "Spark end to end"), ("small-files", "Small files, Spark end to end")):
        lines += _spark_lines(results.get(section), title)
    for section, title in (("datapath", "Data path"), ("datapath-moto", "Data path on moto's own costs")):
        datapath = results.get(section)
        if datapath and "skipped" not in datapath:
            lines += datapath_markdown(datapath, title)
        elif datapath:
            lines += [f"## {title}", "", datapath["skipped"], ""]
    if results.get("sidecar"):
        lines += sidecar_markdown(results["sidecar"])
    lines += _streaming_lines(results.get("streaming"))
    lines += _engine_lines(results.get("engines"))
    if results.get("lease"):
        from benchmarks.lease_bench import lease_markdown

        lines += lease_markdown(results["lease"])
    lines += _decommission_lines(results.get("decommission"))
    if results.get("peers"):
        from benchmarks.peers_bench import peers_markdown

        lines += peers_markdown(results["peers"])
    if results.get("scale"):
        from benchmarks.scale_bench import scale_markdown

        lines += scale_markdown(results["scale"])
    path.write_text("\n".join(lines))


def _ops(requests: dict[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(requests.items())) or "none"


def _decommission_lines(decommission: dict[str, Any] | None) -> list[str]:
    if not decommission:
        return []
    title = "## Executors that come and go (an executor decommissioned between the map and the reduce stage)"
    if "skipped" in decommission:
        return [title, "", decommission["skipped"], ""]
    first = next(decommission[v] for v in ("recompute", "fallback-s3", "peer") if v in decommission)
    lines = [title, "", f"{first['shuffle_bytes'] / (1 << 20):.0f} MiB of shuffle in {decommission['maps']} map and "
             f"{decommission['reduces']} reduce tasks on {decommission['executors']} executors (a standalone cluster "
             "of two one-core Workers); one executor gets SIGPWR after the first job, then the same shuffle is read "
             "again. First job (map stage, reduce stage from local disks): " + "; ".join(
                 f"{v} {r['first_map_stage_seconds']:.1f} s, {r['first_reduce_stage_seconds']:.1f} s"
                 for v, r in decommission.items() if v in ("recompute", "fallback-s3", "peer")) + ".", "",
             _row(["variant", "second job s", "reduce stage s", "map tasks run again (s)", "exact",
                   "migration s (SIGPWR to exit; copies logged)", "map outputs to S3", "migration requests",
                   "MiB to S3", "second job's requests", "MiB from S3"]), _row(["---"] * 11)]
    for variant in ("recompute", "fallback-s3", "peer"):
        r = decommission.get(variant)
        if not r:
            continue
        migration = (f"{r['migration_seconds']:.1f}; {r['copy_seconds']:.1f}" if r["migration_seconds"] is not None
                     else "-")
        lines.append(_row([variant, f"{r['second_job_seconds']:.1f}", f"{r['reduce_stage_seconds'] or 0:.1f}",
                           f"{r['map_tasks_run_again']} ({r['map_rerun_seconds']:.1f})", r["exact"], migration,
                           r["map_outputs_to_s3"], _ops(r["migration_requests"]),
                           f"{r['migration_bytes_to_s3'] / (1 << 20):.0f}", _ops(r["reduce_requests"]),
                           f"{r['reduce_bytes_from_s3'] / (1 << 20):.0f}"]))
    loads = ", ".join(f"{v} {decommission[v]['load_average'][0]:.1f}" for v in ("recompute", "fallback-s3", "peer")
                      if v in decommission)
    lines += ["", "Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in decommission["ratios"].items()),
              "", f"The machine's load average (1 min) after each variant: {loads}.", ""]
    return lines


def _spark_lines(spark: dict[str, Any] | None, title: str) -> list[str]:
    if not spark:
        return []
    if "skipped" in spark:
        return [f"## {title}", "", spark["skipped"], ""]
    files = spark.get("magic", {}).get("files", 0)
    lines = [f"## {title}: {spark['rows']:,} rows, {spark['tasks']} tasks, {files} files", "",
             _row(["protocol", "tasks s", "job commit s", "total s", "requests", "bytes copied"]), _row(["---"] * 6)]
    for name, r in spark.items():
        if isinstance(r, dict) and "phases" in r:
            lines.append(_row([name, f"{r['phases']['tasks (write)']:.2f}", f"{r['phases']['job commit']:.2f}",
                               f"{r['total_seconds']:.2f}", r["total_requests"], r["bytes_copied"]]))
    return [
        *lines, "", "Job commit: the write's wall time minus the Spark job's (driver side: job setup, planning, "
        "job commit). Measured after a warm-up write of a 1% sample through each protocol; the first, cold "
        f"write of the session took {spark.get('cold_first_write_seconds', 0):.1f} s (JVM warm-up, sidecar start)"
        + (f", then the whole write once to local disk, {spark['local_disk_warm_up_seconds']:.1f} s (Spark's code "
           "warmed at full size)" if "local_disk_warm_up_seconds" in spark else "") + ".", "",
        "Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in spark["ratios"].items()), ""]


def _engine_lines(engines: dict[str, Any] | None) -> list[str]:
    if not engines:
        return []
    if "skipped" in engines:
        return ["## Python engines", "", engines["skipped"], ""]
    if "shapes" not in engines:  # a results.json from before the shapes
        return []
    lines = ["## Python engines: s3commit's committed writes against the engines' own writers", "",
             f"Server: {engines['server']}; MD5 check of part ETags: {engines['md5_check']}. Medians of "
             f"{next(iter(engines['shapes'].values()))['rounds']} interleaved rounds; ratios against the engine's own "
             "writer (paired: the median of each round's ratio).", "",
             _row(["shape", "writer", "MiB", "seconds", "x (paired)", "CPU s", "CPU x (paired)", "CPU s/GiB"]),
             _row(["---"] * 8)]
    for shape, compared in [*engines["shapes"].items(), ("dask, 8 partitions, 2 workers", engines.get("dask")),
                            ("ray, 8 blocks, 2 CPUs", engines.get("ray"))]:
        if not compared:
            continue
        if "skipped" in compared:
            lines.append(_row([shape, compared["skipped"], "", "", "", "", "", ""]))
            continue
        for name, path in compared["paths"].items():
            lines.append(_row([shape, name, f"{compared['bytes'] / GIB * 1024:.0f}", f"{path['median_seconds']:.2f}",
                               f"{path['wall_ratio']:.2f} ({path['paired_wall_ratio']:.2f})",
                               f"{path['median_cpu_seconds']:.2f}",
                               f"{path['cpu_ratio']:.2f} ({path['paired_cpu_ratio']:.2f})",
                               f"{path['cpu_per_gib']:.2f}"]))
    return [*lines, ""]


def _streaming_lines(streaming: dict[str, Any] | None) -> list[str]:
    if not streaming:
        return []
    if "skipped" in streaming:
        return ["## Structured Streaming", "", streaming["skipped"], ""]
    lines = [f"## Structured Streaming, per micro-batch ({streaming['rows_per_batch']:,} rows per batch, a trigger "
             f"every {streaming['trigger_seconds']:g} s, Spark {streaming['spark']})", ""]
    titles = {"checkpoint": "Checkpoint (noop sink: every request is the checkpoint's)",
              "stateful": "Checkpoint with a stateful aggregation (state store files too)",
              "sink": "File sink commit (checkpoint on local disk: every request is the sink's)"}
    for kind in ("checkpoint", "stateful", "sink"):
        runs = streaming.get(kind) or {}
        if not runs:
            continue
        lines += [f"### {titles[kind]}", "",
                  _row(["manager" if kind != "sink" else "protocol", "checkpoint ms (walCommit + commitOffsets)",
                        "addBatch ms", "batch ms", "requests", "bytes copied", "requests by operation"]),
                  _row(["---"] * 7)]
        for label, r in runs.items():
            ops = ", ".join(f"{op} {n:g}" for op, n in r["requests_per_batch"].items())
            lines.append(_row([label, f"{r['checkpoint_ms']:.0f}", f"{r['add_batch_ms']:.0f}",
                               f"{r['batch_ms']:.0f}", f"{r['total_requests_per_batch']:.1f}",
                               f"{r['bytes_copied_per_batch']:.0f}", ops]))
        lines.append("")
    lines += ["Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in streaming["ratios"].items()), ""]
    return lines


def write_plots(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if results.get("scale"):
        from benchmarks.scale_bench import scale_plot

        scale_plot(results["scale"], out / "scale.png")
    commit = results.get("commit")
    if commit:
        names = list(commit["committers"])
        fig, ax = plt.subplots(figsize=(7, 4))
        bottoms = [0.0] * len(names)
        for phase, column in (("write", "write_seconds"), ("task commits", "task_commit_sum"),
                              ("job commit", "job_commit_seconds")):
            values = [commit["committers"][n][column] for n in names]
            ax.bar(names, values, bottom=bottoms, label=phase)
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        s = commit["sizes"]
        ax.set_ylabel("seconds")
        ax.set_title(f"{s['files']} files x {s['file_size'] // 1024} KiB, {s['tasks']} tasks ({results['profile']})")
        ax.tick_params(axis="x", labelrotation=15)  # the committers' names are long: side by side they overlap
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "commit-phases.png", dpi=120)
        plt.close(fig)
    for section, image in (("spark", "spark.png"), ("small-files", "small-files.png")):
        spark = results.get(section)
        if not spark or "skipped" in spark:
            continue
        names = [n for n, r in spark.items() if isinstance(r, dict) and "phases" in r]
        fig, ax = plt.subplots(figsize=(7, 4))
        tasks = [spark[n]["phases"]["tasks (write)"] for n in names]
        ax.bar(names, tasks, label="tasks (write)")
        ax.bar(names, [spark[n]["phases"]["job commit"] for n in names], bottom=tasks, label="job commit")
        ax.set_ylabel("seconds")
        ax.set_title(f"Spark write of {spark['rows']:,} rows in {spark['tasks']} tasks")
        ax.tick_params(axis="x", labelrotation=15)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / image, dpi=120)
        plt.close(fig)
    datapath = results.get("datapath")
    if datapath and "skipped" not in datapath:
        datapath_plot(datapath, out)
    if results.get("sidecar"):
        sidecar_plot(results["sidecar"], out)
    engines = results.get("engines")
    if engines and "shapes" in engines:
        from benchmarks.engines_bench import engines_plot

        engines_plot(engines, out)
    peers = results.get("peers")
    if peers and "skipped" not in peers:
        from benchmarks.peers_bench import peers_plot

        peers_plot(peers, out)
    scaling = results.get("scaling")
    if not scaling:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, points in scaling["files_curve"].items():
        if points:
            ax.plot([p["files"] for p in points], [p["seconds"] for p in points], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("files")
    ax.set_ylabel("job commit (s)")
    ax.set_title(f"Job commit against file count ({results['profile']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "scaling-files.png", dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 4))
    points = scaling["threads_curve"]
    threads = [p["threads"] for p in points]
    ax.plot(threads, [p["seconds"] for p in points], marker="o", label="magic job commit")
    ax.plot(threads, [p["bare_pool_seconds"] for p in points], marker="s", label="bare boto3 pool")
    ax.plot(threads, [p["bound_seconds"] for p in points], linestyle="--", label="bound (latency / threads)")
    if scaling.get("server_ceiling"):
        ax.axhline(scaling["server_ceiling"]["seconds"], color="grey", linestyle=":",
                   label="simulated S3's CPU ceiling")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("threads")
    ax.set_ylabel("seconds")
    ax.set_title("Job commit against threads")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "scaling-threads.png", dpi=120)
    plt.close(fig)
