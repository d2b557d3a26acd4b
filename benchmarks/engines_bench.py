"""Python engines: each engine's committed write (s3commit.arrow, s3commit.dask) against its own uncommitted
write of the same data to the same simulated S3 (pyarrow's ``S3FileSystem``, which both engines use natively),
and the cost of a failed job run again."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from s3commit.config.options import MIB, StoreOptions
from s3commit.store.s3store import S3Store


def _frame(files: int, file_mib: int) -> Any:
    import numpy as np
    import pandas as pd

    rows_per_file = file_mib * 1024  # rows of 1 KiB: an id and 127 random (incompressible) doubles
    rows = files * rows_per_file
    values = np.random.default_rng(0).random((rows, 127))
    frame = pd.DataFrame(values, columns=[f"c{i}" for i in range(127)])
    frame.insert(0, "id", np.arange(rows))
    return frame, rows_per_file


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def engine_runs(server: Any, bucket: str, *, files: int, file_mib: int) -> dict[str, Any]:
    import dask
    import dask.dataframe as dd
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    import s3commit.arrow
    import s3commit.dask

    endpoint = server.endpoint_url
    native = pafs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http",
                               access_key="testing", secret_key="testing", region="us-east-1")
    store = S3Store(StoreOptions(endpoint_url=endpoint, region="us-east-1", path_style=True, access_key="testing",
                                 secret_key="testing"))
    frame, rows_per_file = _frame(files, file_mib)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    ddf = dd.from_pandas(frame, npartitions=files)
    common = {"max_rows_per_file": rows_per_file, "max_rows_per_group": rows_per_file}
    results: dict[str, Any] = {"files": files, "file_mib": file_mib, "bytes": files * file_mib * MIB}

    def fails_once(part: Any, state: dict[str, bool] = {"failed": False}) -> Any:  # noqa: B006
        if not state["failed"] and part["id"].iloc[0] == rows_per_file:
            state["failed"] = True
            raise RuntimeError("partition 1 fails once")
        return part

    runs = {
        "pyarrow (S3FileSystem)": lambda: ds.write_dataset(
            table, f"{bucket}/plain-arrow", format="parquet", filesystem=native,
            file_options=ds.ParquetFileFormat().make_write_options(compression=None),
            existing_data_behavior="overwrite_or_ignore", **common),
        "s3commit.arrow": lambda: s3commit.arrow.write_dataset(
            table, f"s3://{bucket}/committed-arrow", store=store, compression=None, **common),
        "dask (S3FileSystem)": lambda: ddf.to_parquet(
            f"{bucket}/plain-dask", filesystem=native, write_index=False, compression=None,
            compute_kwargs={"scheduler": "threads"}),
        "s3commit.dask": lambda: s3commit.dask.to_parquet(
            ddf, f"s3://{bucket}/committed-dask", store=store, compression=None,
            compute_kwargs={"scheduler": "threads"}),
    }
    with dask.config.set(scheduler="threads"):
        for label, run in runs.items():
            print(f"  engines: {label}", flush=True)
            results[label] = {"seconds": _timed(run)}

        def failed_then_again() -> None:
            failing = ddf.map_partitions(fails_once, meta=ddf._meta)
            with contextlib.suppress(RuntimeError):
                s3commit.dask.to_parquet(failing, f"s3://{bucket}/retried-dask", store=store, compression=None)
            s3commit.dask.to_parquet(failing, f"s3://{bucket}/retried-dask", store=store, compression=None)

        print("  engines: s3commit.dask, a job that fails and is run again", flush=True)
        results["s3commit.dask failed then run again"] = {"seconds": _timed(failed_then_again)}
    results["ratios"] = {
        "arrow_committed_over_native": results["s3commit.arrow"]["seconds"]
        / results["pyarrow (S3FileSystem)"]["seconds"],
        "dask_committed_over_native": results["s3commit.dask"]["seconds"] / results["dask (S3FileSystem)"]["seconds"],
        "dask_failed_and_rerun_over_one_run": results["s3commit.dask failed then run again"]["seconds"]
        / results["s3commit.dask"]["seconds"],
    }
    return results
