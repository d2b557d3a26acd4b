"""Spark settings that reach past the task: the bridge jar on every JVM's classpath, and decommissioning to S3.

Hadoop's ``Configuration`` resolves ``fs.s3a.impl`` with the class loader it was created under. ``spark.jars``
reaches Spark's task class loader only, so Spark's own threads (an executor's block-manager decommissioning and
RPC endpoints, its start-up fetch of ``spark.files``, ``spark-submit`` fetching an ``s3a://`` application) cannot
see s3commit's FileSystem through it. :func:`classpath_conf` puts the jar on each JVM's system classpath
(``spark.driver.extraClassPath``, ``spark.executor.extraClassPath``) and adds :data:`PLUGIN_CLASS`, which
registers the classes for those threads where the jar only arrives with the application. No pyspark import here:
:mod:`s3commit.spark` owns the jar and the session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from s3commit.errors import ConfigError
from s3commit.model.uri import S3Uri

PLUGIN_CLASS = "s3commit.spark.S3CommitPlugin"
"""A Spark plugin (``spark.plugins``): when the driver and each executor start, it makes s3commit's Hadoop classes
resolvable by name from Spark's own threads where the jar is not on the JVM's classpath."""
DRIVER_CLASSPATH = "spark.driver.extraClassPath"
EXECUTOR_CLASSPATH = "spark.executor.extraClassPath"
LIST_KEYS = {"spark.jars": ",", "spark.plugins": ",", DRIVER_CLASSPATH: os.pathsep, EXECUTOR_CLASSPATH: os.pathsep}
"""Settings that hold lists: s3commit's entries are appended to the ones already there, never replace them."""

FALLBACK_PATH = "spark.storage.decommission.fallbackStorage.path"
FALLBACK_KEYS = {
    "spark.decommission.enabled": "true",
    "spark.storage.decommission.enabled": "true",
    "spark.storage.decommission.shuffleBlocks.enabled": "true",
    "spark.storage.decommission.fallbackStorage.cleanUp": "true",
}
"""What ``fallback_storage=`` sets besides the path: executors decommission (on SIGPWR, a standalone worker's
decommissioning, a Kubernetes pod's deletion, YARN's graceful decommissioning) by migrating their shuffle blocks to
a live peer or, with none, to the fallback storage, which Spark empties when the application stops."""


def jar_on_executors(jar: str, executor_python: str, *, prefix: str | None = None) -> str:
    """Where the executors find the bridge jar: ``jar`` itself (the same installation on every node), unless the
    executors' Python is a relative path (a virtualenv shipped with ``--archives``, unpacked in each executor's
    working directory) and ``jar`` lies in this Python's installation: then the same path inside the archive
    (``./environment/bin/python`` -> ``environment/lib/python3.X/site-packages/s3commit/jars/<jar>``)."""
    python = PurePosixPath(executor_python)
    if python.is_absolute() or len(python.parts) < 3:
        return jar
    try:
        inside = Path(jar).resolve().relative_to(Path(prefix or sys.prefix).resolve())
    except ValueError:
        return jar  # built on this machine (~/.cache) or installed elsewhere: the same path, or the plugin
    return str(python.parent.parent / PurePosixPath(inside.as_posix()))


def classpath_conf(jar: str, executor_jar_path: str) -> dict[str, str]:
    """The bridge jar on the driver's and the executors' system classpath, and the plugin for where it is not."""
    return {DRIVER_CLASSPATH: jar, EXECUTOR_CLASSPATH: executor_jar_path, "spark.plugins": PLUGIN_CLASS}


def fallback_storage_conf(path: str) -> dict[str, str]:
    """Spark's keys for decommissioning executors to migrate their shuffle blocks to ``path`` (``s3a://bucket/
    prefix/``) through s3commit. Raises :class:`ConfigError` for anything but an ``s3a://`` location in a bucket."""
    if not isinstance(path, str) or not path.startswith("s3a://"):
        raise ConfigError(f"fallback_storage {path!r}: expected an s3a:// location (s3commit serves s3a://), "
                          "e.g. s3a://bucket/spark-fallback/")
    try:
        S3Uri.parse(path)
    except ConfigError as err:
        raise ConfigError(f"fallback_storage {path!r}: {err}") from err
    # Spark writes <path>/<application id>/<shuffle id>/...: a directory, whatever the trailing slash.
    return {**FALLBACK_KEYS, FALLBACK_PATH: path if path.endswith("/") else path + "/"}


def read_spark_defaults(path: Path) -> dict[str, str]:
    """The settings of a ``spark-defaults.conf`` (``key value``, ``key=value`` or ``key: value`` lines; ``#`` and
    ``!`` comments), or ``{}`` if there is none. A setting given to ``spark-submit`` replaces the file's, so a list
    s3commit extends must start from the file's value (a cluster's own ``spark.executor.extraClassPath`` or
    ``spark.plugins`` would otherwise be lost)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    settings = {}
    for raw in lines:
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i, ch in enumerate(line) if ch in " \t=:"), default=len(line))
        value = line[cut:].lstrip(" \t")
        if value[:1] in ("=", ":"):
            value = value[1:].lstrip(" \t")
        settings[line[:cut]] = value.strip()
    return settings


def merged(existing: Mapping[str, str], conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with each list setting (:data:`LIST_KEYS`) appended to the value ``existing`` already has for it
    (an entry already there is not repeated)."""
    out = dict(conf)
    for key, separator in LIST_KEYS.items():
        before = [entry for entry in str(existing.get(key) or "").split(separator) if entry]
        if key in out and before:
            ours = [entry for entry in out[key].split(separator) if entry and entry not in before]
            out[key] = separator.join(before + ours)
    return out
