"""S3A's jars and Spark settings for the repository's tests and benchmarks: :mod:`s3commit.demo.s3a` (their one
home, shipped, since ``s3commit demo --peers s3a`` resolves them), re-exported; ``python -m testbed.s3a`` resolves
the jars and prints their paths (CI prefetches with it)."""

from __future__ import annotations

from s3commit.demo.s3a import (
    COMMITTERS,
    Artifact,
    PySparkJars,
    S3AJarsError,
    cached_s3a_jars,
    installed_versions,
    main,
    resolve,
    s3a_artifacts,
    s3a_cache_dir,
    s3a_committer_conf,
    s3a_conf,
    s3a_jars,
)

__all__ = [
    "COMMITTERS",
    "Artifact",
    "PySparkJars",
    "S3AJarsError",
    "cached_s3a_jars",
    "installed_versions",
    "main",
    "resolve",
    "s3a_artifacts",
    "s3a_cache_dir",
    "s3a_committer_conf",
    "s3a_conf",
    "s3a_jars",
]

if __name__ == "__main__":
    raise SystemExit(main())
