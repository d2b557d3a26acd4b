"""The ``peers`` section: s3commit against Hadoop's S3A on the same simulated S3, in one run (issue 46).

Paths, each one Spark application (``local[2]``) in a process of its own (:mod:`benchmarks.peers_child`: a JVM
with S3A's jars never holds s3commit's sessions), all started at once and kept for the whole section:

- ``s3commit-magic``, ``s3commit-directory``: s3commit's committers and FileSystem (``s3commit.spark.configure``);
- ``s3a-magic`` (in-memory tracking off: a ``.pending`` object per file), ``s3a-magic-inmemory``
  (``fs.s3a.committer.magic.track.commits.in.memory.enabled``), ``s3a-directory``: S3A's committers through
  ``PathOutputCommitProtocol``;
- ``s3a-foc-v1``: Spark's default protocol with Hadoop's FileOutputCommitter (algorithm 1) over S3A's FileSystem;
- ``s3commit-magic-snapshot`` (the ``snap-*`` shapes only): ``s3commit-magic``'s application writing to a snapshot
  destination (issue 55): after the server is emptied the parent makes the empty destination one
  (``s3commit.enable_snapshots`` through an ``S3Store`` on the same server; its requests not counted), and the
  write appends (the default mode refuses a destination that exists: its log does). The job commits one log entry;
  the uploads are completed by the task commits (``s3commit.snapshot.complete-at-task-commit``, the default there).

Both FileSystems get the same part size, parts in flight per file (``fs.s3a.fast.upload.active.blocks``) and
committer threads; everything else is each one's default (both buffer parts on local disk by default). S3A's jars
are on the driver's class path (local mode), resolved once by :func:`testbed.s3a.s3a_jars`.

Shapes: the demo (``s3commit demo``'s DataFrame: 8 tasks x 4 days = 32 Parquet files), small files (10 tasks x 4
days = 40), a commit-heavy job (20 tasks x 100 days = 2,000), and, only when ``--peers-shapes`` names it,
``commit-10k`` (50 tasks x 200 days = 10,000 files of 10 rows: magic and directory of each side), each written
partitioned by ``day``; the snapshot comparison's shapes, only when named, each run by s3commit's magic committer to a
plain and to a snapshot destination and by S3A's magic committer (:data:`SNAPSHOT_SHAPES`: ``snap-100``, 10 tasks x
10 days; ``snap-1k``, 10 x 100; ``snap-10k``, 50 x 200; 10 rows a file; ``python -m benchmarks.snapshot_bench
--peers 100,1000`` runs them and plots them beside the engine's in-process job commits); and the data path:
8 files of 128 MiB written through the FileSystem API (``fs.create``, the bytes copied in the JVM from one local file
in the page cache, the file the bare clients upload; two files at a time from the driver: Spark's two slots) and read
back whole (``fs.open``), by s3commit's FileSystem and S3A's, beside boto3 with its defaults and awscrt's S3 client
(:mod:`benchmarks.clients`). The FileSystem API, not a DataFrame, so that the same bytes go through each FileSystem
with nothing else of Spark's in the way; each JVM also writes the same files to ``file://`` each round, whose CPU
is reported beside (what the harness and Hadoop's local FileSystem cost, for scale).

Each path is warmed up (an unmeasured write of the small shape, the demo's DataFrame to local disk, a file written
and read through the FileSystem), then every shape runs ``rounds`` rounds, each round every path once in an order
rotated by one more each round (:func:`benchmarks.datapath.round_order`). The server is emptied before each write.
The server validates part checksums as S3 does (``validate_checksums``: BadDigest on a mismatch), so s3commit's
sidecars, which probe the store, send a CRC32 with each part and skip the MD5 check of its ETag there, as on S3;
S3A sends no checksum by default (``fs.s3a.checksum.generation`` off in Hadoop 3.5.0), boto3 and awscrt a CRC32.
Per write: the whole write's seconds, the tasks' (Spark's status store) and the rest (the job commit: the driver's
work after the tasks), the requests by type at the server, bytes copied server-side, uploads left pending, the CPU of
the JVM (its JIT compilers left out) and of the s3commit sidecars, and that CPU per file. Reported: medians, and
paired ratios (the median over rounds of a path against the reference measured in the same round).
``--peers-shapes`` picks what runs and how many rounds (``commit-heavy:2,commit-10k:1``; ``datapath`` by name):
only the applications of the paths it needs start.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import clients
from benchmarks.datapath import round_order
from benchmarks.runs import paired_median

CHILD = Path(__file__).with_name("peers_child.py")
MARK = "@@peers "
PATHS = ("s3commit-magic", "s3commit-directory", "s3a-magic", "s3a-magic-inmemory", "s3a-directory", "s3a-foc-v1",
         "s3commit-magic-snapshot")
SNAPSHOT_PATHS = ("s3commit-magic-snapshot",)
"""Paths that write to a snapshot destination: only in a shape that names them (``paths``), the others leave them
out."""
REFERENCE = "s3a-magic"
"""The path every Spark shape's ratios compare against: S3A's magic committer as it is by default."""
LABELS = {"s3commit-magic": "s3commit magic", "s3commit-directory": "s3commit directory",
          "s3a-magic": "S3A magic", "s3a-magic-inmemory": "S3A magic, in-memory tracking",
          "s3a-directory": "S3A directory", "s3a-foc-v1": "FileOutputCommitter v1 on S3A",
          "s3commit-magic-snapshot": "s3commit magic, snapshot destination"}
DATA_PATHS = {"s3commit": "s3commit-magic", "s3a": "s3a-magic", "boto3": None, "crt": None}
"""The data path's entries: s3commit's FileSystem and S3A's (each in one of the Spark applications above: the
committer plays no part in the FileSystem API), boto3 with its defaults and awscrt's client (fresh processes)."""
SNAPSHOT_SHAPES = {100: "snap-100", 1000: "snap-1k", 10_000: "snap-10k"}
"""The snapshot comparison's shapes by files (issue 55): s3commit magic to a plain and to a snapshot destination, and
S3A magic (:data:`SNAPSHOT_COMPARED`)."""
SNAPSHOT_COMPARED = ["s3commit-magic", "s3commit-magic-snapshot", "s3a-magic"]
SHAPES = ("demo", "small", "commit-heavy", "commit-10k", *SNAPSHOT_SHAPES.values())
DEFAULT_SHAPES = ("demo", "small", "commit-heavy")
"""What runs unless ``--peers-shapes`` names shapes: ``commit-10k`` (10,000 files) takes some 40 minutes on moto."""
QUICK_SHAPES = ("demo", "commit-heavy")
"""A quick run's (a smoke test of the code): the small files are the demo's code path again, 8 files more."""
START_TIMEOUT = 300.0
COMMAND_TIMEOUT = 1800.0
SECONDS_PER_FILE_BOUND = 0.5
"""A write's answer is awaited ``COMMAND_TIMEOUT`` or this much per file, the longer (S3A's magic committer writes
about 8 files a second on the moto server here: 10,000 files take some 20 minutes)."""
MIB = 1 << 20


def peers_sizes(quick: bool, shapes: str | None = None) -> dict[str, Any]:
    """The shapes, the data path's files and the rounds.

    Full: three rounds of the demo, the small files and the data path; the commit-heavy job (2,000 files) once: S3A's
    magic committer writes its files at about 0.12 s each on this machine (12 requests per file, in its table):
    one round of every path takes about 8 minutes. FileOutputCommitter v1 (:data:`ONE_ROUND`) runs in the
    first round only, and not at all on the commit-heavy jobs (its job commit renames file after file: about 0.7 s a
    file measured on the others, some 22 minutes for 2,000). ``commit-10k`` (50 tasks x 200 days = 10,000 files of
    10 rows) runs only when named, once, magic and directory of s3commit and S3A; so do the snapshot comparison's
    (:data:`SNAPSHOT_SHAPES`: ``snap-100`` and ``snap-1k`` three rounds, ``snap-10k`` once). Quick (a smoke run):
    the demo and the commit-heavy job only (:data:`QUICK_SHAPES`), smaller, one round, no warm-up, C1 only in the
    JVMs; v1 on the demo only.

    ``shapes`` (``--peers-shapes``): comma-separated names among :data:`SHAPES` and ``datapath``, each optionally
    with its rounds (``commit-heavy:2,commit-10k:1``); ``none`` is the data path alone. Unset: the
    :data:`DEFAULT_SHAPES` and the data path."""
    sizes = _sizes(quick)
    sizes["datapath_runs"] = True
    if shapes is None:
        default = QUICK_SHAPES if quick else DEFAULT_SHAPES
        sizes["shapes"] = {name: spec for name, spec in sizes["shapes"].items() if name in default}
        return sizes
    chosen: dict[str, int | None] = {}
    for item in ([] if shapes.strip() == "none" else [s.strip() for s in shapes.split(",") if s.strip()]):
        name, _, rounds = item.partition(":")
        if rounds and not (rounds.isdigit() and int(rounds) > 0):
            raise ValueError(f"peers shape {item!r}: rounds must be a positive integer")
        chosen[name] = int(rounds) if rounds else None
    unknown = sorted(set(chosen) - {*SHAPES, "datapath"})
    if unknown:
        raise ValueError(f"unknown peers shapes {', '.join(unknown)}: choose from {', '.join(SHAPES)}, datapath "
                         "(each as NAME or NAME:ROUNDS), or none")
    sizes["shapes"] = {name: ({**spec, "rounds": chosen[name]} if chosen[name] else spec)
                       for name, spec in sizes["shapes"].items() if name in chosen}
    sizes["datapath_runs"] = shapes.strip() == "none" or "datapath" in chosen
    if chosen.get("datapath"):
        sizes["datapath_rounds"] = chosen["datapath"]
    return sizes


SCALE_SKIP = ("s3a-magic-inmemory", "s3a-foc-v1")
"""Paths left out of ``commit-10k``: magic and directory of each side run, S3A's in-memory tracking and v1 do not
(v1 would rename 10,000 files one after another for hours)."""


def shape_paths(spec: dict[str, Any], paths: tuple[str, ...] = PATHS) -> tuple[str, ...]:
    """The paths among ``paths`` that write a shape: those it names (``paths``), else all but the snapshot paths;
    less those it skips."""
    named, skip = spec.get("paths"), spec.get("skip", ())
    return tuple(p for p in paths if (p in named if named else p not in SNAPSHOT_PATHS) and p not in skip)


def _snapshot_shapes(rows_per_file: int) -> dict[str, dict[str, Any]]:
    sizes = {"snap-100": (10, 10, None), "snap-1k": (10, 100, None), "snap-10k": (50, 200, 1)}
    return {name: {"rows": rows_per_file * tasks * days, "tasks": tasks, "days": days, "paths": SNAPSHOT_COMPARED,
                   **({"rounds": rounds} if rounds else {})} for name, (tasks, days, rounds) in sizes.items()}


def _sizes(quick: bool) -> dict[str, Any]:
    if quick:
        return {"shapes": {"demo": {"rows": 20_000, "tasks": 8, "days": 4},
                           "small": {"rows": 400, "tasks": 10, "days": 4},
                           "commit-heavy": {"rows": 1_200, "tasks": 2, "days": 30, "skip": ["s3a-foc-v1"]},
                           "commit-10k": {"rows": 1_200, "tasks": 4, "days": 30, "skip": list(SCALE_SKIP)},
                           **_snapshot_shapes(4)},
                "datapath": {"files": 2, "mib": 12, "part_mib": 5}, "rounds": 1, "warm_up": False,
                "jvm_options": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    return {"shapes": {"demo": {"rows": 500_000, "tasks": 8, "days": 4},
                       "small": {"rows": 4_000, "tasks": 10, "days": 4},
                       "commit-heavy": {"rows": 20_000, "tasks": 20, "days": 100, "rounds": 1,
                                        "skip": ["s3a-foc-v1"]},
                       "commit-10k": {"rows": 100_000, "tasks": 50, "days": 200, "rounds": 1,
                                      "skip": list(SCALE_SKIP)},
                       **_snapshot_shapes(10)},
            "datapath": {"files": 8, "mib": 128, "part_mib": 32}, "rounds": 3, "warm_up": True, "jvm_options": ""}


def merge_earlier(peers: dict[str, Any], earlier: dict[str, Any] | None, earlier_date: str = "earlier"
                  ) -> dict[str, Any]:
    """A run of some shapes (``--peers-shapes``) completed with the earlier run's blocks of the others, each saying
    when it ran; the ratios computed again over the whole."""
    if "skipped" in peers or not earlier or "skipped" in earlier:
        return peers
    merged = dict(peers)
    ran = {shape: peers.get("started", "") for shape in (*SHAPES, "datapath") if shape in peers}
    for shape in (*SHAPES, "datapath"):
        if shape not in merged and shape in earlier:
            merged[shape] = earlier[shape]
            ran[shape] = earlier.get("ran", {}).get(shape, earlier.get("started", earlier_date))
    merged["ran"] = ran
    merged["ratios"] = ratios(merged)
    return merged


ONE_ROUND = ("s3a-foc-v1",)
"""Paths measured in the first round only: FileOutputCommitter v1 takes several times the others' time, its ratio
nowhere near a goal."""


class ChildApp:
    """One path's Spark application (:mod:`benchmarks.peers_child`), driven one command at a time."""

    def __init__(self, path: str, config: dict[str, Any], log: Path) -> None:
        self.path = path
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        self._log = log.open("w")
        self.process = subprocess.Popen([sys.executable, str(CHILD), json.dumps({**config, "path": path})],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                        env=env, cwd=log.parent)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.log = log

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(MARK):
                self._lines.put(line[len(MARK):])
        self._lines.put(None)

    def answer(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"{self.path}: no answer within {timeout:.0f} s (log {self.log})") from None
        if line is None:
            tail = self.log.read_text()[-3000:]
            raise RuntimeError(f"{self.path}: the application ended (exit {self.process.wait()}):\n{tail}")
        result: dict[str, Any] = json.loads(line)
        if not result.pop("ok"):
            raise RuntimeError(f"{self.path}: {result.get('error')}\n{result.get('trace', '')}")
        return result

    def call(self, op: str, *, timeout: float = COMMAND_TIMEOUT, **args: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        return self.answer(timeout)

    def close(self) -> None:
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.process.stdin.close()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self._log.close()


def unavailable() -> str | None:
    """Why the section cannot run here (no JDK, no PySpark, S3A's jars not resolvable), or None."""
    if shutil.which("java") is None:
        return "skipped: no JDK (java not found)"
    try:
        from testbed.s3a import S3AJarsError, s3a_jars
    except ModuleNotFoundError as err:
        return f"skipped: {err}"
    try:
        import pyspark  # noqa: F401

        s3a_jars()
    except (ModuleNotFoundError, S3AJarsError) as err:
        return f"skipped: S3A's jars cannot be resolved: {err}"
    return None


def _listing(client: Any, bucket: str, prefix: str) -> tuple[int, int, str]:
    """Data files and their bytes under ``prefix``, and which committer its ``_SUCCESS`` names."""
    files = size = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            if entry["Key"].endswith(".parquet") and "__magic" not in entry["Key"]:
                files, size = files + 1, size + entry["Size"]
    try:
        body = client.get_object(Bucket=bucket, Key=f"{prefix}_SUCCESS")["Body"].read()
    except client.exceptions.NoSuchKey:
        return files, size, "no _SUCCESS"
    if not body:
        return files, size, "FileOutputCommitter (0-byte _SUCCESS)"
    return files, size, str(json.loads(body).get("committer", "?"))


def snapshot_destination(server: Any, bucket: str) -> Any:
    """A function making ``s3a://bucket/<prefix>`` a snapshot destination (``s3commit.enable_snapshots`` through an
    ``S3Store`` on ``server``), the server's request counts reset after it: the enabling is not the write's."""
    import s3commit
    from s3commit.config.options import StoreOptions

    store = s3commit.S3Store(StoreOptions(endpoint_url=server.endpoint_url, region="us-east-1", path_style=True,
                                          access_key="testing", secret_key="testing"))

    def make(prefix: str) -> None:
        s3commit.enable_snapshots(f"s3a://{bucket}/{prefix.strip('/')}", store=store)
        server.reset_stats()

    return make


def _snapshot_entry(client: Any, bucket: str, prefix: str) -> dict[str, Any]:
    """What the destination's ``_SUCCESS`` says of its snapshot (``committer_snapshot``, its files)."""
    body = json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}_SUCCESS")["Body"].read())
    metrics = body.get("metrics", body)
    return {k: metrics[k] for k in ("committer_snapshot", "committer_snapshot_files") if k in metrics}


def _uploads_left(client: Any, bucket: str) -> int:
    return sum(len(page.get("Uploads", [])) for page in
               client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket))


def peers_runs(server: Any, bucket: str, *, sizes: dict[str, Any], workdir: str) -> dict[str, Any]:
    """The section on ``server`` (a bucket of its own, emptied before each write), or why it was skipped."""
    why = unavailable()
    if why:
        return {"skipped": why}
    bucket = f"{bucket}-peers"
    raw = server.client(raw=True)
    work = Path(workdir) / "peers"
    work.mkdir(parents=True, exist_ok=True)

    def fresh() -> None:
        server.reset()  # also the simulator's settings: validate_checksums again
        server.configure(validate_checksums=True)  # the server then probes itself again: its requests not counted
        server.create_bucket(bucket)
        server.reset_stats()

    fresh()
    data = sizes["datapath"]
    config = {"endpoint": server.endpoint_url, "part_mib": data["part_mib"], "active_blocks": 4, "threads": 32,
              "jvm_options": sizes["jvm_options"]}
    # the paths the chosen shapes write, and the two FileSystems' applications when the data path runs
    wanted = {p for spec in sizes["shapes"].values() for p in shape_paths(spec)}
    if sizes.get("datapath_runs", True):
        wanted |= {p for p in DATA_PATHS.values() if p}
    needed = tuple(p for p in PATHS if p in wanted)
    results: dict[str, Any] = {"sizes": sizes, "paths": list(needed), "labels": LABELS,
                               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "load_average_before": list(os.getloadavg()),
                               "settings": {"part_mib": data["part_mib"], "active_blocks": 4,
                                            "committer_threads": 32, "master": "local[2]"}}
    started = time.perf_counter()
    print(f"  peers: starting {len(needed)} Spark applications (one per path)", flush=True)
    apps = {path: ChildApp(path, config, work / f"{path}.log") for path in needed}
    snapshot = snapshot_destination(server, bucket) if set(needed) & set(SNAPSHOT_PATHS) else None
    try:
        results["jvm_pids"] = {path: app.answer(START_TIMEOUT)["jvm_pid"] for path, app in apps.items()}
        results["start_seconds"] = time.perf_counter() - started
        print(f"  peers: started in {results['start_seconds']:.0f} s", flush=True)
        shapes = {**peers_sizes(False)["shapes"], **sizes["shapes"]}  # the warm-up's, when a run leaves them out
        warm = {"bucket": bucket, "shape": shapes["small"], "local_shape": shapes["demo"],
                "local_dir": str(work / "local"), "fs_mib": 3 * data["part_mib"]}
        results["warm_up_seconds"] = {}
        for path, app in apps.items() if sizes["warm_up"] else ():
            print(f"  peers: warm-up of {path}", flush=True)
            fresh()
            if path in SNAPSHOT_PATHS and snapshot is not None:  # the snapshot code warmed up too
                snapshot(f"warm-up/{path}/table")
            results["warm_up_seconds"][path] = app.call("warm_up", warm=warm)["seconds"]
            print(f"    {results['warm_up_seconds'][path]:.1f} s", flush=True)
        for shape in (s for s in SHAPES if s in sizes["shapes"]):
            spec = sizes["shapes"][shape]
            results[shape] = _shape_runs(apps, server, raw, bucket, fresh, shape, spec,
                                         spec.get("rounds", sizes["rounds"]), snapshot)
        if sizes.get("datapath_runs", True):
            results["datapath"] = _datapath_runs(apps, server, raw, bucket, fresh, data,
                                                 sizes.get("datapath_rounds", sizes["rounds"]), work)
    finally:
        for app in apps.values():
            app.close()
    results["load_average_after"] = list(os.getloadavg())
    results["seconds"] = time.perf_counter() - started
    results["ratios"] = ratios(results)
    return results


def _shape_runs(apps: dict[str, ChildApp], server: Any, raw: Any, bucket: str, fresh: Any, shape: str,
                spec: dict[str, Any], rounds: int, snapshot: Any = None) -> dict[str, Any]:
    paths = shape_paths(spec, tuple(apps))
    runs: dict[str, list[dict[str, Any]]] = {path: [] for path in paths}
    for number in range(1, rounds + 1):
        for path in round_order(paths, number):
            if path in ONE_ROUND and number > 1:
                continue
            print(f"  peers: {shape} ({spec['tasks']} tasks x {spec['days']} days), round {number} of {rounds}: "
                  f"{path}", flush=True)
            fresh()
            prefix = f"{shape}/{path}/"
            if path in SNAPSHOT_PATHS:
                snapshot(prefix)
            shape_spec = {k: spec[k] for k in ("rows", "tasks", "days")}
            files = spec["tasks"] * spec["days"]
            run = apps[path].call("write", shape=shape_spec, dest=f"s3a://{bucket}/{prefix.rstrip('/')}",
                                  description=f"peers-{shape}-{path}-{number}",
                                  timeout=max(COMMAND_TIMEOUT, files * SECONDS_PER_FILE_BOUND))
            print(f"    {run['seconds']:.2f} s (tasks {run['task_phase_seconds']:.2f} s, outside them "
                  f"{run['job_commit_seconds']:.2f} s, Spark's job commit time "
                  f"{run.get('spark_job_commit_seconds', -1.0):.3f} s; CPU JVM {run['jvm_cpu_seconds']:.2f} s, "
                  f"sidecars {run['sidecar_cpu_seconds']:.2f} s)", flush=True)
            stats = server.stats()
            run.update(requests=dict(stats.requests), copy_bytes=stats.copy_bytes, round=number,
                       total_requests=sum(stats.requests.values()))
            run["files"], run["bytes"], run["committer"] = _listing(raw, bucket, prefix)
            run["uploads_left"] = _uploads_left(raw, bucket)
            if path in SNAPSHOT_PATHS:
                run.update(_snapshot_entry(raw, bucket, prefix))
            runs[path].append(run)
    return {"spec": spec, "runs": runs, "medians": {path: _medians(r) for path, r in runs.items()}}


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number's median over the rounds (requests: each operation's), the rest from the first round."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in runs)
    out["requests"] = {op: statistics.median(r["requests"].get(op, 0) for r in runs)
                       for op in sorted({op for r in runs for op in r["requests"]})}
    if "uploads_left" in runs[0]:
        out["uploads_left"] = max(r["uploads_left"] for r in runs)
    out["round_seconds"] = [r["seconds"] for r in runs]
    return out


def _datapath_runs(apps: dict[str, ChildApp], server: Any, raw: Any, bucket: str, fresh: Any, data: dict[str, Any],
                   rounds: int, work: Path) -> dict[str, Any]:
    files, mib = data["files"], data["mib"]
    size = mib * MIB
    entries = tuple(e for e in DATA_PATHS if e != "crt" or clients.crt_available())
    local_file = clients.write_file(str(work / "bare-data"), size)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {e: {"write": [], "read": []} for e in entries}
    endpoint = server.endpoint_url
    try:
        for number in range(1, rounds + 1):
            for entry in round_order(entries, number):
                print(f"  peers: data path ({files} x {mib} MiB), round {number} of {rounds}: {entry}", flush=True)
                fresh()
                prefix = f"data/{entry}"
                measured = {}
                for phase in ("write", "read"):
                    server.reset_stats()
                    app = apps.get(DATA_PATHS[entry] or "")
                    if app is not None:
                        source = {"source": local_file} if phase == "write" else {}
                        run = app.call(f"fs_{phase}", prefix=f"s3a://{bucket}/{prefix}", files=files, mib=mib,
                                       threads=2, **source)
                    else:
                        name = f"{'default' if entry == 'boto3' else 'crt'}_{phase}"
                        source = local_file if phase == "write" else size
                        run = clients.in_child(name, endpoint, bucket, prefix, files, source, 2)
                        run = {"seconds": run["seconds"], "client_cpu_seconds": run["cpu_seconds"]}
                    stats = server.stats()
                    run.update(requests=dict(stats.requests), total_requests=sum(stats.requests.values()),
                               copy_bytes=stats.copy_bytes, round=number,
                               max_in_flight=stats.max_in_flight.get("UploadPart" if phase == "write"
                                                                     else "GetObject", 0))
                    print(f"    {phase} {run['seconds']:.2f} s", flush=True)
                    if phase == "write":
                        run["uploads_left"] = _uploads_left(raw, bucket)
                    measured[phase] = run
                app = apps.get(DATA_PATHS[entry] or "")
                if app is not None:  # the harness's own cost: the same files through the JVM to local disk
                    local = work / f"local-fs-{entry}"
                    run = app.call("fs_write", prefix=local.as_uri(), files=files, mib=mib, threads=2,
                                   source=local_file)
                    shutil.rmtree(local, ignore_errors=True)
                    measured["write"]["file_jvm_cpu_seconds"] = run["jvm_cpu_seconds"]
                    measured["write"]["file_seconds"] = run["seconds"]
                    print(f"    the same to file:// {run['seconds']:.2f} s, JVM CPU {run['jvm_cpu_seconds']:.2f} s",
                          flush=True)
                for phase, run in measured.items():
                    runs[entry][phase].append(run)
    finally:
        os.unlink(local_file)
    medians = {e: {phase: _medians(r) for phase, r in phases.items()} for e, phases in runs.items()}
    return {"files": files, "mib": mib, "gib": files * size / (1 << 30), "part_mib": data["part_mib"],
            "runs": runs, "medians": medians}


def _cpu(run: dict[str, Any]) -> float:
    """A run's CPU on the client side: the JVM and its sidecars (a FileSystem), or the bare client's process."""
    if "client_cpu_seconds" in run:
        return float(run["client_cpu_seconds"])
    return float(run["jvm_cpu_seconds"] + run["sidecar_cpu_seconds"])


def ratios(results: dict[str, Any]) -> dict[str, float]:
    """Paired ratios (each round's run against the reference's run of the same round, the median over rounds)."""
    out: dict[str, float] = {}
    for shape in (s for s in SHAPES if s in results):
        runs = results[shape]["runs"]
        for path in runs:
            key = f"{shape}_{path}".replace("-", "_")
            for figure, column in (("whole", "seconds"), ("job_commit", "job_commit_seconds"),
                                   ("tasks", "task_phase_seconds")):
                for reference in (REFERENCE, "s3a-magic-inmemory", *(["s3commit-magic"] * (path in SNAPSHOT_PATHS))):
                    if path == reference or reference not in runs:
                        continue
                    # each run against the reference's run of the same round
                    base = {r["round"]: max(1e-6, r[column]) for r in runs[reference]}
                    out[f"{key}_{figure}_over_{reference.replace('-', '_')}"] = paired_median(
                        [r[column] for r in runs[path]], [base[r["round"]] for r in runs[path]])
            median = results[shape]["medians"][path]
            out[f"{key}_requests_per_file"] = median["total_requests"] / max(1, median["files"])
            files = max(1, median["files"])
            out[f"{key}_jvm_cpu_ms_per_file"] = 1000 * median["jvm_cpu_seconds"] / files
            out[f"{key}_sidecar_cpu_ms_per_file"] = 1000 * median["sidecar_cpu_seconds"] / files
    if "datapath" not in results:
        return out
    data = results["datapath"]
    runs, gib = data["runs"], data["gib"]
    for phase in ("write", "read"):
        fastest = [min(pair) for pair in zip(*([r["seconds"] for r in runs[e][phase]] for e in ("s3a", "crt")
                                               if e in runs), strict=True)]
        for entry in runs:
            out[f"datapath_{phase}_{entry}_over_fastest_of_s3a_crt"] = paired_median(
                [r["seconds"] for r in runs[entry][phase]], fastest)
            out[f"datapath_{phase}_{entry}_cpu_per_gib"] = statistics.median(_cpu(r) for r in runs[entry][phase]) / gib
            out[f"datapath_{phase}_{entry}_requests"] = data["medians"][entry][phase]["total_requests"]
        if phase == "write":  # the same JVM writing the same files to file:// (the harness, Hadoop's local FS)
            for entry in ("s3commit", "s3a"):
                if entry in runs and all("file_jvm_cpu_seconds" in r for r in runs[entry]["write"]):
                    out[f"datapath_write_{entry}_file_jvm_cpu_per_gib"] = statistics.median(
                        r["file_jvm_cpu_seconds"] for r in runs[entry]["write"]) / gib
        s3c = data["medians"]["s3commit"][phase]
        out[f"datapath_{phase}_s3commit_jvm_cpu_per_gib"] = s3c["jvm_cpu_seconds"] / gib
        out[f"datapath_{phase}_s3commit_sidecar_cpu_per_gib"] = s3c["sidecar_cpu_seconds"] / gib
        out[f"datapath_{phase}_s3commit_cpu_over_s3a_jvm"] = (out[f"datapath_{phase}_s3commit_cpu_per_gib"]
                                                              / max(1e-9, out[f"datapath_{phase}_s3a_cpu_per_gib"]))
        out[f"datapath_{phase}_s3commit_over_s3a"] = paired_median(
            [r["seconds"] for r in runs["s3commit"][phase]], [r["seconds"] for r in runs["s3a"][phase]])
    return out


# --- the report --------------------------------------------------------------------------------------------------

def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _ops(requests: dict[str, float]) -> str:
    short = {"CreateMultipartUpload": "Create", "CompleteMultipartUpload": "Complete", "UploadPart": "Part",
             "ListObjectsV2": "List", "HeadObject": "Head", "PutObject": "Put", "GetObject": "Get",
             "DeleteObject": "Delete", "DeleteObjects": "DeleteObjects", "CopyObject": "Copy",
             "AbortMultipartUpload": "Abort", "ListMultipartUploads": "ListUploads"}
    return ", ".join(f"{short.get(op, op)} {n:g}" for op, n in sorted(requests.items()) if n) or "none"


def peers_markdown(peers: dict[str, Any]) -> list[str]:
    title = "## Peers: s3commit against S3A on the same simulated S3"
    if "skipped" in peers:
        return [title, "", peers["skipped"], ""]
    r, s = peers["ratios"], peers["settings"]
    lines = [title, "", "Each path once a round, in an order rotated each round; medians, and paired ratios "
             f"(each round against {LABELS[REFERENCE]}'s same round). `{s['master']}`, parts of {s['part_mib']} MiB, "
             f"{s['active_blocks']} in flight per file, {s['committer_threads']} committer threads on both "
             f"FileSystems. Load average {peers['load_average_before'][0]:.1f} at the start, "
             f"{peers['load_average_after'][0]:.1f} at the end; {peers['seconds']:.0f} s.", ""]
    for shape in (s for s in SHAPES if s in peers):
        block = peers[shape]
        spec, medians = block["spec"], block["medians"]
        rounds = max(len(runs) for runs in block["runs"].values())
        when = peers.get("ran", {}).get(shape)
        lines += [f"### {shape}: {spec['rows']:,} rows, {spec['tasks']} tasks x {spec['days']} days, {rounds} "
                  "round(s)" + "".join(f"; {LABELS[p]} not run" for p in spec.get("skip", ()))
                  + (f" (ran {when})" if when else ""), "",
                  _row(["path", "tasks s", "job commit s (paired ratio)", "whole s (paired ratio)", "files",
                        "requests / file", "requests", "bytes copied", "uploads left", "JVM + sidecar CPU s",
                        "CPU ms / file, JVM + sidecar", "_SUCCESS"]), _row(["---"] * 12)]
        for path in medians:
            m = medians[path]
            key = f"{shape}_{path}".replace("-", "_")
            job = r.get(f"{key}_job_commit_over_s3a_magic")
            whole = r.get(f"{key}_whole_over_s3a_magic")
            lines.append(_row([
                LABELS[path], f"{m['task_phase_seconds']:.2f}",
                f"{m['job_commit_seconds']:.2f}" + (f" ({job:.2f}x)" if job is not None else ""),
                f"{m['seconds']:.2f}" + (f" ({whole:.2f}x)" if whole is not None else ""), f"{m['files']:g}",
                f"{r[f'{key}_requests_per_file']:.2f}", _ops(m["requests"]), f"{m['copy_bytes']:,.0f}",
                m["uploads_left"], f"{m['jvm_cpu_seconds']:.2f} + {m['sidecar_cpu_seconds']:.2f}",
                f"{1000 * m['jvm_cpu_seconds'] / max(1, m['files']):.2f} + "
                f"{1000 * m['sidecar_cpu_seconds'] / max(1, m['files']):.2f}", m["committer"]]))
        lines += ["", "Whole write by round: " + "; ".join(
            f"{path} " + ", ".join(f"{x:.2f}" for x in medians[path]["round_seconds"]) for path in medians), ""]
    if "datapath" not in peers:
        return [*lines, "The data path was not run (`--peers-shapes` did not name it).", ""]
    data = peers["datapath"]
    lines += [f"### Data path: {data['files']} x {data['mib']} MiB through the FileSystem API (2 at a time), then "
              "read back", "",
              _row(["path", "write s (paired / fastest of S3A, awscrt)", "read s (paired / fastest)",
                    "write CPU s/GiB", "read CPU s/GiB", "write requests", "read requests", "uploads left"]),
              _row(["---"] * 8)]
    names = {"s3commit": "s3commit FileSystem (JVM + sidecar)", "s3a": "S3A FileSystem (JVM)",
             "boto3": "boto3, defaults", "crt": "awscrt S3 client"}
    for entry, phases in data["medians"].items():
        w, rd = phases["write"], phases["read"]
        lines.append(_row([
            names[entry],
            f"{w['seconds']:.2f} ({r[f'datapath_write_{entry}_over_fastest_of_s3a_crt']:.2f}x)",
            f"{rd['seconds']:.2f} ({r[f'datapath_read_{entry}_over_fastest_of_s3a_crt']:.2f}x)",
            f"{r[f'datapath_write_{entry}_cpu_per_gib']:.2f}", f"{r[f'datapath_read_{entry}_cpu_per_gib']:.2f}",
            _ops(w["requests"]), _ops(rd["requests"]), w.get("uploads_left", 0)]))
    cpu = {phase: (f"{r[f'datapath_{phase}_s3commit_jvm_cpu_per_gib']:.2f} + "
                   f"{r[f'datapath_{phase}_s3commit_sidecar_cpu_per_gib']:.2f}") for phase in ("write", "read")}
    lines += ["", f"s3commit's CPU per GiB, JVM + sidecar: write {cpu['write']}, read {cpu['read']}; against S3A's "
              f"JVM: write {r['datapath_write_s3commit_cpu_over_s3a_jvm']:.2f}x, read "
              f"{r['datapath_read_s3commit_cpu_over_s3a_jvm']:.2f}x." + (
                  " The same JVMs writing the same files to file:// (the harness: the local file read, Hadoop's "
                  f"local FileSystem and its checksums, the page cache): s3commit's "
                  f"{r['datapath_write_s3commit_file_jvm_cpu_per_gib']:.2f}, S3A's "
                  f"{r['datapath_write_s3a_file_jvm_cpu_per_gib']:.2f} s/GiB."
                  if "datapath_write_s3a_file_jvm_cpu_per_gib" in r else ""),
              "", "Each round, seconds (write / read): " + "; ".join(
                  f"{entry} " + ", ".join(f"{w['seconds']:.2f}/{rd['seconds']:.2f}"
                                          for w, rd in zip(data["runs"][entry]["write"], data["runs"][entry]["read"],
                                                           strict=True))
                  for entry in data["runs"]), ""]
    return lines


def peers_plot(peers: dict[str, Any], out: Path) -> None:
    """``peers.png``: each shape's tasks and job commit per path; the data path's write and read seconds."""
    import matplotlib.pyplot as plt

    shapes = [s for s in SHAPES if s in peers]
    fig, axes = plt.subplots(1, len(shapes) + ("datapath" in peers), figsize=(4 * len(shapes) + 4, 4.5), squeeze=False)
    axes = axes[0]
    for ax, shape in zip(axes, shapes, strict=False):
        medians = peers[shape]["medians"]
        paths = list(medians)
        names = [LABELS[p].replace(", ", ",\n").replace(" on S3A", "\non S3A") for p in paths]
        tasks = [medians[p]["task_phase_seconds"] for p in paths]
        ax.bar(names, tasks, label="tasks")
        ax.bar(names, [medians[p]["job_commit_seconds"] for p in paths], bottom=tasks, label="job commit")
        files = next(iter(medians.values()))["files"]
        ax.set_title(f"{shape} ({files:g} files)")
        ax.set_ylabel("seconds (median)")
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
        ax.legend(fontsize=7)
    data = peers.get("datapath")
    if data is None:
        fig.tight_layout()
        fig.savefig(out / "peers.png", dpi=110)
        plt.close(fig)
        return
    entries = list(data["medians"])
    ax = axes[-1]
    xs = range(len(entries))
    ax.bar([x - 0.2 for x in xs], [data["medians"][e]["write"]["seconds"] for e in entries], width=0.4, label="write")
    ax.bar([x + 0.2 for x in xs], [data["medians"][e]["read"]["seconds"] for e in entries], width=0.4, label="read")
    ax.set_xticks(list(xs), entries)
    ax.set_title(f"data path ({data['files']} x {data['mib']} MiB)")
    ax.set_ylabel("seconds (median)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "peers.png", dpi=110)
    plt.close(fig)
