"""The settings that make a Spark session write through s3commit: :func:`spark_conf` is the one source,
:func:`configure` applies them to a ``SparkSession.builder``, :func:`conf_arguments` prints them for
``spark-submit`` (``python -m s3commit.spark conf``, :func:`main`). See :mod:`s3commit.spark` for what they set."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from s3commit.config import s3a_keys
from s3commit.config.options import CommitterName, ConflictMode, StoreOptions
from s3commit.errors import ConfigError
from s3commit.spark.cluster_conf import (
    LIST_KEYS,
    classpath_conf,
    fallback_storage_conf,
    jar_on_executors,
    merged,
)
from s3commit.spark.jar import jar_path, spark_defaults, spark_jars_dir
from s3commit.spark.jarbuild import BridgeBuildError
from s3commit.store import moto_inprocess
from s3commit.store.s3store import S3Store

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
RENAME_FACTORY_CLASS = "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"
"""Hadoop's FileOutputCommitter for ``s3a://`` RDD writes (``rdd_writes=False`` with s3commit's FileSystem): bound
explicitly, because Spark 4.1+ (SPARK-47618) and clusters' spark-defaults bind hadoop-aws's S3ACommitterFactory
there when nothing is, which refuses any FileSystem but S3A's own."""
S3A_FILESYSTEM_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
"""Hadoop's S3A (hadoop-aws): what serves ``s3a://`` on EMR, Dataproc and the Spark images when s3commit's does not."""
MAGIC_TASK_SCHEME = "s3commit-magic"
"""The scheme of s3commit's FileSystem for magic task files where another FileSystem serves ``s3a://``
(``s3commit.hadoop.MagicTaskFileSystem``): registered by the commit protocol in each job's configuration."""
CLASSPATH_KEYS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")
LOG = logging.getLogger("s3commit.spark")
SECRET_KEYS = (".secret.key", ".session.token", ".proxy.password")
"""How the ``fs.s3a.*`` keys whose values are secrets end (per-bucket ones too): a command line that carries one is
named in a warning."""


class S3AKeyWarning(UserWarning):
    """A setting s3commit does not support (it has no effect), or one s3commit's settings replace."""



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
    for bucket in {None, *s3a_keys.buckets(options)}:  # a bad credential, proxy or timeout key fails here, by name
        StoreOptions.from_hadoop_conf(options, bucket=bucket)
    return options


def spark_conf(*, committer: str = "magic", endpoint_url: str | None = None, region: str | None = None,
               path_style: bool | None = None, access_key: str | None = None, secret_key: str | None = None,
               session_token: str | None = None, conflict_mode: str | None = None, threads: int | None = None,
               part_size: str | int | None = None, use_s3a_filesystem: bool = True, rdd_writes: bool = True,
               streaming: bool = True, extra: Mapping[str, Any] | None = None,
               spark_options: Mapping[str, str] | None = None, python: str | None = None,
               fallback_storage: str | None = None, executor_jar: str | None = None) -> dict[str, str]:
    """Every Spark setting that makes a session write through s3commit, as ``{key: value}``: the one source
    of :func:`configure` and of ``python -m s3commit.spark conf`` (``--jars``/``--conf`` arguments for
    ``spark-submit``, ``pyspark`` and a Spark Connect server).

    The options are :func:`configure`'s. ``python``: the sidecars' Python on every node (default:
    :func:`sidecar_python`); ``spark_options``: settings already made (``spark.pyspark.python`` picks the
    sidecars' Python when ``python`` and ``S3COMMIT_PYTHON`` do not). ``spark.jars`` is the bridge jar (built
    on first use); the sidecars' Python is named for the executors (``spark.executorEnv.S3COMMIT_PYTHON``) and
    for a driver launched by ``spark-submit`` (``spark.s3commit.python``, which the driver's JVM reads as a
    system property). The jar is also on the driver's and the executors' classpath (``executor_jar``: where the
    executors' nodes have it, by default :func:`s3commit.spark.cluster_conf.jar_on_executors`) with
    ``spark.plugins``, and ``fallback_storage`` sets Spark's decommissioning keys
    (:func:`s3commit.spark.cluster_conf.fallback_storage_conf`).

    Raises:
        ConfigError: a bad option; :class:`~s3commit.store.moto_inprocess.InProcessMockError` inside moto's in-process
            mock (``mock_aws``) when the sidecars would resolve the S3 it answers only in this process.
    """
    decommissioning = fallback_storage_conf(fallback_storage) if fallback_storage is not None else {}
    options = hadoop_options(committer=committer, endpoint_url=endpoint_url, region=region, path_style=path_style,
                             access_key=access_key, secret_key=secret_key, session_token=session_token,
                             conflict_mode=conflict_mode, threads=threads, part_size=part_size, extra=extra)
    moto_inprocess.refuse_other_processes("Spark's S3 work runs in its sidecars, a Python process beside each JVM",
                                          lambda: S3Store(StoreOptions.from_hadoop_conf(options)).requests.client)
    jar = jar_path()
    conf = {"spark.jars": jar, "spark.sql.sources.commitProtocolClass": PROTOCOL_CLASS}
    if use_s3a_filesystem:
        conf["spark.hadoop.fs.s3a.impl"] = FILESYSTEM_CLASS
        conf["spark.hadoop.fs.AbstractFileSystem.s3a.impl"] = ABSTRACT_FILESYSTEM_CLASS
        if streaming:
            conf.update(STREAMING_KEYS)
    if rdd_writes:
        conf.update({f"spark.hadoop.{key}": value for key, value in HADOOP_COMMITTER_KEYS.items()})
    elif use_s3a_filesystem:
        conf["spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a"] = RENAME_FACTORY_CLASS
    conf.update({f"spark.hadoop.{key}": value for key, value in options.items()})
    message = s3a_keys.warning(options)
    if message:
        warnings.warn(message, S3AKeyWarning, stacklevel=2)
    python = python or sidecar_python(dict(spark_options or {}))
    conf[SIDECAR_PYTHON_KEY] = python
    conf["spark.executorEnv.S3COMMIT_PYTHON"] = python
    conf.update(classpath_conf(jar, executor_jar or jar_on_executors(jar, python)))
    conf.update(decommissioning)
    return conf


SIDECAR_PYTHON_KEY = "spark.s3commit.python"
"""The sidecars' Python for a driver launched by ``spark-submit`` (``SidecarProcess.java`` reads it)."""


def configure(builder: Any, *, committer: str = "magic", endpoint_url: str | None = None,
              region: str | None = None, path_style: bool | None = None, access_key: str | None = None,
              secret_key: str | None = None, session_token: str | None = None, conflict_mode: str | None = None,
              threads: int | None = None, part_size: str | int | None = None, use_s3a_filesystem: bool = True,
              rdd_writes: bool = True, streaming: bool = True, extra: Mapping[str, Any] | None = None,
              fallback_storage: str | None = None, executor_jar: str | None = None) -> Any:
    """Configure a ``SparkSession.builder`` to write through s3commit (the settings of :func:`spark_conf`);
    returns the builder.

    Args:
        builder: ``SparkSession.builder`` (or anything with ``.config(key, value)``).
        committer: ``magic``, ``directory`` or ``partitioned``.
        endpoint_url, region, path_style, access_key, secret_key, session_token: where S3 is and how to
            sign in; omitted ones fall back to boto3's resolution in the sidecar (env, profiles).
        conflict_mode, threads, part_size: committer options (S3A's keys).
        use_s3a_filesystem: serve ``s3a://`` with s3commit's FileSystem (False keeps hadoop-aws's S3A for
            reads and other writes; s3commit's committers, magic included, still commit the writes: magic task
            files go through s3commit's own ``s3commit-magic://`` FileSystem). Which one serves ``s3a://`` is
            logged in one line (:func:`s3a_filesystem`).
        rdd_writes: also commit RDD and Hadoop OutputFormat writes to ``s3a://`` through s3commit
            (``saveAsTextFile``, ``saveAsHadoopFile``, ``saveAsNewAPIHadoopFile``...) by setting
            ``mapreduce.outputcommitter.factory.scheme.s3a`` and ``mapred.output.committer.class``; False
            leaves them to Hadoop's FileOutputCommitter (renames).
        streaming: Structured Streaming through s3commit (with ``use_s3a_filesystem``): checkpoints written in
            place with no rename and ``If-None-Match: *`` where Spark forbids overwriting
            (``spark.sql.streaming.checkpointFileManagerClass``), and the file sink's batches committed as
            pending uploads (``spark.sql.streaming.commitProtocolClass``). False leaves both to Spark.
        extra: more Hadoop keys (``fs.s3a.*``, ``s3commit.*``).
        fallback_storage: an ``s3a://bucket/prefix/`` where decommissioning executors migrate their shuffle
            blocks when no peer can take them, so that no map task runs again (Spark's decommissioning keys).
        executor_jar: the bridge jar's path on the executors' nodes, when it differs from this machine's.
    """
    existing = dict(getattr(builder, "_options", {}))
    conf = spark_conf(committer=committer, endpoint_url=endpoint_url, region=region, path_style=path_style,
                      access_key=access_key, secret_key=secret_key, session_token=session_token,
                      conflict_mode=conflict_mode, threads=threads, part_size=part_size,
                      use_s3a_filesystem=use_s3a_filesystem, rdd_writes=rdd_writes, streaming=streaming,
                      extra=extra, spark_options=existing, fallback_storage=fallback_storage,
                      executor_jar=executor_jar)
    replaced = replaced_settings(conf, existing)
    if replaced:
        warnings.warn(f"configure() replaces settings made before it: {'; '.join(replaced)}", S3AKeyWarning,
                      stacklevel=2)
    conf = merged({**spark_defaults(), **existing}, conf)  # list settings (jars, plugins, classpaths) extended
    for key, value in conf.items():
        builder = builder.config(key, value)
    # The driver's JVM starts when the session is created, in this process: it inherits the environment.
    os.environ["S3COMMIT_PYTHON"] = conf[SIDECAR_PYTHON_KEY]
    line, served = s3a_filesystem({**spark_defaults(), **existing, **conf})
    LOG.log(logging.INFO if served else logging.WARNING, "%s", line)
    return builder


def s3a_filesystem(conf: Mapping[str, str]) -> tuple[str, bool]:
    """One line saying which FileSystem serves ``s3a://`` in a session with these settings (the builder's, with
    s3commit's), and whether one does: :func:`configure` logs it (``s3commit.spark``, INFO; WARNING when none
    does). The JVM says the same at each job's setup (``s3commit.spark.S3CommitProtocol``, INFO)."""
    impl = conf.get("spark.hadoop.fs.s3a.impl", "")
    if impl == FILESYSTEM_CLASS:
        return f"s3commit: s3a:// is served by s3commit's FileSystem ({FILESYSTEM_CLASS}): reads, writes, commits", True
    found = hadoop_aws(conf)
    if impl or found:
        what = impl or S3A_FILESYSTEM_CLASS
        origin = "spark.hadoop.fs.s3a.impl" if impl else found
        return (f"s3commit: s3a:// stays with {what} ({origin}): reads and other writes go through it, s3commit's "
                f"protocol commits the writes (magic task files through its own {MAGIC_TASK_SCHEME}:// "
                "FileSystem)"), True
    return ("s3commit: no FileSystem serves s3a:// in this session (use_s3a_filesystem=False, and no hadoop-aws on "
            f"{', '.join(CLASSPATH_KEYS)} or in Spark's jars): s3commit's protocol still commits writes, but "
            "reading s3a:// fails; pass use_s3a_filesystem=True, or add hadoop-aws"), False


def hadoop_aws(conf: Mapping[str, str]) -> str:
    """Where this session's settings or Spark's jars put hadoop-aws (S3A) on the classpath, or ``""``."""
    for key in CLASSPATH_KEYS:
        for entry in str(conf.get(key, "")).replace(":", ",").split(","):
            if "hadoop-aws" in entry:
                return f"{Path(entry.strip()).name or entry.strip()} on {key}"
    try:
        jars = spark_jars_dir()
    except (BridgeBuildError, ImportError):
        return ""
    found = sorted(jars.glob("hadoop-aws-*.jar"))
    return f"{found[0].name} in {jars}" if found else ""


def sidecar_python(spark_options: dict[str, str]) -> str:
    """The Python every sidecar runs: ``S3COMMIT_PYTHON``, else the one PySpark's workers use
    (``spark.pyspark.python``, ``PYSPARK_PYTHON``), else this interpreter (it has s3commit: it runs this).
    Empty values count as unset."""
    for candidate in (os.environ.get("S3COMMIT_PYTHON"), spark_options.get("spark.pyspark.python"),
                      os.environ.get("PYSPARK_PYTHON")):
        if candidate:
            return candidate
    return sys.executable


def replaced_settings(conf: Mapping[str, str], existing: Mapping[str, str]) -> list[str]:
    """``key=old -> new`` for each setting of ``existing`` (a builder's, a spark-defaults.conf's) that ``conf``
    gives another value: s3commit's win (a builder's last ``config``, ``--conf`` over the properties file)."""
    return [f"{key}={existing[key]} -> {value}" for key, value in conf.items()
            if key not in (*LIST_KEYS, SIDECAR_PYTHON_KEY) and key in existing and str(existing[key]) != value]


HADOOP_PREFIXES = ("fs.s3a.", "s3commit.")


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
                      path_style=True if args.path_style else None, extra=hadoop, python=args.python,
                      fallback_storage=args.fallback_storage, executor_jar=args.executor_jar)
    conf.update({key: value for key, value in spark.items() if key not in LIST_KEYS})  # the user's settings win;
    # a list (spark.plugins, the classpaths) keeps the entries given or in spark-defaults.conf, and s3commit's
    conf = merged({**spark_defaults(), **spark}, conf)
    out = ["--jars", conf.pop("spark.jars")]
    for key, value in conf.items():
        out += ["--conf", f"{key}={value}"]
    return out


def conf_notes(arguments: Sequence[str]) -> list[str]:
    """What a user of the printed ``arguments`` should know: secrets they carry in clear text, and the settings
    of the cluster's spark-defaults.conf they replace (``--conf`` wins)."""
    conf = dict(item.partition("=")[::2] for item in arguments[3::2])  # after --jars <jar>: --conf k=v ...
    notes = []
    secrets = sorted(k for k in conf
                     if k.removeprefix("spark.hadoop.").startswith("fs.s3a.") and k.endswith(SECRET_KEYS))
    if secrets:
        notes.append(f"the arguments carry {', '.join(secrets)} in clear text (seen in the process list, shell "
                     "history and logs of the command line): give the sidecars credentials through an instance or "
                     "container role, web identity or the environment instead (docs/spark.md, Installing on a "
                     "cluster)")
    replaced = replaced_settings(conf, spark_defaults())
    if replaced:
        notes.append(f"these arguments replace spark-defaults.conf's settings: {'; '.join(replaced)}")
    return notes


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
    conf.add_argument("--executor-jar", help="the bridge jar's path on the executors' nodes (default: this one's, or "
                                             "inside the archive when --python is relative)")
    conf.add_argument("--fallback-storage", metavar="URI", help="s3a://bucket/prefix/ for the shuffle blocks of "
                                                                "decommissioning executors")
    conf.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                      help="another setting: fs.s3a.* and s3commit.* keys are Hadoop keys; spark.* as is")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m s3commit.spark build|conf``: see the module's docstring."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))  # bad usage: exit 2
    try:
        if args.command == "build":
            print(jar_path())
            return 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", S3AKeyWarning)
            arguments = conf_arguments(args)
    except (ConfigError, BridgeBuildError) as err:
        print(f"python -m s3commit.spark {args.command}: {err}", file=sys.stderr)
        return 2
    for line in [str(w.message) for w in caught if issubclass(w.category, S3AKeyWarning)] + conf_notes(arguments):
        print(f"python -m s3commit.spark conf: warning: {line}", file=sys.stderr)
    print(shlex.join(arguments))
    return 0
