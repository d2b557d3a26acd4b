"""Committed writes from pandas and pyarrow: ``s3commit.arrow.write_dataset(data, "s3://bucket/table", ...)``.

The entry point users import; the engine is :mod:`s3commit.engines.arrow`."""

from s3commit.engines.arrow import as_reader, write_dataset

__all__ = ["as_reader", "write_dataset"]
