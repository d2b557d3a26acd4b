"""Committed writes from pandas and pyarrow, ``s3commit.arrow.write_dataset(data, "s3://bucket/table", ...)``, and
reads of a snapshot destination's last committed snapshot, ``s3commit.arrow.dataset("s3://bucket/table")``.

The entry points users import; the engines are :mod:`s3commit.engines.arrow` and
:mod:`s3commit.engines.snapshot_read`."""

from s3commit.engines.arrow import as_reader, write_dataset
from s3commit.engines.snapshot_read import dataset

__all__ = ["as_reader", "dataset", "write_dataset"]
