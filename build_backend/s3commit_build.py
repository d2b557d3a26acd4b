"""s3commit's build backend: setuptools', plus the bridge jars a wheel carries.

A wheel must work on a machine with a Java runtime and no compiler, so ``build_wheel`` first compiles the bridge
once per Spark line (``s3commit.spark.jarbuild.BUILT_AGAINST``: PySpark 3.5 and 4.x differ in Scala line and streaming
packages) into ``s3commit/jars/``, and copies the Java sources to ``s3commit/java/`` (compiled at run time
with ``javac`` for a Spark no shipped jar fits). The jars are compiled against each line's PySpark jars: taken
from ``S3COMMIT_BUILD_PYSPARK_<line>`` (a directory of jars, e.g. an installed ``pyspark/jars``; ``<line>`` is
``3_5`` or ``4``) if set, else read out of that PySpark's sdist, fetched with ``pip download`` into
``~/.cache/s3commit/build/``. Building a wheel needs a JDK 17; installing it does not. Editable installs and
sdists are setuptools' own (an editable install compiles from the sources on first use).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the rest of the PEP 517/660 interface, unchanged)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

ROOT = Path(__file__).resolve().parent.parent


def _jarbuild():
    spec = importlib.util.spec_from_file_location("s3commit_jarbuild", ROOT / "s3commit" / "spark" / "jarbuild.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _version() -> str:
    for line in (ROOT / "s3commit" / "_version.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise RuntimeError("no __version__ in s3commit/_version.py")


def _cache() -> Path:
    # s3commit.config.local_cache.user_cache_dir's rule, copied: this backend runs before s3commit is importable.
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "s3commit" / "build"


def _pyspark_jars(line: str, version: str) -> Path:
    override = os.environ.get(f"S3COMMIT_BUILD_PYSPARK_{line.replace('.', '_')}")
    if override:
        return Path(override)
    jars = _cache() / f"pyspark-{version}" / "jars"
    if jars.is_dir() and any(jars.glob("spark-core_*.jar")):
        return jars
    downloads = _cache() / "sdists"
    downloads.mkdir(parents=True, exist_ok=True)
    sdist = downloads / f"pyspark-{version}.tar.gz"
    if not sdist.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                        "-d", str(downloads), f"pyspark=={version}"], check=True)
    partial = jars.with_name("jars.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            name = member.name.split("/")
            if member.isfile() and len(name) == 4 and name[1:3] == ["deps", "jars"] and name[3].endswith(".jar"):
                source = archive.extractfile(member)
                assert source is not None
                with (partial / name[3]).open("wb") as out:
                    shutil.copyfileobj(source, out)
    shutil.rmtree(jars, ignore_errors=True)
    partial.rename(jars)
    return jars


def _prepare() -> None:
    jarbuild, version = _jarbuild(), _version()
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("building the s3commit wheel compiles its bridge jars: it needs a JDK 17 (javac on PATH)")
    out = ROOT / "s3commit" / "jars"
    shutil.rmtree(out, ignore_errors=True)
    sources = ROOT / "jvm-bridge" / "src"
    for line, pyspark_version in jarbuild.BUILT_AGAINST.items():
        jars = _pyspark_jars(line, pyspark_version)
        fp = jarbuild.fingerprint(jars)
        jarbuild.compile_jar(sources, jars, out / jarbuild.shipped_jar_name(version, fp), version, javac=javac)
    carried = ROOT / "s3commit" / "java"
    shutil.rmtree(carried, ignore_errors=True)
    shutil.copytree(sources, carried, ignore=shutil.ignore_patterns("test"))


@contextlib.contextmanager
def _exclusive() -> Iterator[None]:
    """One wheel build at a time on this machine: builds share the PySpark cache and write their jars into the
    source tree they build from (two at once, e.g. from parallel test workers, would delete each other's)."""
    _cache().mkdir(parents=True, exist_ok=True)
    with open(_cache() / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with _exclusive():
        try:
            _prepare()
            return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
        finally:
            # Never leave prebuilt jars in a source tree: an editable install would use them, not the sources.
            for built in ("jars", "java"):
                shutil.rmtree(ROOT / "s3commit" / built, ignore_errors=True)
