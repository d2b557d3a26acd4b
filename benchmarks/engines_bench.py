"""Python engines: each engine's committed write (s3commit.arrow, s3commit.dask) against the engine's own uncommitted
writer of the same data to the same simulated S3 (pyarrow's ``S3FileSystem``, C++), at the shapes users write:

- ``one column, 20 x 10 MiB``: the old shape (one float column family, 20 files of 10 MiB; kept as one row);
- ``16 partitions``: 4,000,000 rows (an int64 id, a ``day`` string of 16 values, a float64, a 57-character string),
  hive-partitioned by ``day`` into 16 Parquet files (about 290 MiB);
- ``1 GiB, one file``: 13,000,000 such rows unpartitioned (one large file, many parts);
- ``200 partitions``: 400,000 rows in 200 hive partitions (small files);
- Dask: the 16-partition table as a frame of 8 partitions on a ``distributed`` cluster of 2 worker processes,
  ``to_parquet(partition_on=["day"])`` through pyarrow's filesystem against ``s3commit.dask.to_parquet``;
- Ray (where installed): the same table as 8 blocks on a local Ray of 2 CPUs, Ray Data's ``write_parquet``
  through pyarrow's filesystem against ``write_datasink(s3commit.ray.CommitDatasink(...))``.

Each write runs ``overwrite`` (pyarrow ``existing_data_behavior="delete_matching"``) and, for the 16 and 200 partitions
and the 1 GiB file, ``append`` too (pyarrow with new file names each round). Rounds are interleaved, each in the other
order, after a warm-up of every path (a quick run: one round, no warm-up); medians, the ratio of medians and the
paired ratio (the median of each round's ratio), the writing processes' CPU (this process for pyarrow and
s3commit.arrow; the workers' and this one's for Dask; every process Ray started and this one for Ray) and CPU per GiB
written. The server validates checksums as S3 does (``validate_checksums``), so s3commit sends its default checksum
(CRC32C where awscrt is installed, else CRC32) with every part and skips the MD5 check of its ETag; one more row gives
s3commit.arrow with that check forced (``verify_etag=True``: what a store that ignores checksums, such as moto,
costs), and the cost of a Dask job that fails once and is run again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.runs import paired_median
from s3commit.config.options import StoreOptions
from s3commit.store.s3store import S3Store

GIB = 1 << 30


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _table(rows: int, partitions: int, seed: int = 0) -> Any:
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    days = np.array([f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(partitions)])
    text = rng.integers(97, 123, (rows, 57), dtype=np.uint8).view("S57").ravel()
    return pa.table({"id": np.arange(rows), "day": days[rng.integers(0, partitions, rows)],
                     "value": rng.random(rows), "text": pa.array(text, type=pa.binary()).cast(pa.string())})


def _one_column(files: int, file_mib: int) -> tuple[Any, int]:
    import numpy as np
    import pyarrow as pa

    rows_per_file = file_mib * 1024  # rows of 1 KiB: an id and 127 random (incompressible) doubles
    values = np.random.default_rng(0).random((files * rows_per_file, 127))
    columns = {"id": np.arange(files * rows_per_file), **{f"c{i}": values[:, i] for i in range(127)}}
    return pa.table(columns), rows_per_file


def _sizes(quick: bool) -> dict[str, Any]:
    scale = 100 if quick else 1
    return {"one_column": (4, 1) if quick else (20, 10), "rows16": 4_000_000 // scale,
            "rows1g": 13_000_000 // scale, "rounds": 1 if quick else 3,
            # the small files' shape: 400,000 rows in 200 partitions (a quick run: 40,000 in 20, the same code)
            "rows_small": 400_000 // (10 if quick else 1), "partitions_small": 20 if quick else 200}


class _Path:
    """One measured writer: its runs' wall and CPU seconds."""

    def __init__(self, run: Callable[[int], None], cpu: Callable[[], float] = _cpu) -> None:
        self.run, self.cpu = run, cpu
        self.seconds: list[float] = []
        self.cpu_seconds: list[float] = []

    def measure(self, round_: int) -> None:
        cpu, started = self.cpu(), time.perf_counter()
        self.run(round_)
        self.seconds.append(time.perf_counter() - started)
        self.cpu_seconds.append(self.cpu() - cpu)


def _warms_up(rounds: int) -> bool:
    """A measured run warms each path up first; a quick run (one round, a smoke test of the code) does not."""
    return rounds > 1


def _compare(paths: dict[str, _Path], rounds: int, *, baseline: str, nbytes: int) -> dict[str, Any]:
    """Warm each path up (not in a quick run), run ``rounds`` rounds each in the other order, and summarise against
    ``baseline``."""
    names = list(paths)
    for name in names if _warms_up(rounds) else ():
        paths[name].run(-1)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            print(f"    round {round_ + 1}: {name}", flush=True)
            paths[name].measure(round_)
    base = paths[baseline]
    out: dict[str, Any] = {"bytes": nbytes, "rounds": rounds, "baseline": baseline, "paths": {}}
    for name, path in paths.items():
        wall, cpu = statistics.median(path.seconds), statistics.median(path.cpu_seconds)
        out["paths"][name] = {
            "seconds": path.seconds, "cpu_seconds": path.cpu_seconds, "median_seconds": wall,
            "median_cpu_seconds": cpu, "cpu_per_gib": cpu / max(nbytes / GIB, 1e-9),
            "wall_ratio": wall / statistics.median(base.seconds),
            "paired_wall_ratio": paired_median(path.seconds, base.seconds),
            "cpu_ratio": cpu / max(statistics.median(base.cpu_seconds), 1e-9),
            "paired_cpu_ratio": paired_median(path.cpu_seconds, base.cpu_seconds)}
    return out


def _bytes_under(store: S3Store, bucket: str, prefix: str) -> int:
    return sum(o.size for o in store.objects.list_objects(bucket, prefix) if not o.key.endswith("_SUCCESS"))


def engine_runs(server: Any, bucket: str, *, quick: bool = False) -> dict[str, Any]:
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    import s3commit.arrow
    from s3commit.store.capability_cache import known

    sizes = _sizes(quick)
    rounds = sizes["rounds"]
    endpoint = server.endpoint_url
    native = pafs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http",
                               access_key="testing", secret_key="testing", region="us-east-1")
    options = StoreOptions(endpoint_url=endpoint, region="us-east-1", path_style=True, access_key="testing",
                           secret_key="testing")
    store = S3Store(options)
    md5_store = S3Store(dataclasses.replace(options, verify_etag=True))
    server.configure(validate_checksums=True)  # as S3: a part whose checksum does not match is refused
    found = known(store, bucket, refresh=True)
    results: dict[str, Any] = {"server": "moto behind the simulator, validate_checksums (as S3)",
                               "md5_check": store.bodies.verifies_etags(bucket),
                               "checksum": options.checksum_algorithm,
                               "validates_checksum": bool(found and found.validates(options.checksum_algorithm)),
                               "shapes": {}}

    def arrow_pair(name: str, table: Any, partitioning: list[str] | None, mode: str, **extra: Any) -> dict[str, Any]:
        flavor = "hive" if partitioning else None
        prefix = f"engines/{name.replace(' ', '-').replace(',', '')}-{mode}"

        def pyarrow(round_: int) -> None:
            if mode == "append":
                ds.write_dataset(table, f"{bucket}/{prefix}/pyarrow", format="parquet", filesystem=native,
                                 partitioning=partitioning, partitioning_flavor=flavor,
                                 existing_data_behavior="overwrite_or_ignore",
                                 basename_template=f"r{round_ + 1}-{{i}}.parquet", **extra)
            else:
                ds.write_dataset(table, f"{bucket}/{prefix}/pyarrow", format="parquet", filesystem=native,
                                 partitioning=partitioning, partitioning_flavor=flavor,
                                 existing_data_behavior="delete_matching", **extra)

        def committed(on: S3Store, where: str) -> Callable[[int], None]:
            return lambda _: s3commit.arrow.write_dataset(table, f"s3://{bucket}/{prefix}/{where}",
                                                         partitioning=partitioning, mode=mode, store=on, **extra)

        paths = {"pyarrow (S3FileSystem)": _Path(pyarrow), "s3commit.arrow": _Path(committed(store, "s3commit"))}
        if name == "16 partitions" and mode == "overwrite":
            paths["s3commit.arrow, MD5 ETag check"] = _Path(committed(md5_store, "s3commit-md5"))
        print(f"  engines: {name}, {mode}", flush=True)
        compared = _compare(paths, rounds, baseline="pyarrow (S3FileSystem)", nbytes=0)
        written = _bytes_under(store, bucket, f"{prefix}/s3commit/")
        if mode == "append":
            written //= rounds + _warms_up(rounds)  # every write (the warm-up's too) added the table once more
        compared["bytes"] = written
        for path in compared["paths"].values():
            path["cpu_per_gib"] = path["median_cpu_seconds"] / max(written / GIB, 1e-9)
        return compared

    files, file_mib = sizes["one_column"]
    one_column, rows_per_file = _one_column(files, file_mib)
    shapes = results["shapes"]
    shapes["one column, 20 x 10 MiB" if not quick else "one column"] = arrow_pair(
        "one column", one_column, None, "overwrite", max_rows_per_file=rows_per_file,
        max_rows_per_group=rows_per_file)
    del one_column
    table16 = _table(sizes["rows16"], 16)
    shapes["16 partitions"] = arrow_pair("16 partitions", table16, ["day"], "overwrite")
    shapes["16 partitions, append"] = arrow_pair("16 partitions", table16, ["day"], "append")
    small = f"{sizes['partitions_small']} partitions"
    table_small = _table(sizes["rows_small"], sizes["partitions_small"], seed=2)
    shapes[small] = arrow_pair(small, table_small, ["day"], "overwrite")
    shapes[f"{small}, append"] = arrow_pair(small, table_small, ["day"], "append")
    del table_small
    table1g = _table(sizes["rows1g"], 1, seed=1)
    shapes["1 GiB, one file"] = arrow_pair("1 GiB", table1g, None, "overwrite")
    shapes["1 GiB, one file, append"] = arrow_pair("1 GiB", table1g, None, "append")
    del table1g
    results["dask"] = _dask_runs(server, bucket, table16, store, native, rounds=rounds)
    results["ray"] = _ray_runs(server, bucket, table16, store, native, rounds=rounds)
    return results


def _dask_runs(server: Any, bucket: str, table: Any, store: S3Store, native: Any, *, rounds: int) -> dict[str, Any]:
    """The 16-partition table as 8 Dask partitions on a distributed cluster of 2 worker processes."""
    import dask
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import s3commit.dask

    frame = dd.from_pandas(table.to_pandas(), npartitions=8)
    print("  engines: dask, 2 workers", flush=True)
    # The workers' statistical profiler off: on Python 3.11 its sys._current_frames() every 10 ms can deadlock a
    # worker when the garbage collector runs inside it (CPython gh-106883): a run of this section hung so, every
    # thread of a worker waiting for the GIL its main thread held in the profiler.
    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        frame = frame.persist()  # the data in the workers, as a job that read it would have it

        def cluster_cpu() -> float:
            return _cpu() + sum(client.run(_cpu).values())

        def native_write(_: int) -> None:
            frame.to_parquet(f"{bucket}/engines/dask/native", filesystem=native, partition_on=["day"],
                             write_index=False, overwrite=False, append=False, name_function=_name)

        def committed(failing: bool = False) -> Callable[[int], None]:
            def write(_: int) -> None:
                dest = f"s3://{bucket}/engines/dask/" + ("retried" if failing else "s3commit")
                if failing:
                    with contextlib.suppress(Exception):
                        s3commit.dask.to_parquet(frame.map_partitions(_fails, meta=frame._meta), dest,
                                                 partition_on=["day"], mode="overwrite", store=store)
                s3commit.dask.to_parquet(frame, dest, partition_on=["day"], mode="overwrite", store=store)
            return write

        paths = {"dask (pyarrow S3FileSystem)": _Path(native_write, cluster_cpu),
                 "s3commit.dask": _Path(committed(), cluster_cpu),
                 "s3commit.dask, failed once then run again": _Path(committed(failing=True), cluster_cpu)}
        out = _compare(paths, rounds, baseline="dask (pyarrow S3FileSystem)", nbytes=0)
    written = _bytes_under(store, bucket, "engines/dask/s3commit/")
    out["bytes"] = written
    for path in out["paths"].values():
        path["cpu_per_gib"] = path["median_cpu_seconds"] / max(written / GIB, 1e-9)
    return out


def _ray_runs(server: Any, bucket: str, table: Any, store: S3Store, native: Any, *, rounds: int) -> dict[str, Any]:
    """The 16-partition table as 8 Ray Data blocks on a local Ray of 2 CPUs: Ray's own ``write_parquet`` through
    pyarrow's filesystem (``mode="overwrite"``) against ``write_datasink(CommitDatasink(..., mode="overwrite"))``.
    CPU: this process's and every process Ray started (its workers, raylet, GCS), the server's excluded."""
    try:
        import ray
        import ray.data
    except ImportError:
        return {"skipped": "Ray is not installed (pip install '.[ray]')"}
    import psutil

    import s3commit.ray

    print("  engines: ray, 2 CPUs", flush=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        data = ray.data.from_arrow(table).repartition(8).materialize()  # in the object store, as a job that read it

        def ray_cpu() -> float:
            me = psutil.Process()
            server_tree = {server.pid, *(p.pid for p in psutil.Process(server.pid).children(recursive=True))}
            total = 0.0
            for process in [me, *me.children(recursive=True)]:
                if process.pid not in server_tree:
                    with contextlib.suppress(psutil.Error):
                        times = process.cpu_times()
                        total += times.user + times.system
            return total

        def native_write(_: int) -> None:
            data.write_parquet(f"{bucket}/engines/ray/native", filesystem=native, partition_cols=["day"],
                               mode="overwrite")

        def committed(_: int) -> None:
            data.write_datasink(s3commit.ray.CommitDatasink(f"s3://{bucket}/engines/ray/s3commit",
                                                            partition_cols=["day"], mode="overwrite", store=store))

        paths = {"ray (write_parquet, pyarrow S3FileSystem)": _Path(native_write, ray_cpu),
                 "s3commit.ray CommitDatasink": _Path(committed, ray_cpu)}
        out = _compare(paths, rounds, baseline="ray (write_parquet, pyarrow S3FileSystem)", nbytes=0)
    finally:
        ray.shutdown()
    written = _bytes_under(store, bucket, "engines/ray/s3commit/")
    out["bytes"] = written
    for path in out["paths"].values():
        path["cpu_per_gib"] = path["median_cpu_seconds"] / max(written / GIB, 1e-9)
    return out


def _name(index: int) -> str:
    return f"part.{index}.parquet"


def _fails(part: Any) -> Any:
    if len(part) and int(part["id"].iloc[0]) == 0:
        raise RuntimeError("the first partition fails")
    return part



def engines_plot(engines: dict[str, Any], out: Any) -> None:
    """``engines.png``: each committed writer's wall and CPU time against its engine's own writer's (1.0), by shape."""
    import matplotlib.pyplot as plt

    rows = [(f"{shape}\n{name}", path) for shape, compared in
            [*engines["shapes"].items(), ("dask, 2 workers", engines.get("dask")),
             ("ray, 2 CPUs", engines.get("ray"))] if compared and "paths" in compared
            for name, path in compared["paths"].items() if name != compared["baseline"]]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    positions = range(len(rows))
    ax.bar([p - 0.2 for p in positions], [r["paired_wall_ratio"] for _, r in rows], width=0.4, label="wall")
    ax.bar([p + 0.2 for p in positions], [r["paired_cpu_ratio"] for _, r in rows], width=0.4, label="CPU")
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_xticks(list(positions), [label for label, _ in rows], fontsize=7, rotation=20, ha="right")
    ax.set_ylabel("x the engine's own writer (paired median)")
    ax.set_title("Python engines: committed writes against pyarrow's, Dask's and Ray's own writers")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "engines.png", dpi=120)
    plt.close(fig)
