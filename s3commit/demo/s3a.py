"""Hadoop's S3A (``hadoop-aws``) beside s3commit: the jars that match the installed PySpark, and the Spark settings.

S3A is the peer s3commit is measured and checked against (DESIGN.md section 24): ``s3commit demo`` writes through
S3A's magic committer beside its own when these jars are at hand (``s3commit demo --peers s3a`` resolves them),
and the repository's tests and benchmarks run S3A with them (``testbed.s3a`` re-exports this module). Its jars must
match the Hadoop inside PySpark, read from the name of ``pyspark/jars/hadoop-client-api-*.jar`` (the Scala version
from ``scala-library-*.jar``, Spark's from ``spark-core_*.jar``):

- Hadoop 3.5.x (PySpark 4.2/4.3): ``hadoop-aws`` of that version, ``software.amazon.awssdk:bundle:2.35.4`` (what
  hadoop-aws 3.5.0's parent pom, hadoop-project, declares as ``aws-java-sdk-v2.version``),
  ``software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1`` (see :data:`ANALYTICS_ACCELERATOR`)
  and ``spark-hadoop-cloud_<scala>`` (``PathOutputCommitProtocol``, ``BindingParquetOutputCommitter``);
- Hadoop 3.3.4 (PySpark 3.5): ``hadoop-aws:3.3.4``, ``com.amazonaws:aws-java-sdk-bundle:1.12.262`` (SDK v1) and
  ``spark-hadoop-cloud_2.12``.

:func:`s3a_jars` resolves exactly those jars (not their dependencies: PySpark ships Hadoop's client jars, the SDK
bundle is shaded) from Maven Central once, with ``mvn dependency:copy``, into ``$S3COMMIT_S3A_JARS`` or
``~/.cache/s3commit/s3a-jars/<hadoop version>/`` (Maven's own repository for it is a temporary one, removed
after, so the ~686 MB are stored once). ``manifest.json`` lists the jars (coordinate, file, size) and marks the
download complete only after the last one (under a file lock): a later call, in any process, finds the jars
without running Maven (:func:`cached_s3a_jars` only looks), and a download cut short resumes with the jars that
arrived whole. ``python -m s3commit.demo.s3a`` (or ``python -m testbed.s3a``) resolves them and prints their
paths (CI prefetches with it).

:func:`s3a_conf` and :func:`s3a_committer_conf` are the Spark settings of S3A on a local store and of S3A's
committers. A Spark application with these jars cannot share a JVM with s3commit's sessions (the test suite's,
the demo's): run it in a process of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from s3commit.config.local_cache import user_cache_dir

AWS_SDK_V2_BUNDLE = "2.35.4"
"""The ``software.amazon.awssdk:bundle`` hadoop-aws 3.5.0 is built with (hadoop-project 3.5.0's
``aws-java-sdk-v2.version``, read from its pom with ``mvn dependency:get``); an older SDK is reported to fail at
start (``NoSuchFieldError: CRC64_NVME``, reference/peers-and-limits.md)."""
ANALYTICS_ACCELERATOR = "1.3.1"
"""``analyticsaccelerator-s3``, a compile dependency of hadoop-aws 3.5.0 (hadoop-project 3.5.0's
``amazon-s3-analyticsaccelerator-s3.version``; its pom declares no dependencies of its own). Hadoop 3.5.0's default
input stream (``fs.s3a.input.stream.type=default``) is the analytics one, so without this jar the FileSystem cannot
even be created: ``NoClassDefFoundError: software/amazon/s3/analyticsaccelerator/request/ObjectClient`` from
``StreamIntegration.factoryFromConfig`` in ``S3AFileSystem.initialize``."""
AWS_SDK_V1_BUNDLE = "1.12.262"
"""The ``com.amazonaws:aws-java-sdk-bundle`` of hadoop-aws 3.3.4."""

SPARK_HADOOP_CLOUD_FALLBACK: dict[str, str] = {
    # Maven Central serves no spark-hadoop-cloud_2.13 for 4.3.0 and none of the 4.2 line either (neither 4.2.0
    # nor its previews; checked 2026-11-27, when its newest was 4.1.2), although it serves spark-core 4.2.0. The
    # module is five classes over Hadoop's PathOutputCommitter API; 4.1.2's runs S3A's magic committer under
    # PySpark 4.3.0 (tests/s3a).
    "4.3.0": "4.1.2",
}
"""The ``spark-hadoop-cloud`` version to use when Central has none for the installed Spark: the newest it serves
below it. Tried only after the exact version failed; the version used is recorded in the cache's manifest."""

MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
"""Pinned, so that every machine runs the same plugin (Maven 3.8.7 would pick its default, 2.8, from 2013)."""
MAVEN_TIMEOUT = 3600.0
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


class S3AJarsError(RuntimeError):
    """The S3A jars cannot be chosen (an unsupported Hadoop) or resolved (no Maven, no network, no artifact)."""


@dataclass(frozen=True)
class Artifact:
    """One Maven artifact to resolve: ``group:name:version``, then each fallback version in turn."""

    group: str
    name: str
    version: str
    fallbacks: tuple[str, ...] = ()

    @property
    def coordinate(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"

    def candidates(self) -> list[str]:
        return [f"{self.group}:{self.name}:{v}" for v in (self.version, *self.fallbacks)]


@dataclass(frozen=True)
class PySparkJars:
    """What the installed PySpark bundles: its Hadoop, Scala (full and binary) and Spark versions."""

    hadoop: str
    scala: str
    spark: str

    @property
    def scala_binary(self) -> str:
        return ".".join(self.scala.split(".")[:2])


def pyspark_jars_dir() -> Path:
    """``pyspark/jars`` of the PySpark this Python imports (found without importing it)."""
    spec = find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise S3AJarsError("PySpark is not installed in this Python (pip install pyspark)")
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not jars.is_dir():
        raise S3AJarsError(f"{jars} does not exist: a PySpark without its jars?")
    return jars


def _version_from_jar(jars: Path, pattern: str) -> str:
    regex = re.compile(pattern)
    found = sorted(m.group(1) for p in jars.glob("*.jar") if (m := regex.fullmatch(p.name)))
    if len(found) != 1:
        raise S3AJarsError(f"expected one jar matching {pattern} in {jars}, found {found or 'none'}")
    return found[0]


def installed_versions(jars: Path | None = None) -> PySparkJars:
    """The Hadoop, Scala and Spark versions of the installed PySpark, from the names of its jars."""
    jars = jars or pyspark_jars_dir()
    return PySparkJars(hadoop=_version_from_jar(jars, r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar"),
                       scala=_version_from_jar(jars, r"scala-library-(\d+\.\d+\.\d+)\.jar"),
                       spark=_version_from_jar(jars, r"spark-core_\d+\.\d+-(\d+\.\d+\.\d+(?:-\w+)?)\.jar"))


def s3a_artifacts(versions: PySparkJars | None = None) -> list[Artifact]:
    """The artifacts S3A needs beside this PySpark: hadoop-aws, the AWS SDK bundle (and, from Hadoop 3.5, the
    analytics accelerator its default input stream is), spark-hadoop-cloud."""
    v = versions or installed_versions()
    cloud = Artifact("org.apache.spark", f"spark-hadoop-cloud_{v.scala_binary}", v.spark,
                     tuple(f for f in (SPARK_HADOOP_CLOUD_FALLBACK.get(v.spark),) if f))
    if re.fullmatch(r"3\.5\.\d+", v.hadoop):
        return [Artifact("org.apache.hadoop", "hadoop-aws", v.hadoop),
                Artifact("software.amazon.awssdk", "bundle", AWS_SDK_V2_BUNDLE),
                Artifact("software.amazon.s3.analyticsaccelerator", "analyticsaccelerator-s3", ANALYTICS_ACCELERATOR),
                cloud]
    if v.hadoop == "3.3.4":
        return [Artifact("org.apache.hadoop", "hadoop-aws", "3.3.4"),
                Artifact("com.amazonaws", "aws-java-sdk-bundle", AWS_SDK_V1_BUNDLE), cloud]
    raise S3AJarsError(f"no S3A jars are known for Hadoop {v.hadoop} (PySpark {v.spark}, Scala {v.scala}): "
                       "S3A's jars are known for Hadoop 3.5.x (PySpark 4.2/4.3) and 3.3.4 (PySpark 3.5)")


def s3a_cache_dir(versions: PySparkJars | None = None) -> Path:
    """``$S3COMMIT_S3A_JARS``, else ``s3a-jars/<hadoop version>/`` in s3commit's cache directory
    (:func:`~s3commit.config.local_cache.user_cache_dir`: ``~/.cache/s3commit/``)."""
    configured = os.environ.get("S3COMMIT_S3A_JARS")
    if configured:
        return Path(configured).expanduser()
    hadoop = (versions or installed_versions()).hadoop
    return user_cache_dir() / "s3a-jars" / hadoop


def _manifest(directory: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) and manifest.get("format") == MANIFEST_FORMAT else {}


def _intact_jars(directory: Path) -> dict[str, Path]:
    """The jars the manifest lists (complete or not) that are there whole, by Maven coordinate."""
    intact = {}
    try:
        for jar in _manifest(directory).get("jars", []):
            path = directory / jar["file"]
            if path.is_file() and path.stat().st_size == jar["size"]:
                intact[jar["coordinate"]] = path
    except (OSError, KeyError, TypeError):
        return {}
    return intact


def _read_manifest(directory: Path, artifacts: list[Artifact]) -> list[Path] | None:
    """The jars of a complete download of exactly ``artifacts`` in ``directory``, or ``None``."""
    manifest = _manifest(directory)
    if not manifest.get("complete") or manifest.get("requested") != [a.coordinate for a in artifacts]:
        return None
    intact = _intact_jars(directory)
    coordinates = [jar.get("coordinate") for jar in manifest.get("jars", [])]
    if len(coordinates) != len(artifacts) or not all(c in intact for c in coordinates):
        return None
    return [intact[c] for c in coordinates]


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    partial = directory / (MANIFEST + ".tmp")
    partial.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(partial, directory / MANIFEST)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One resolver at a time per cache directory (test workers and CI steps may start together)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _mvn() -> str:
    found = shutil.which("mvn")
    if not found:
        raise S3AJarsError("mvn (Apache Maven) is not on PATH: it resolves the S3A jars from Maven Central")
    return found


def _copy_one(artifact: Artifact, staging: Path, local_repo: Path) -> tuple[str, Path]:
    """Copy the first served candidate version of ``artifact`` into ``staging``; return its coordinate and file."""
    failures = []
    for coordinate in artifact.candidates():
        command = [_mvn(), "-B", "-q", "-Dstyle.color=never", "--strict-checksums",
                   f"-Dmaven.repo.local={local_repo}", f"{MAVEN_DEPENDENCY_PLUGIN}:copy",
                   f"-Dartifact={coordinate}:jar", f"-DoutputDirectory={staging}", "-Dmdep.overWriteReleases=true"]
        try:
            done = subprocess.run(command, cwd=staging, capture_output=True, text=True, timeout=MAVEN_TIMEOUT,
                                  check=False)
        except subprocess.TimeoutExpired:
            failures.append(f"{coordinate}: mvn did not finish within {MAVEN_TIMEOUT:.0f} s")
            continue
        _, name, version = coordinate.split(":")
        jar = staging / f"{name}-{version}.jar"
        if done.returncode == 0 and jar.is_file():
            return coordinate, jar
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
        failures.append(f"{coordinate}: {' '.join(errors[:2])[:600] or f'mvn exited {done.returncode}'}")
    raise S3AJarsError("cannot resolve " + "; ".join(failures))


def resolve(artifacts: list[Artifact], directory: Path) -> list[Path]:
    """The jars of ``artifacts`` in ``directory``, downloaded by Maven unless a complete download is there.

    The manifest is rewritten after each jar arrives (``complete`` only after the last), so a download cut short
    resumes with the jars it had, and a changed set of artifacts downloads only what it does not have yet.
    """
    found = _read_manifest(directory, artifacts)
    if found is not None:
        return found
    with _locked(directory):
        found = _read_manifest(directory, artifacts)  # another process may have finished it meanwhile
        if found is not None:
            return found
        started = time.monotonic()
        kept = _intact_jars(directory)
        manifest: dict[str, Any] = {"format": MANIFEST_FORMAT, "complete": False,
                                    "requested": [a.coordinate for a in artifacts], "jars": []}
        # A private local repository, removed after: the jars are kept once, here, and not also in ~/.m2.
        staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=directory))
        try:
            for artifact in artifacts:
                coordinate = next((c for c in artifact.candidates() if c in kept), None)
                if coordinate is None:
                    coordinate, jar = _copy_one(artifact, staging, staging / ".maven-repo")
                    path = directory / jar.name
                    os.replace(jar, path)
                else:
                    path = kept[coordinate]
                manifest["jars"].append({"coordinate": coordinate, "file": path.name, "size": path.stat().st_size})
                _write_manifest(directory, manifest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        wanted = {jar["file"] for jar in manifest["jars"]}
        for stale in directory.glob("*.jar"):
            if stale.name not in wanted:
                stale.unlink()
        manifest.update(complete=True, resolved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        seconds=round(time.monotonic() - started, 1))
        _write_manifest(directory, manifest)
        return [directory / jar["file"] for jar in manifest["jars"]]


def s3a_jars() -> list[Path]:
    """S3A's jars for the installed PySpark (:func:`s3a_artifacts`), resolved once and cached."""
    versions = installed_versions()
    return resolve(s3a_artifacts(versions), s3a_cache_dir(versions))


def cached_s3a_jars() -> list[Path] | None:
    """S3A's jars for the installed PySpark if a complete download of them is in the cache, else ``None``; never
    runs Maven. Raises :class:`S3AJarsError` when none can be chosen (no PySpark, an unsupported Hadoop)."""
    versions = installed_versions()
    return _read_manifest(s3a_cache_dir(versions), s3a_artifacts(versions))


def s3a_conf(endpoint_url: str, *, access_key: str = "testing", secret_key: str = "testing",
             region: str = "us-east-1", driver_classpath: bool = False) -> dict[str, str]:
    """Spark settings for S3A (``s3a://`` served by ``S3AFileSystem``) on a local S3 store at ``endpoint_url``.

    ``spark.jars`` holds :func:`s3a_jars` (resolved here if needed). Even in ``local[N]`` the executor fetches each
    of them from the driver into the application's ``userFiles-*`` directory before its first task: a 686 MB copy
    of the SDK bundle, seconds of the first job, paid per application. ``driver_classpath`` puts them on
    ``spark.driver.extraClassPath`` instead, which copies nothing (in local mode only: the driver is the executor).
    The store is reached path-style over plain HTTP (``fs.s3a.connection.ssl.enabled=false``: the SDK does not take
    the scheme from the endpoint) with fixed credentials (``SimpleAWSCredentialsProvider``, not the default chain,
    which would ask the instance metadata service).

    No checksum setting is needed for the suite's moto (5.2.5) behind the simulator (seen on the wire through a
    logging proxy, 2026-11-27). hadoop-aws 3.5.0 leaves ``fs.s3a.checksum.generation`` false, and its client factory
    then builds the SDK with ``RequestChecksumCalculation.WHEN_REQUIRED``: UploadPart bodies are aws-chunked and
    signed per chunk (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``, plain HTTP), without checksums or trailers, which moto
    decodes. Checksums on work as well, byte-exact: ``fs.s3a.checksum.generation=true`` sends each part with a CRC32
    trailer (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER``, ``x-amz-trailer: x-amz-checksum-crc32``; the object
    keeps no checksum); ``fs.s3a.create.checksum.algorithm=CRC32C`` creates the upload with that algorithm and sends
    CRC32C trailers, and moto keeps a ``ChecksumCRC32C`` on the object (moto decodes trailers since its PR 9338).
    """
    h = "spark.hadoop.fs.s3a."
    jars = ("spark.driver.extraClassPath", os.pathsep) if driver_classpath else ("spark.jars", ",")
    return {jars[0]: jars[1].join(str(p) for p in s3a_jars()),
            h + "impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            h + "endpoint": endpoint_url,
            h + "endpoint.region": region,
            h + "path.style.access": "true",
            h + "connection.ssl.enabled": "false",
            h + "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            h + "access.key": access_key,
            h + "secret.key": secret_key}


COMMITTERS = ("magic", "directory", "partitioned")


def s3a_committer_conf(name: str, *, in_memory: bool = False) -> dict[str, str]:
    """Spark settings that commit ``s3a://`` writes with S3A's committer ``name`` (magic, directory, partitioned).

    ``PathOutputCommitProtocol`` asks the scheme's committer factory (``S3ACommitterFactory``) for the committer;
    ``pathoutputcommit.reject.fileoutput`` makes the job fail instead of silently falling back to
    ``FileOutputCommitter``. ``in_memory`` keeps the magic committer's commit data in the task's memory
    (HADOOP-19047) instead of one ``.pending`` object per file.
    """
    if name not in COMMITTERS:
        raise ValueError(f"unknown S3A committer {name!r}: one of {', '.join(COMMITTERS)}")
    cloud = "org.apache.spark.internal.io.cloud."
    return {"spark.sql.sources.commitProtocolClass": cloud + "PathOutputCommitProtocol",
            "spark.sql.parquet.output.committer.class": cloud + "BindingParquetOutputCommitter",
            "spark.hadoop.fs.s3a.committer.name": name,
            "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
            "spark.hadoop.fs.s3a.committer.magic.track.commits.in.memory.enabled": str(in_memory).lower(),
            "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a":
                "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory",
            "spark.hadoop.pathoutputcommit.reject.fileoutput": "true"}


def main() -> int:
    try:
        versions = installed_versions()
        artifacts = s3a_artifacts(versions)
        started = time.monotonic()
        jars = resolve(artifacts, s3a_cache_dir(versions))
    except S3AJarsError as err:
        print(f"S3A's jars: {err}", file=sys.stderr)
        return 1
    print(f"# PySpark {versions.spark}, Hadoop {versions.hadoop}, Scala {versions.scala}: "
          f"{sum(p.stat().st_size for p in jars) / 2**20:.0f} MiB in {time.monotonic() - started:.1f} s",
          file=sys.stderr)
    for jar in jars:
        print(jar)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
