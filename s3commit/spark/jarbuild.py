"""Building the bridge jar: which Java sources serve which Spark, and ``javac`` over them.

Standard library only: the wheel's build backend (``build_backend/s3commit_build.py``) loads this file on its own
to prebuild the jars a wheel carries, before s3commit's dependencies exist; :mod:`s3commit.spark` uses it to find
or build the jar at run time.

A Spark is described by its :class:`Fingerprint`, read from its jars: the Scala line, the Structured Streaming
package layout, and whether its Hadoop has vectored reads. Those are all a bridge jar depends on, so a jar built
against one Spark serves every Spark with the same fingerprint (:func:`shipped_jar_name`).
"""

from __future__ import annotations

import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


class BridgeBuildError(RuntimeError):
    """The bridge jar could not be found or built."""


SCALA_VERSIONS = ("2.12", "2.13")
"""The Scala versions the bridge has sources for: 2.12 (PySpark 3.5), 2.13 (PySpark 4.x)."""


def _jars_have_class(jars: Path, entry: str, pattern: str = "hadoop-client-api-*.jar") -> bool:
    for jar in sorted(jars.glob(pattern)):
        with zipfile.ZipFile(jar) as archive:
            try:
                archive.getinfo(entry)
                return True
            except KeyError:
                continue
    return False


def scala_version(jars: Path) -> str:
    """The Scala binary version (``2.12``, ``2.13``) of the Spark in ``jars``, from its ``scala-library`` jar.

    Raises:
        BridgeBuildError: no scala-library jar, or a Scala version the bridge has no sources for.
    """
    found = sorted(jars.glob("scala-library-*.jar"))
    if not found:
        raise BridgeBuildError(f"no scala-library-*.jar in {jars}: cannot tell which Scala this Spark is built for")
    full = found[-1].name[len("scala-library-"):-len(".jar")]
    version = ".".join(full.split(".")[:2])
    if version not in SCALA_VERSIONS:
        raise BridgeBuildError(
            f"PySpark at {jars.parent} is built for Scala {full}; the s3commit bridge supports Scala "
            f"{' and '.join(SCALA_VERSIONS)} (PySpark 3.5 and 4.x)")
    return version


STREAMING_LAYOUT_CLASS = "org/apache/spark/sql/execution/streaming/checkpointing/CheckpointFileManager.class"
"""Present in Spark 4.x's SQL jar (streaming classes split into ``checkpointing``, ``sinks``...); 3.5 has them all
in ``org.apache.spark.sql.execution.streaming``."""


STREAMING_SOURCES = "streaming-4"
"""The Structured Streaming classes (the checkpoint manager, the file sink's protocol), one source for every Spark:
written against Spark 4.x's packages, their imports mapped for 3.5 at build time (:func:`streaming_source`)."""
_SPARK_35_PACKAGES = (("org.apache.spark.sql.execution.streaming.checkpointing.",
                       "org.apache.spark.sql.execution.streaming."),
                      ("org.apache.spark.sql.execution.streaming.sinks.", "org.apache.spark.sql.execution.streaming."))
"""Where Spark 4.x's streaming classes were in 3.5: all in ``org.apache.spark.sql.execution.streaming``."""


def streaming_layout(jars: Path | None) -> str:
    """Which streaming package layout the Spark in ``jars`` has: ``streaming-4`` or ``streaming-3.5``."""
    if jars is not None and _jars_have_class(jars, STREAMING_LAYOUT_CLASS, "spark-sql_*.jar"):
        return "streaming-4"
    return "streaming-3.5"


def streaming_source(text: str, layout: str) -> str:
    """A streaming class's source (written for ``streaming-4``) for ``layout``: 3.5 gets its imports mapped."""
    if layout == "streaming-4":
        return text
    for spark4, spark35 in _SPARK_35_PACKAGES:
        text = text.replace(f"import {spark4}", f"import {spark35}")
    return text


SCALA_LINE_SOURCES = "scala-lines"
"""``S3CommitProtocol``, whose ``commitJob`` signature differs between Scala lines: one source written for Scala
2.13, its ``Seq`` type mapped for 2.12 at build time (:func:`scala_line_source`)."""
_SCALA_212_TYPES = (("scala.collection.immutable.Seq<", "scala.collection.Seq<"),)
"""Scala 2.13's ``Seq`` in Spark's signatures (``scala.collection.immutable.Seq``) and 2.12's."""


def scala_line_source(text: str, scala: str) -> str:
    """A Scala-line class's source (written for 2.13) for ``scala``: 2.12 gets its ``Seq`` type mapped."""
    if scala == "2.13":
        return text
    for scala213, scala212 in _SCALA_212_TYPES:
        text = text.replace(scala213, scala212)
    return text


def bridge_sources(root: Path, scala: str, jars: Path | None = None) -> list[Path]:
    """The Java files of the bridge for one Scala version: ``main/java`` plus ``scala-lines/java``, plus
    ``hadoop-vectored/java`` when the Hadoop in ``jars`` has vectored reads (3.3.5+: ``FileRange``), plus the
    Structured Streaming classes (``streaming-4/java``: the checkpoint manager and the file sink's protocol
    implement classes that moved between 3.5 and 4.x; :func:`jar_path` maps their imports for 3.5)."""
    if scala not in SCALA_VERSIONS:
        raise BridgeBuildError(f"the bridge has no sources for Scala {scala} (it supports Scala 2.12 and 2.13)")
    files = sorted((root / "main" / "java").rglob("*.java"))
    files += sorted((root / SCALA_LINE_SOURCES / "java").rglob("*.java"))
    streaming = root / STREAMING_SOURCES / "java"
    if streaming.is_dir():
        files += sorted(streaming.rglob("*.java"))
    vectored = root / "hadoop-vectored" / "java"
    if jars is not None and vectored.is_dir() and _jars_have_class(jars, "org/apache/hadoop/fs/FileRange.class"):
        files += sorted(vectored.rglob("*.java"))
    return files


@dataclass(frozen=True)
class Fingerprint:
    """What a bridge jar depends on in a Spark: its Scala line, streaming layout and vectored reads."""

    scala: str
    layout: str
    vectored: bool

    def describe(self) -> str:
        return (f"Scala {self.scala}, {self.layout} streaming packages, "
                f"{'with' if self.vectored else 'without'} Hadoop vectored reads")


VECTORED_CLASS = "org/apache/hadoop/fs/FileRange.class"


def fingerprint(jars: Path) -> Fingerprint:
    """The fingerprint of the Spark whose jars are in ``jars``."""
    return Fingerprint(scala_version(jars), streaming_layout(jars), _jars_have_class(jars, VECTORED_CLASS))


def shipped_jar_name(version: str, fp: Fingerprint) -> str:
    """The file name of a prebuilt jar (in the wheel's ``s3commit/jars/``) for ``fp``."""
    return f"s3commit-bridge-{version}-scala{fp.scala}-{fp.layout}-{'vectored' if fp.vectored else 'plain'}.jar"


BUILT_AGAINST = {"3.5": "3.5.9", "4": "4.3.0"}
"""The PySpark releases the wheel's jars are compiled against, one per Spark line (their fingerprints differ)."""


def compile_jar(root: Path, jars: Path, out: Path, version: str, javac: str = "javac") -> None:
    """Compile the bridge's sources under ``root`` (``jvm-bridge/src``) against the Spark in ``jars`` into the
    jar ``out`` (written atomically), with ``version`` in its properties."""
    fp = fingerprint(jars)
    files = bridge_sources(root, fp.scala, jars)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="s3commit-bridge-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        sources = []
        for file in files:
            original = file.read_text(encoding="utf-8")
            text = original
            if file.is_relative_to(root / STREAMING_SOURCES):
                text = streaming_source(original, fp.layout)
            elif file.is_relative_to(root / SCALA_LINE_SOURCES):
                text = scala_line_source(original, fp.scala)
            if text != original:
                mapped = Path(tmp) / "src" / file.relative_to(root)
                mapped.parent.mkdir(parents=True, exist_ok=True)
                mapped.write_text(text, encoding="utf-8")
                file = mapped
            sources.append(str(file))
        command = [javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", str(classes),
                   "-cp", str(jars / "*"), *sources]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BridgeBuildError(f"javac failed to build the bridge jar:\n{result.stderr[-4000:]}")
        (classes / "s3commit-bridge.properties").write_text(f"version={version}\n")
        partial = Path(tmp) / "bridge.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: s3commit\n")
            for path in sorted(classes.rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(classes).as_posix())
        partial.replace(out)  # atomic: concurrent builders each produce the same jar
