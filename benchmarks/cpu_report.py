"""The data path's tables and plots: the ``datapath`` section (Spark through ``s3a://`` against bare clients) and the
``sidecar`` section (the sidecar's CPU and GIL per GiB, on moto and SeaweedFS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATAPATH_LABELS = ("magic", "directory", "FileOutputCommitter-v1")
BARE = {"bare": "bare boto3 (defaults: the reference)", "bare-tuned": "bare boto3 (tuned as s3a is)",
        "crt": "awscrt's S3 client (native)"}
CLIENTS = {"sidecar": "the sidecar", "boto3": "bare boto3 (defaults)",
           "boto3-no-crt": "bare boto3 (defaults, awscrt not installed)", "crt": "awscrt's S3 client"}


def _cells(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _load_average(section: dict[str, Any]) -> str:
    before, after = section.get("load_average_before"), section.get("load_average_after")
    if not before or not after:
        return ""
    return (f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.1f}' for x in before)}; after: "
            f"{', '.join(f'{x:.1f}' for x in after)} (2 cores).")


def _gil_lines(gil: dict[str, Any], where: str) -> list[str]:
    if not gil:
        return []
    lines = [f"GIL-held time in the sidecar ({where}; py-spy --gil, scaled by the share of its runnable time the "
             "sidecar's threads ran):", "",
             _cells(["phase", "GIL held s (wall)", "on-CPU share", "GIL held CPU s per GiB", "ceiling GiB/s",
                     "ceiling from the wall time (this load)", "where (innermost s3commit frame: samples)"]),
             _cells(["---"] * 7)]
    for phase, g in gil.items():
        ceiling = g.get("ceiling_gib_per_second")
        ranked = sorted(g.get("where", {}).items(), key=lambda item: -item[1])
        places = ", ".join(f"{name} {count}" for name, count in ranked[:4])
        wall = g.get("wall_ceiling_gib_per_second")
        lines.append(_cells([phase, f"{g['gil_held_seconds']:.2f}", f"{g['on_cpu_share']:.2f}",
                             f"{g['gil_held_cpu_per_gib']:.3f}", f"{ceiling:.1f}" if ceiling else "-",
                             f"{wall:.1f}" if wall else "-", places]))
    return [*lines, ""]


def _round_seconds(run: dict[str, Any]) -> str:
    return ", ".join(f"{s:.2f}" for s in run.get("round_seconds", [run["seconds"]]))


def _server_cpu(run: dict[str, Any], gib: float) -> str:
    """The simulated store's CPU per GiB for a write and a read (moto and its proxy: one Python process)."""
    if "server_cpu_seconds" not in run["write"]:
        return ""
    return f"{run['write']['server_cpu_seconds'] / gib:.2f}, {run['read']['server_cpu_seconds'] / gib:.2f}"


def datapath_markdown(dp: dict[str, Any], title: str = "Data path") -> list[str]:
    mib, gib = dp["files"] * dp["file_mib"], dp["gib"]
    bare = dp["bare"]
    lines = [f"## {title}: {dp['files']} files x {dp['file_mib']} MiB through s3a://, parts of {dp['part_mib']} MiB,"
             f" {dp['in_flight']} in flight per file, {dp['slots']} at a time", "",
             _cells(["path", "write s", "write MiB/s", "write / bare", "task phase s", "job commit s", "read s",
                   "read MiB/s", "read / bare", "CPU s per GiB (write, read)", "JVM beyond file:// s per GiB",
                   "server CPU s per GiB", "parts / GETs in flight", "bytes copied"]), _cells(["---"] * 14)]
    for name, title in BARE.items():
        r = dp.get(name)
        if not r:
            continue
        lines.append(_cells([title, f"{r['write']['seconds']:.2f}", f"{mib / r['write']['seconds']:.0f}",
                           f"{r['write']['seconds'] / bare['write']['seconds']:.2f}", "", "",
                           f"{r['read']['seconds']:.2f}", f"{mib / r['read']['seconds']:.0f}",
                           f"{r['read']['seconds'] / bare['read']['seconds']:.2f}",
                           f"{r['write']['cpu_seconds'] / gib:.2f}, {r['read']['cpu_seconds'] / gib:.2f} (its own)", "",
                           _server_cpu(r, gib),
                           f"{r['write'].get('max_parts_in_flight', '')} / {r['read'].get('max_gets_in_flight', '')}",
                           0]))
    ratios = dp["ratios"]
    for label in DATAPATH_LABELS:
        r = dp.get(label)
        if not r:
            continue
        w, rd = r["write"], r["read"]
        key = label.lower().replace("fileoutputcommitter-", "foc_")
        jvm = (f"{ratios[f'jvm_overhead_cpu_per_gib_write_{key}']:.2f}, "
               f"{ratios[f'jvm_overhead_cpu_per_gib_read_{key}']:.2f}"
               if f"jvm_overhead_cpu_per_gib_write_{key}" in ratios else "")
        lines.append(_cells([label, f"{w['seconds']:.2f}", f"{mib / w['seconds']:.0f}",
                           f"{w['seconds'] / bare['write']['seconds']:.2f}", f"{w['task_phase_seconds']:.2f}",
                           f"{w['job_commit_seconds']:.2f}", f"{rd['seconds']:.2f}", f"{mib / rd['seconds']:.0f}",
                           f"{rd['seconds'] / bare['read']['seconds']:.2f}",
                           f"{w['sidecar_cpu_seconds'] / gib:.2f}, {rd['sidecar_cpu_seconds'] / gib:.2f} (sidecar)",
                           jvm, _server_cpu(r, gib), f"{w['max_parts_in_flight']} / {rd['max_gets_in_flight']}",
                           w["copy_bytes"]]))
    rounds = dp.get("rounds", 1)
    if rounds > 1:
        lines += ["", f"Every figure is the median of {rounds} rounds (each path in turn, then again, each round "
                  "in an order rotated by one: the bare clients first in round 1, last in round 2...; "
                  "FileOutputCommitter-v1 in the first only; the `_paired` ratios are the median of each round's "
                  "ratio to the bare client's same round). Each round's "
                  "write and read, seconds: " + "; ".join(
                      f"{name} {_round_seconds(dp[name]['write'])} / {_round_seconds(dp[name]['read'])}"
                      for name in (*BARE, *DATAPATH_LABELS) if name in dp) + "."]
    lines += ["", f"The sidecar's peak memory (VmHWM): {dp.get('sidecar_peak_bytes', 0) / 1e6:.0f} MB."]
    local = dp.get("local_disk")
    if local:
        jvm = (f" (the JVM's CPU: {local['write_jvm_cpu_seconds'] / gib:.2f} and "
               f"{local['read_jvm_cpu_seconds'] / gib:.2f} s per GiB, Hadoop's CRC32 of local files included)"
               if "write_jvm_cpu_seconds" in local else "")
        lines += ["The same Spark job on local disk (file://, Spark's own cost): write "
                  f"{local['write_seconds']:.2f} s, read {local['read_seconds']:.2f} s{jvm}."]
    marginal = dp.get("jvm_marginal")
    if marginal:
        lines += ["", f"The JVM's CPU that s3a:// adds to each byte, beyond file://'s (magic; per GiB moved between "
                  f"files of 1 MiB and of {dp['file_mib']} MiB, so that per-job and per-file costs cancel): write "
                  f"**{marginal['write_cpu_per_gib']:.2f}** s per GiB, read **{marginal['read_cpu_per_gib']:.2f}**."]
    lines += ["", *_gil_lines(dp.get("gil", {}), "a magic write and read of the same files"), _load_average(dp), "",
              "Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items()), ""]
    return lines


def datapath_plot(dp: dict[str, Any], out: Path) -> None:
    import matplotlib.pyplot as plt

    mib, gib = dp["files"] * dp["file_mib"], dp["gib"]
    names = [*[n for n in BARE if n in dp], *[label for label in DATAPATH_LABELS if label in dp]]
    runs = [dp[n] for n in names]
    fig, (speed, cpu) = plt.subplots(1, 2, figsize=(13, 4.5))
    x = range(len(names))
    speed.bar([i - 0.2 for i in x], [mib / r["write"]["seconds"] for r in runs], width=0.4, label="write")
    speed.bar([i + 0.2 for i in x], [mib / r["read"]["seconds"] for r in runs], width=0.4, label="read")
    speed.set_xticks(list(x), names, rotation=20)
    speed.set_ylabel("MiB/s")
    speed.set_title(f"{dp['files']} x {dp['file_mib']} MiB through s3a:// and bare clients")
    speed.legend()

    def cpu_of(name: str, phase: str) -> float:
        r = dp[name][phase]
        return (r["cpu_seconds"] if "cpu_seconds" in r else r["sidecar_cpu_seconds"]) / gib

    def jvm_of(name: str, phase: str) -> float:
        key = name.lower().replace("fileoutputcommitter-", "foc_")
        return max(0.0, dp["ratios"].get(f"jvm_overhead_cpu_per_gib_{phase}_{key}", 0.0))

    for offset, phase in ((-0.2, "write"), (0.2, "read")):
        own = [cpu_of(n, phase) for n in names]
        cpu.bar([i + offset for i in x], own, width=0.4, label=f"{phase}: client or sidecar")
        cpu.bar([i + offset for i in x], [jvm_of(n, phase) for n in names], width=0.4, bottom=own, hatch="//",
                alpha=0.5, label=f"{phase}: JVM beyond file://")
    cpu.set_xticks(list(x), names, rotation=20)
    cpu.set_ylabel("CPU s per GiB")
    cpu.set_title("CPU per GiB: bare clients' own, the sidecar's, the JVM's extra")
    cpu.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "datapath.png", dpi=120)
    plt.close(fig)


def sidecar_markdown(section: dict[str, Any]) -> list[str]:
    s = section["sizes"]
    lines = [f"## The sidecar's CPU and GIL per GiB: {s['tasks']} tasks x {s['files']} files x {s['file_mib']} MiB, "
             f"parts of {s['part_mib']} MiB, {s['rounds']} rounds", ""]
    for server in ("moto", "seaweedfs"):
        r = section.get(server)
        if not r:
            continue
        lines += [f"### {server}", "", _cells(["client", "write CPU s per GiB (median; rounds)", "read CPU s per GiB",
                                             "write s", "read s"]), _cells(["---"] * 5)]
        for name, title in CLIENTS.items():
            cpu = r["cpu_per_gib"].get(name, {})
            if not cpu or not cpu.get("write"):
                continue
            median = r["median_cpu_per_gib"][name]
            lines.append(_cells([title, f"**{median['write']:.2f}** ({', '.join(f'{v:.2f}' for v in cpu['write'])})",
                               f"**{median['read']:.2f}** ({', '.join(f'{v:.2f}' for v in cpu['read'])})",
                               ", ".join(f"{v:.1f}" for v in r["seconds"][name]["write"]),
                               ", ".join(f"{v:.1f}" for v in r["seconds"][name]["read"])]))
        lines += ["", "Ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in r["ratios"].items()), ""]
        lines += _gil_lines(r.get("gil", {}), "the same write and read once more")
        if r.get("concurrency"):
            lines += ["Concurrent tasks:", "", _cells(["tasks", "write MiB/s", "write CPU s per GiB", "read MiB/s",
                                                     "read CPU s per GiB"]), _cells(["---"] * 5)]
            for c in r["concurrency"]:
                lines.append(_cells([c["tasks"], f"{c['write']['mib_per_second']:.0f}",
                                   f"{c['write']['cpu_per_gib']:.2f}", f"{c['read']['mib_per_second']:.0f}",
                                   f"{c['read']['cpu_per_gib']:.2f}"]))
            lines.append("")
    return [*lines, _load_average(section), ""]


def sidecar_plot(section: dict[str, Any], out: Path) -> None:
    import matplotlib.pyplot as plt

    servers = [name for name in ("moto", "seaweedfs") if section.get(name)]
    fig, axes = plt.subplots(1, len(servers) + 1, figsize=(5 * (len(servers) + 1), 4))
    for ax, server in zip(axes, servers, strict=False):
        medians = section[server]["median_cpu_per_gib"]
        names = [n for n in CLIENTS if medians.get(n)]
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [medians[n]["write"] for n in names], width=0.4, label="write")
        ax.bar([i + 0.2 for i in x], [medians[n]["read"] for n in names], width=0.4, label="read")
        ax.set_xticks(list(x), [CLIENTS[n] for n in names], rotation=15, fontsize=8)
        ax.set_ylabel("CPU s per GiB")
        ax.set_title(f"{server}: CPU per GiB moved")
        ax.legend()
    ax = axes[-1]
    for server in servers:
        rows = section[server].get("concurrency") or []
        for phase, marker in (("write", "o"), ("read", "s")):
            ax.plot([r["tasks"] for r in rows], [r[phase]["mib_per_second"] for r in rows], marker=marker,
                    label=f"{server} {phase}")
    ax.set_xlabel("concurrent tasks")
    ax.set_ylabel("MiB/s through one sidecar")
    ax.set_title("Throughput against concurrent tasks")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "sidecar.png", dpi=120)
    plt.close(fig)
