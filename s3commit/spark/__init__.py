"""PySpark binding: the bridge jar, and ``configure()`` to point a SparkSession at s3commit.

The only module that imports pyspark. ``spark_conf()`` returns these settings and ``configure(builder)`` applies
them; ``python -m s3commit.spark conf`` prints them as ``--jars``/``--conf`` arguments for ``spark-submit``,
``pyspark`` and ``start-connect-server.sh``, and ``python -m s3commit.spark build`` the jar's path:

- ``spark.jars``: the bridge jar (built on first use with ``javac`` against the jars of the Spark PySpark runs:
  ``$SPARK_HOME/jars`` of a distribution, or the pip package's; then cached; Maven is never needed);
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
  launched by ``spark-submit``, ``spark.s3commit.python``), so each JVM's sidecar runs with this Python;
- the jar on the driver's and the executors' classpath too, and ``spark.plugins`` (:mod:`s3commit.spark.cluster_conf`),
  so that Spark's own threads see the FileSystem, not only its tasks;
- with ``fallback_storage``, decommissioning executors migrate their shuffle blocks to S3.

``conf [--committer NAME] [--endpoint-url URL] [--region R] [--path-style] [--python PATH] [--executor-jar PATH]
[--fallback-storage URI] [--conf KEY=VALUE ...]``: a ``--conf`` key of ``fs.s3a.*``/``s3commit.*`` is a Hadoop
key (passed as ``spark.hadoop.<key>``); a ``spark.*`` key is passed as is (list settings such as
``spark.plugins`` keep s3commit's entries too). Bad options: a clear error, exit 2. On stderr, warnings: S3A keys
s3commit does not support, secrets the printed line carries, spark-defaults.conf settings it replaces.

The package: the settings (:mod:`.conf`), the jar for the running Spark (:mod:`.jar`), building it with ``javac``
(:mod:`.jarbuild`, importable alone by the wheel's build backend), and the settings that reach past the task
(:mod:`.cluster_conf`: classpaths, plugins, decommissioning).

May import: :mod:`s3commit.committers` and every layer below it; the only package that imports pyspark.
"""


from s3commit.spark.conf import (
    CHECKPOINT_MANAGER_CLASS,
    PROTOCOL_CLASS,
    STREAMING_PROTOCOL_CLASS,
    S3AKeyWarning,
    configure,
    hadoop_options,
    main,
    sidecar_python,
    spark_conf,
)
from s3commit.spark.jar import JAR_ENV, jar_path, spark_defaults
from s3commit.spark.jarbuild import (
    SCALA_LINE_SOURCES,
    STREAMING_SOURCES,
    BridgeBuildError,
    bridge_sources,
    scala_line_source,
    scala_version,
    streaming_layout,
    streaming_source,
)

__all__ = [
    "CHECKPOINT_MANAGER_CLASS",
    "JAR_ENV",
    "PROTOCOL_CLASS",
    "SCALA_LINE_SOURCES",
    "STREAMING_PROTOCOL_CLASS",
    "STREAMING_SOURCES",
    "BridgeBuildError",
    "S3AKeyWarning",
    "bridge_sources",
    "configure",
    "hadoop_options",
    "jar_path",
    "main",
    "scala_line_source",
    "scala_version",
    "sidecar_python",
    "spark_conf",
    "spark_defaults",
    "streaming_layout",
    "streaming_source",
]
