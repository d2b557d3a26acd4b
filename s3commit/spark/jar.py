"""The bridge jar for the running Spark: ``S3COMMIT_JAR``, a jar the wheel carries for this Spark's fingerprint, or
one compiled with ``javac`` from the carried sources (cached); and where the running Spark's jars and
``spark-defaults.conf`` are (a pip PySpark, or a distribution under ``SPARK_HOME``)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from s3commit._version import __version__
from s3commit.config.local_cache import user_cache_dir
from s3commit.spark.cluster_conf import read_spark_defaults
from s3commit.spark.jarbuild import (
    BUILT_AGAINST,
    BridgeBuildError,
    bridge_sources,
    compile_jar,
    fingerprint,
    shipped_jar_name,
)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The installed ``s3commit`` package: a wheel carries the jars (``jars/``) and the Java sources (``java/``) there."""

JAR_ENV = "S3COMMIT_JAR"
"""Path of a prebuilt bridge jar; skips the build (for machines with a JRE but no javac)."""


def _source_root() -> Path:
    """The Java sources: ``jvm-bridge/src/`` beside the package (a source checkout or editable install), with
    ``main/java`` (every Spark version), ``scala-lines/java`` (the class whose signature differs between Scala
    lines, mapped per line) and the optional source sets."""
    here = PACKAGE_DIR
    for candidate in (here.parent / "jvm-bridge" / "src", here / "java"):
        if (candidate / "main" / "java").is_dir():
            return candidate
    raise BridgeBuildError(
        "the bridge's Java sources were not found (expected jvm-bridge/src/main/java beside the s3commit "
        f"package at {here}); install s3commit from a source checkout (pip install -e .) or set {JAR_ENV} "
        "to a prebuilt jar")


def spark_jars_dir() -> Path:
    """The jars of the Spark a session here runs, found as PySpark's launcher finds its Spark: ``SPARK_HOME``
    when it is set (a Spark distribution: EMR, Dataproc, the Spark images; its ``pyspark`` under
    ``$SPARK_HOME/python`` has no jars of its own), else the home pyspark's ``find_spark_home`` finds (the pip
    package itself, or the distribution around ``python/pyspark``). ``jars/``, or a source build's
    ``assembly/target/scala-*/jars``. Raises :class:`BridgeBuildError` naming every place looked at."""
    import pyspark

    package = Path(pyspark.__file__).resolve().parent
    home = os.environ.get("SPARK_HOME")
    looked = [f"SPARK_HOME={home}" if home else "SPARK_HOME (unset)"]
    if not home:
        import contextlib
        import io

        from pyspark.find_spark_home import _find_spark_home

        try:
            with contextlib.redirect_stderr(io.StringIO()):  # it prints its own advice before exiting
                home = _find_spark_home()
        except SystemExit:
            home = None
        looked.append(f"pyspark's find_spark_home: {home or 'nothing found'}")
    candidates = [Path(home) / "jars", *sorted(Path(home).glob("assembly/target/scala-*/jars"))] if home else []
    candidates.append(package / "jars")
    for jars in candidates:
        if jars.is_dir() and any(jars.glob("spark-core_*.jar")):
            return jars
    raise BridgeBuildError(
        f"no Spark jars found for PySpark {pyspark.__version__} at {package} (looked in "
        f"{', '.join(looked)}; {', '.join(str(c) for c in candidates)}). A pip-installed PySpark has them in "
        "pyspark/jars; a Spark distribution's pyspark (under $SPARK_HOME/python) has none of its own: set "
        f"SPARK_HOME to the distribution's directory (the one holding jars/ and bin/), or set {JAR_ENV} to a "
        "prebuilt bridge jar")


def spark_defaults() -> dict[str, str]:
    """The ``spark-defaults.conf`` that ``spark-submit`` reads: in ``SPARK_CONF_DIR``, else in the Spark's ``conf/``
    (``{}`` if there is none)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        try:
            conf_dir = str(spark_jars_dir().parent / "conf")
        except (BridgeBuildError, ImportError):
            return {}
    return read_spark_defaults(Path(conf_dir) / "spark-defaults.conf")


SHIPPED_JARS = PACKAGE_DIR / "jars"
"""Where a wheel carries its prebuilt jars, one per Spark fingerprint
(:data:`s3commit.spark.jarbuild.BUILT_AGAINST`)."""


def jar_path() -> str:
    """The bridge jar for this s3commit and the installed pyspark: ``S3COMMIT_JAR``; else a jar the wheel carries
    for this Spark's fingerprint; else one compiled with ``javac`` from the carried sources (cached); else a
    :class:`BridgeBuildError` naming the Spark, what the shipped jars serve, and the remedies."""
    prebuilt = os.environ.get(JAR_ENV)
    if prebuilt:
        if not os.path.isfile(prebuilt):
            raise BridgeBuildError(f"{JAR_ENV}={prebuilt} does not exist")
        return prebuilt
    import pyspark

    jars = spark_jars_dir()
    fp = fingerprint(jars)
    shipped = SHIPPED_JARS / shipped_jar_name(__version__, fp)
    if shipped.is_file():
        return str(shipped)
    javac = shutil.which("javac")
    try:
        root = _source_root()
    except BridgeBuildError:
        root = None
    if root is None or javac is None:
        carried = sorted(p.name for p in SHIPPED_JARS.glob("*.jar")) if SHIPPED_JARS.is_dir() else []
        raise BridgeBuildError(
            f"no s3commit bridge jar fits PySpark {pyspark.__version__} ({fp.describe()}): this s3commit carries "
            f"{', '.join(carried) or 'no prebuilt jar'} (built against PySpark "
            f"{' and '.join(BUILT_AGAINST.values())}), and "
            + ("its Java sources were not found" if root is None else "javac was not found on PATH to build one")
            + f". Remedies: install a PySpark those jars serve (3.5.x or 4.x), install a JDK 17 (javac) so the "
              f"carried sources are compiled, or set {JAR_ENV} to a jar built with `python -m s3commit.spark build`")
    files = bridge_sources(root, fp.scala, jars)
    # The key covers the version, the Spark and its fingerprint, and every source (path and bytes).
    digest = hashlib.sha256(f"{__version__}|{pyspark.__version__}|{fp}".encode())
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(file.read_bytes())
    name = f"s3commit-bridge-{__version__}-spark{pyspark.__version__}-scala{fp.scala}-{digest.hexdigest()[:12]}.jar"
    jar = user_cache_dir() / name
    if not jar.is_file():
        compile_jar(root, jars, jar, __version__, javac=javac)
    return str(jar)
