"""Committed writes from Ray Data: ``ds.write_datasink(s3commit.ray.CommitDatasink("s3://bucket/table", ...))``.

The entry point users import; the engine is :mod:`s3commit.engines.ray`."""

from s3commit.engines.ray import CommitDatasink

__all__ = ["CommitDatasink"]
