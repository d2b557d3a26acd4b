"""Committed writes from Dask: ``s3commit.dask.to_parquet(ddf, "s3://bucket/table", ...)``, exactly once.

The entry point users import; the engine is :mod:`s3commit.engines.dask`."""

from s3commit.engines.dask import to_parquet

__all__ = ["to_parquet"]
