"""PySpark binding: the bridge jar, and ``configure()`` to point a SparkSession at s3commit.

The only module that imports pyspark. ``spark_conf()`` returns these settings and ``configure(builder)`` applies
them; ``python -m s3commit.spark conf`` prints them as ``--jars``/``--conf`` arguments for ``spark-submit``,
``pyspark`` and ``start-connect-server.sh``, and ``python -m s3commit.spark build`` the jar's path:

- ``spark.jars``: the bridge jar (built on first use with ``javac`` against the installed pyspark's jars,
  then cached; Maven is never needed);
- ``spark.sql.sources.commitProtocolClass=s3commit.spark.S3CommitProtocol`` (DataFrame and SQL writes);
- Hadoop's committer bindings for RDD and Hadoop OutputFormat writes (``saveAsTextFile``,
  ``saveAsNewAPIHadoopFile``, ``saveAsHadoopFile``...), which never consult the SQL key:
  ``mapreduce.outputcommitter.factory.scheme.s3a`` (new API) and ``mapred.output.committer.class`` (old API);
- ``spark.hadoop.fs.s3a.impl=s3commit.hadoop.S3FileSystem`` and its ``AbstractFileSystem`` binding (for Hadoop's
  ``FileContext``; unless you keep hadoop-aws's S3A), so ``s3a://`` works on a plain ``pip install pyspark``;
- Structured Streaming (unless ``streaming=False``): s3commit's checkpoint manager (every checkpoint file
  written in place, atomically, no rename) and the file sink's commit protocol (a batch's files stay pending
  uploads until the batch is in the sink's log);
- the committer and S3 options as ``spark.hadoop.fs.s3a.*`` keys;
- ``S3COMMIT_PYTHON`` for the driver and every executor (``spark.executorEnv.S3COMMIT_PYTHON``; for a driver
  launched by ``spark-submit``, ``spark.s3commit.python``), so each JVM's sidecar runs with this Python.

``conf [--committer NAME] [--endpoint-url URL] [--region R] [--path-style] [--python PATH] [--conf KEY=VALUE
...]``: a ``--conf`` key of ``fs.s3a.*``/``s3commit.*`` is a Hadoop key (passed as ``spark.hadoop.<key>``); a
``spark.*`` key is passed as is. Bad options: a clear error, exit 2.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from s3commit import __version__
from s3commit.config import CommitterName, ConflictMode
from s3commit.errors import ConfigError

PROTOCOL_CLASS = "s3commit.spark.S3CommitProtocol"
FILESYSTEM_CLASS = "s3commit.hadoop.S3FileSystem"
ABSTRACT_FILESYSTEM_CLASS = "s3commit.hadoop.S3AbstractFileSystem"
"""Hadoop's ``FileContext`` binding for ``s3a://`` (``fs.AbstractFileSystem.s3a.impl``), over the FileSystem."""
CHECKPOINT_MANAGER_CLASS = "s3commit.spark.S3CheckpointFileManager"
"""Structured Streaming's checkpoint files, written in place with no rename (other file systems: Spark's own)."""
STREAMING_PROTOCOL_CLASS = "s3commit.spark.S3StreamingCommitProtocol"
"""The file sink's commit protocol: a batch's files stay pending uploads until the batch is in the sink's log."""
STREAMING_KEYS = {
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_MANAGER_CLASS,
    "spark.sql.streaming.commitProtocolClass": STREAMING_PROTOCOL_CLASS,
}
COMMITTER_FACTORY_CLASS = "s3commit.hadoop.S3CommitterFactory"
"""Hadoop's committer factory for ``s3a://`` (new ``mapreduce`` API): ``saveAsNewAPIHadoopFile``/``Dataset``."""
MAPRED_COMMITTER_CLASS = "s3commit.hadoop.S3MapRedCommitter"
"""The old ``mapred`` API's committer (every destination; Hadoop's FileOutputCommitter for non-S3 ones)."""
HADOOP_COMMITTER_KEYS = {
    "mapreduce.outputcommitter.factory.scheme.s3a": COMMITTER_FACTORY_CLASS,
    "mapred.output.committer.class": MAPRED_COMMITTER_CLASS,
}
JAR_ENV = "S3COMMIT_JAR"
"""Path of a prebuilt bridge jar; skips the build (for machines with a JRE but no javac)."""


class BridgeBuildError(RuntimeError):
    """The bridge jar could not be found or built."""


SCALA_VERSIONS = ("2.12", "2.13")
"""The Scala versions the bridge has sources for: 2.12 (PySpark 3.5), 2.13 (PySpark 4.x)."""


def _source_root() -> Path:
    """The Java sources: ``jvm-bridge/src/`` beside the package (a source checkout or editable install), with
    ``main/java`` (every Spark version), ``scala-lines/java`` (the class whose signature differs between Scala
    lines, mapped per line) and the optional source sets."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "jvm-bridge" / "src", here / "java"):
        if (candidate / "main" / "java").is_dir():
            return candidate
    raise BridgeBuildError(
        "the bridge's Java sources were not found (expected jvm-bridge/src/main/java beside the s3commit "
        f"package at {here}); install s3commit from a source checkout (pip install -e .) or set {JAR_ENV} "
        "to a prebuilt jar")


def _jars_have_class(jars: Path, entry: str, pattern: str = "hadoop-client-api-*.jar") -> bool:
    for jar in sorted(jars.glob(pattern)):
        with zipfile.ZipFile(jar) as archive:
            try:
                archive.getinfo(entry)
                return True
            except KeyError:
                continue
    return False


def _spark_jars() -> Path:
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise BridgeBuildError(f"pyspark at {jars.parent} has no jars/ directory")
    return jars


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


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "s3commit"


def jar_path() -> str:
    """The bridge jar for this s3commit and pyspark, building it with ``javac`` if needed."""
    prebuilt = os.environ.get(JAR_ENV)
    if prebuilt:
        if not os.path.isfile(prebuilt):
            raise BridgeBuildError(f"{JAR_ENV}={prebuilt} does not exist")
        return prebuilt
    import pyspark

    root, jars = _source_root(), _spark_jars()
    scala = scala_version(jars)
    files = bridge_sources(root, scala, jars)
    layout = streaming_layout(jars)
    # The key covers the version, the Spark, Scala and streaming layout it is built for, and every source (path
    # and bytes).
    digest = hashlib.sha256(f"{__version__}|{pyspark.__version__}|scala-{scala}|{layout}".encode())
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(file.read_bytes())
    name = f"s3commit-bridge-{__version__}-spark{pyspark.__version__}-scala{scala}-{digest.hexdigest()[:12]}.jar"
    jar = _cache_dir() / name
    if jar.is_file():
        return str(jar)
    javac = shutil.which("javac")
    if javac is None:
        raise BridgeBuildError(
            "building the s3commit bridge jar needs a JDK (javac was not found on PATH; a JRE is not enough). "
            f"Install a JDK 17, or set {JAR_ENV} to a jar built elsewhere with `python -m s3commit.spark build`")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="s3commit-bridge-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        sources = []
        for file in files:
            original = file.read_text(encoding="utf-8")
            text = original
            if file.is_relative_to(root / STREAMING_SOURCES):
                text = streaming_source(original, layout)
            elif file.is_relative_to(root / SCALA_LINE_SOURCES):
                text = scala_line_source(original, scala)
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
        (classes / "s3commit-bridge.properties").write_text(f"version={__version__}\n")
        partial = Path(tmp) / "bridge.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: s3commit\n")
            for path in sorted(classes.rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, jar)  # atomic: concurrent builders each produce the same jar
    return str(jar)


def hadoop_options(*, committer: str = "magic", endpoint_url: str | None = None, region: str | None = None,
                   path_style: bool | None = None, access_key: str | None = None, secret_key: str | None = None,
                   session_token: str | None = None, conflict_mode: str | None = None,
                   threads: int | None = None, part_size: str | int | None = None,
                   extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The ``fs.s3a.*`` options for a committer and endpoint (validated here, before Spark starts)."""
    options = {"fs.s3a.committer.name": CommitterName.parse(committer, what="committer name").value}
    if options["fs.s3a.committer.name"].startswith("rename"):
        raise ConfigError("the rename committers are Python-only baselines; in Spark, leave "
                          "spark.sql.sources.commitProtocolClass unset to get Spark's own rename protocol")
    if endpoint_url:
        options["fs.s3a.endpoint"] = endpoint_url
        options["fs.s3a.path.style.access"] = "true" if path_style is None else str(path_style).lower()
    elif path_style is not None:
        options["fs.s3a.path.style.access"] = str(path_style).lower()
    if region:
        options["fs.s3a.endpoint.region"] = region
    if access_key:
        options["fs.s3a.access.key"] = access_key
    if secret_key:
        options["fs.s3a.secret.key"] = secret_key
    if session_token:
        options["fs.s3a.session.token"] = session_token
    if conflict_mode:
        mode = ConflictMode.parse(conflict_mode, what="conflict mode")
        options["fs.s3a.committer.staging.conflict-mode"] = mode.value
    if threads is not None:
        options["fs.s3a.committer.threads"] = str(threads)
    if part_size is not None:
        options["fs.s3a.multipart.size"] = str(part_size)
    for key, value in (extra or {}).items():
        options[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return options


def spark_conf(*, committer: str = "magic", endpoint_url: str | None = None, region: str | None = None,
               path_style: bool | None = None, access_key: str | None = None, secret_key: str | None = None,
               session_token: str | None = None, conflict_mode: str | None = None, threads: int | None = None,
               part_size: str | int | None = None, use_s3a_filesystem: bool = True, rdd_writes: bool = True,
               streaming: bool = True, extra: Mapping[str, Any] | None = None,
               spark_options: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every Spark setting that makes a session write through s3commit, as ``{key: value}``: the one source
    of :func:`configure` and of ``python -m s3commit.spark conf`` (``--jars``/``--conf`` arguments for
    ``spark-submit``, ``pyspark`` and a Spark Connect server).

    The options are :func:`configure`'s. ``spark_options``: settings already made (``spark.pyspark.python``
    picks the sidecars' Python). ``spark.jars`` is the bridge jar (built on first use); the sidecars' Python is
    named for the executors (``spark.executorEnv.S3COMMIT_PYTHON``) and for a driver launched by
    ``spark-submit`` (``spark.s3commit.python``, which the driver's JVM reads as a system property).
    """
    options = hadoop_options(committer=committer, endpoint_url=endpoint_url, region=region, path_style=path_style,
                             access_key=access_key, secret_key=secret_key, session_token=session_token,
                             conflict_mode=conflict_mode, threads=threads, part_size=part_size, extra=extra)
    conf = {"spark.jars": jar_path(), "spark.sql.sources.commitProtocolClass": PROTOCOL_CLASS}
    if use_s3a_filesystem:
        conf["spark.hadoop.fs.s3a.impl"] = FILESYSTEM_CLASS
        conf["spark.hadoop.fs.AbstractFileSystem.s3a.impl"] = ABSTRACT_FILESYSTEM_CLASS
        if streaming:
            conf.update(STREAMING_KEYS)
    if rdd_writes:
        conf.update({f"spark.hadoop.{key}": value for key, value in HADOOP_COMMITTER_KEYS.items()})
    conf.update({f"spark.hadoop.{key}": value for key, value in options.items()})
    python = sidecar_python(dict(spark_options or {}))
    conf[SIDECAR_PYTHON_KEY] = python
    conf["spark.executorEnv.S3COMMIT_PYTHON"] = python
    return conf


SIDECAR_PYTHON_KEY = "spark.s3commit.python"
"""The sidecars' Python for a driver launched by ``spark-submit`` (``SidecarProcess.java`` reads it)."""


def configure(builder: Any, *, committer: str = "magic", endpoint_url: str | None = None,
              region: str | None = None, path_style: bool | None = None, access_key: str | None = None,
              secret_key: str | None = None, session_token: str | None = None, conflict_mode: str | None = None,
              threads: int | None = None, part_size: str | int | None = None, use_s3a_filesystem: bool = True,
              rdd_writes: bool = True, streaming: bool = True, extra: Mapping[str, Any] | None = None) -> Any:
    """Configure a ``SparkSession.builder`` to write through s3commit (the settings of :func:`spark_conf`);
    returns the builder.

    Args:
        builder: ``SparkSession.builder`` (or anything with ``.config(key, value)``).
        committer: ``magic``, ``directory`` or ``partitioned``.
        endpoint_url, region, path_style, access_key, secret_key, session_token: where S3 is and how to
            sign in; omitted ones fall back to boto3's resolution in the sidecar (env, profiles).
        conflict_mode, threads, part_size: committer options (S3A's keys).
        use_s3a_filesystem: serve ``s3a://`` with s3commit's FileSystem (False keeps hadoop-aws's S3A for
            reads; s3commit's committers still do the writes' S3 work).
        rdd_writes: also commit RDD and Hadoop OutputFormat writes to ``s3a://`` through s3commit
            (``saveAsTextFile``, ``saveAsHadoopFile``, ``saveAsNewAPIHadoopFile``...) by setting
            ``mapreduce.outputcommitter.factory.scheme.s3a`` and ``mapred.output.committer.class``; False
            leaves them to Hadoop's FileOutputCommitter (renames).
        streaming: Structured Streaming through s3commit (with ``use_s3a_filesystem``): checkpoints written in
            place with no rename and ``If-None-Match: *`` where Spark forbids overwriting
            (``spark.sql.streaming.checkpointFileManagerClass``), and the file sink's batches committed as
            pending uploads (``spark.sql.streaming.commitProtocolClass``). False leaves both to Spark.
        extra: more Hadoop keys (``fs.s3a.*``, ``s3commit.*``).
    """
    existing = dict(getattr(builder, "_options", {}))
    conf = spark_conf(committer=committer, endpoint_url=endpoint_url, region=region, path_style=path_style,
                      access_key=access_key, secret_key=secret_key, session_token=session_token,
                      conflict_mode=conflict_mode, threads=threads, part_size=part_size,
                      use_s3a_filesystem=use_s3a_filesystem, rdd_writes=rdd_writes, streaming=streaming,
                      extra=extra, spark_options=existing)
    if existing.get("spark.jars"):
        conf["spark.jars"] = f"{existing['spark.jars']},{conf['spark.jars']}"
    for key, value in conf.items():
        builder = builder.config(key, value)
    # The driver's JVM starts when the session is created, in this process: it inherits the environment.
    os.environ["S3COMMIT_PYTHON"] = conf[SIDECAR_PYTHON_KEY]
    return builder


def sidecar_python(spark_options: dict[str, str]) -> str:
    """The Python every sidecar runs: ``S3COMMIT_PYTHON``, else the one PySpark's workers use
    (``spark.pyspark.python``, ``PYSPARK_PYTHON``), else this interpreter (it has s3commit: it runs this).
    Empty values count as unset."""
    for candidate in (os.environ.get("S3COMMIT_PYTHON"), spark_options.get("spark.pyspark.python"),
                      os.environ.get("PYSPARK_PYTHON")):
        if candidate:
            return candidate
    return sys.executable


HADOOP_PREFIXES = ("fs.s3a.", "s3commit.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m s3commit.spark",
                                     description="s3commit's bridge jar and Spark settings")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build (or find) the bridge jar and print its path")
    conf = commands.add_parser("conf", help="print --jars/--conf arguments for spark-submit, pyspark and a "
                                            "Spark Connect server")
    conf.add_argument("--committer", default="magic", help="magic (default), directory or partitioned")
    conf.add_argument("--endpoint-url", help="the S3 endpoint (default: AWS, as boto3 resolves it)")
    conf.add_argument("--region", help="the S3 region")
    conf.add_argument("--path-style", action="store_true", help="path-style addressing (default with an endpoint)")
    conf.add_argument("--python", help="the sidecars' Python on every node (default: this one, or "
                                       "S3COMMIT_PYTHON / PYSPARK_PYTHON if set)")
    conf.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                      help="another setting: fs.s3a.* and s3commit.* keys are Hadoop keys; spark.* as is")
    return parser


def conf_arguments(args: argparse.Namespace) -> list[str]:
    """The ``--jars``/``--conf`` arguments for ``args`` (raises ConfigError for a bad option)."""
    hadoop: dict[str, str] = {}
    spark: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--conf {item!r}: expected KEY=VALUE")
        if key.startswith(HADOOP_PREFIXES):
            hadoop[key] = value
        elif key.startswith("spark."):
            spark[key] = value
        else:
            raise ConfigError(f"--conf {item!r}: the key must start with fs.s3a., s3commit. or spark.")
    conf = spark_conf(committer=args.committer, endpoint_url=args.endpoint_url, region=args.region,
                      path_style=True if args.path_style else None, extra=hadoop,
                      spark_options={"spark.pyspark.python": args.python} if args.python else None)
    if args.python:
        conf[SIDECAR_PYTHON_KEY] = conf["spark.executorEnv.S3COMMIT_PYTHON"] = args.python
    conf.update(spark)
    out = ["--jars", conf.pop("spark.jars")]
    for key, value in conf.items():
        out += ["--conf", f"{key}={value}"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m s3commit.spark build|conf``: see the module's docstring."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))  # bad usage: exit 2
    if args.command == "build":
        print(jar_path())
        return 0
    try:
        arguments = conf_arguments(args)
    except ConfigError as err:
        print(f"python -m s3commit.spark conf: {err}", file=sys.stderr)
        return 2
    print(shlex.join(arguments))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
