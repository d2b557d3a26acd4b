"""Committed writes from the Python engines: pyarrow/pandas (:mod:`.arrow`), Dask (:mod:`.dask`) and Ray Data
(:mod:`.ray`), with what they share (:mod:`.common`). Users import them as :mod:`s3commit.arrow`,
:mod:`s3commit.dask` and :mod:`s3commit.ray`.

May import: :mod:`s3commit.committers` and every layer below it; never :mod:`s3commit.spark`, the sidecar or the CLI.
"""
