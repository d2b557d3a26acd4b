"""Which Python the sidecars run, as ``configure()`` decides it (no JVM needed)."""

from __future__ import annotations

import sys

import pytest

from s3commit.spark import BridgeBuildError, sidecar_python


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("S3COMMIT_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    return monkeypatch


def test_defaults_to_the_python_running_configure(clean_env):
    # A virtualenv with s3commit: the sidecars must not fall back to whatever python3 is on PATH.
    assert sidecar_python({}) == sys.executable


def test_empty_values_count_as_unset(clean_env):
    clean_env.setenv("S3COMMIT_PYTHON", "")
    clean_env.setenv("PYSPARK_PYTHON", "")
    assert sidecar_python({"spark.pyspark.python": ""}) == sys.executable


def test_pyspark_workers_python_is_used_before_this_one(clean_env):
    clean_env.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert sidecar_python({}) == "/opt/env/bin/python"
    assert sidecar_python({"spark.pyspark.python": "/cluster/python"}) == "/cluster/python"


def test_s3commit_python_wins(clean_env):
    clean_env.setenv("S3COMMIT_PYTHON", "/mine/python")
    clean_env.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert sidecar_python({"spark.pyspark.python": "/cluster/python"}) == "/mine/python"


def test_scala_version_is_read_from_the_scala_library_jar(tmp_path):
    from s3commit.spark import scala_version

    (tmp_path / "scala-library-2.12.18.jar").write_bytes(b"")
    assert scala_version(tmp_path) == "2.12"
    (tmp_path / "scala-library-2.12.18.jar").rename(tmp_path / "scala-library-2.13.16.jar")
    assert scala_version(tmp_path) == "2.13"


def test_unsupported_or_missing_scala_is_named(tmp_path):
    from s3commit.spark import BridgeBuildError, scala_version

    with pytest.raises(BridgeBuildError, match="no scala-library"):
        scala_version(tmp_path)
    (tmp_path / "scala-library-2.11.12.jar").write_bytes(b"")
    with pytest.raises(BridgeBuildError, match=r"Scala 2\.11\.12.*supports Scala 2\.12 and 2\.13"):
        scala_version(tmp_path)


@pytest.mark.parametrize("scala", ["2.12", "2.13"])
def test_each_scala_build_has_one_commit_protocol_class_with_that_scalas_seq(scala):
    # The common sources plus exactly one S3CommitProtocol, one source whose commitJob takes that Scala's Seq.
    from s3commit.spark import SCALA_LINE_SOURCES, bridge_sources, scala_line_source
    from s3commit.spark.jar import _source_root

    root = _source_root()
    files = [f.relative_to(root).as_posix() for f in bridge_sources(root, scala)]
    protocols = [f for f in files if f.endswith("/S3CommitProtocol.java")]
    assert protocols == [f"{SCALA_LINE_SOURCES}/java/s3commit/spark/S3CommitProtocol.java"]
    assert "main/java/s3commit/spark/S3CommitProtocolBase.java" in files
    text = scala_line_source((root / protocols[0]).read_text(), scala)
    seq = {"2.12": "scala.collection.Seq<TaskCommitMessage>",
           "2.13": "scala.collection.immutable.Seq<TaskCommitMessage>"}[scala]
    assert f"commitJob(JobContext context, {seq} taskCommits)" in text


def test_a_scala_the_bridge_has_no_sources_for_is_named():
    from s3commit.spark import BridgeBuildError, bridge_sources
    from s3commit.spark.jar import _source_root

    with pytest.raises(BridgeBuildError, match=r"no sources for Scala 3\.3 \(it supports Scala 2\.12 and 2\.13\)"):
        bridge_sources(_source_root(), "3.3")


class FakeBuilder:
    def __init__(self):
        self._options = {}

    def config(self, key, value):
        self._options[key] = value
        return self


@pytest.mark.parametrize("rdd_writes", [True, False])
def test_configure_binds_hadoop_committers_for_rdd_writes_unless_told_not_to(clean_env, monkeypatch, rdd_writes):
    import s3commit.spark as spark_module

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/tmp/bridge.jar")
    monkeypatch.setenv("S3COMMIT_PYTHON", sys.executable)  # configure() sets it; restored after the test
    options = spark_module.configure(FakeBuilder(), rdd_writes=rdd_writes)._options
    assert options["spark.sql.sources.commitProtocolClass"] == "s3commit.spark.S3CommitProtocol"
    bound = {k: options.get(f"spark.hadoop.{k}") for k in ("mapreduce.outputcommitter.factory.scheme.s3a",
                                                            "mapred.output.committer.class")}
    if rdd_writes:
        assert bound == {"mapreduce.outputcommitter.factory.scheme.s3a": "s3commit.hadoop.S3CommitterFactory",
                         "mapred.output.committer.class": "s3commit.hadoop.S3MapRedCommitter"}
    else:  # Hadoop's renames, bound explicitly: Spark 4.1+ would bind hadoop-aws's S3A factory there otherwise
        assert bound == {"mapreduce.outputcommitter.factory.scheme.s3a":
                         "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory",
                         "mapred.output.committer.class": None}


STREAMING = {"spark.sql.streaming.checkpointFileManagerClass": "s3commit.spark.S3CheckpointFileManager",
             "spark.sql.streaming.commitProtocolClass": "s3commit.spark.S3StreamingCommitProtocol"}


@pytest.mark.parametrize(("kwargs", "streaming_keys", "abstract_fs"), [
    ({}, True, True),
    ({"streaming": False}, False, True),
    ({"use_s3a_filesystem": False}, False, False),  # hadoop-aws's S3A serves s3a:// (and FileContext) then
])
def test_configure_sets_structured_streaming_up_unless_told_not_to(clean_env, monkeypatch, kwargs, streaming_keys,
                                                                   abstract_fs):
    import s3commit.spark as spark_module

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/tmp/bridge.jar")
    monkeypatch.setenv("S3COMMIT_PYTHON", sys.executable)
    options = spark_module.configure(FakeBuilder(), **kwargs)._options
    assert {k: options.get(k) for k in STREAMING} == (STREAMING if streaming_keys else dict.fromkeys(STREAMING))
    assert options.get("spark.hadoop.fs.AbstractFileSystem.s3a.impl") == (
        "s3commit.hadoop.S3AbstractFileSystem" if abstract_fs else None)


def test_streaming_sources_follow_the_spark_package_layout(tmp_path):
    # Spark 4.x moved the checkpoint manager into ...streaming.checkpointing: the build picks the matching set.
    import zipfile

    from s3commit.spark import bridge_sources, streaming_layout
    from s3commit.spark.jar import _source_root

    with zipfile.ZipFile(tmp_path / "spark-sql_2.13-4.3.0.jar", "w") as jar:
        jar.writestr("org/apache/spark/sql/execution/streaming/checkpointing/CheckpointFileManager.class", b"")
    assert streaming_layout(tmp_path) == "streaming-4"
    assert streaming_layout(tmp_path / "nothing") == "streaming-3.5"
    root = _source_root()
    files = [f.relative_to(root).as_posix() for f in bridge_sources(root, "2.13", tmp_path)]
    managers = [f for f in files if f.endswith("/S3CheckpointFileManager.java")]
    assert managers == ["streaming-4/java/s3commit/spark/S3CheckpointFileManager.java"]
    assert "main/java/s3commit/spark/StreamingSinkJob.java" in files


def test_one_streaming_source_serves_both_spark_layouts():
    # The streaming classes are written for Spark 4.x's packages; for 3.5 the build maps their imports.
    from s3commit.spark import STREAMING_SOURCES, streaming_source
    from s3commit.spark.jar import _source_root

    for file in sorted((_source_root() / STREAMING_SOURCES / "java").rglob("*.java")):
        text = file.read_text()
        assert streaming_source(text, "streaming-4") == text
        mapped = streaming_source(text, "streaming-3.5")
        assert ".streaming.checkpointing." not in mapped and ".streaming.sinks." not in mapped, file.name
    manager = (_source_root() / STREAMING_SOURCES / "java/s3commit/spark/S3CheckpointFileManager.java").read_text()
    assert ("import org.apache.spark.sql.execution.streaming.CheckpointFileManager;"
            in streaming_source(manager, "streaming-3.5"))


def test_configure_applies_exactly_spark_conf(clean_env, monkeypatch):
    import s3commit.spark as spark_module

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/tmp/bridge.jar")
    monkeypatch.setenv("S3COMMIT_PYTHON", "/opt/env/bin/python")
    kwargs = {"committer": "directory", "endpoint_url": "http://127.0.0.1:9000", "region": "eu-west-1",
              "conflict_mode": "replace", "extra": {"fs.s3a.multipart.size": "64M"}}
    builder = FakeBuilder()
    builder._options["spark.jars"] = "/other.jar"
    options = spark_module.configure(builder, **kwargs)._options
    expected = spark_module.spark_conf(**kwargs)
    assert options == {**expected, "spark.jars": "/other.jar,/tmp/bridge.jar"}
    assert expected["spark.s3commit.python"] == expected["spark.executorEnv.S3COMMIT_PYTHON"] == "/opt/env/bin/python"
    assert expected["spark.hadoop.fs.s3a.committer.staging.conflict-mode"] == "replace"


def test_the_conf_command_prints_spark_conf_as_shell_arguments(clean_env, monkeypatch, capsys):
    import shlex

    import s3commit.spark as spark_module
    from s3commit.spark import main

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/opt/jars/s3commit bridge.jar")
    assert main(["conf", "--committer", "partitioned", "--endpoint-url", "http://127.0.0.1:9000", "--region", "r",
                 "--python", "/opt/env/bin/python", "--conf", "fs.s3a.multipart.size=64M",
                 "--conf", "spark.sql.shuffle.partitions=4"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1, "one line"
    words = shlex.split(out)
    assert words[:2] == ["--jars", "/opt/jars/s3commit bridge.jar"]
    conf = dict(pair.split("=", 1) for flag, pair in zip(words[2::2], words[3::2], strict=True)
                if flag == "--conf")
    expected = spark_module.spark_conf(committer="partitioned", endpoint_url="http://127.0.0.1:9000", region="r",
                                       extra={"fs.s3a.multipart.size": "64M"})
    expected.pop("spark.jars")
    expected["spark.s3commit.python"] = expected["spark.executorEnv.S3COMMIT_PYTHON"] = "/opt/env/bin/python"
    assert conf == {**expected, "spark.sql.shuffle.partitions": "4"}


def test_the_conf_commands_python_wins_over_this_environments(clean_env, monkeypatch, capsys):
    # A packed virtualenv's relative Python, printed from a shell where S3COMMIT_PYTHON names this one.
    from s3commit.spark import main

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/opt/bridge.jar")
    monkeypatch.setenv("S3COMMIT_PYTHON", "/usr/bin/python3")
    assert main(["conf", "--python", "./environment/bin/python"]) == 0
    out = capsys.readouterr().out
    assert "spark.s3commit.python=./environment/bin/python" in out
    assert "spark.executorEnv.S3COMMIT_PYTHON=./environment/bin/python" in out and "/usr/bin/python3" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["conf", "--committer", "nope"], "'nope' is not a valid committer name"),
    (["conf", "--conf", "novalue"], "--conf 'novalue': expected KEY=VALUE"),
    (["conf", "--conf", "hive.metastore=x"], "must start with fs.s3a., s3commit. or spark."),
    (["conf", "--committer", "rename-v1"], "Python-only baselines"),
])
def test_the_conf_command_refuses_bad_options_with_exit_2(clean_env, monkeypatch, capsys, argv, message):
    from s3commit.spark import main

    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/tmp/bridge.jar")
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_conf_command_without_a_subcommand_is_a_usage_error(capsys):
    from s3commit.spark import main

    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2 and "usage" in capsys.readouterr().err


def test_a_shipped_jar_that_fits_this_spark_is_chosen_over_building(clean_env, monkeypatch, tmp_path):
    from s3commit.spark import jar
    from s3commit.spark.jarbuild import fingerprint, shipped_jar_name

    monkeypatch.delenv("S3COMMIT_JAR", raising=False)
    fp = fingerprint(jar.spark_jars_dir())
    (tmp_path / shipped_jar_name(jar.__version__, fp)).write_bytes(b"jar")
    monkeypatch.setattr("s3commit.spark.jar.SHIPPED_JARS", tmp_path)
    monkeypatch.setattr("s3commit.spark.jar.shutil.which", lambda name: pytest.fail("no build when a shipped jar fits"))
    assert jar.jar_path() == str(tmp_path / shipped_jar_name(jar.__version__, fp))


def test_no_fitting_jar_and_no_javac_is_a_clear_error_naming_spark_the_jars_and_the_remedies(clean_env, monkeypatch,
                                                                                            tmp_path):
    import pyspark

    from s3commit.spark import jar
    from s3commit.spark.jarbuild import Fingerprint, shipped_jar_name

    monkeypatch.delenv("S3COMMIT_JAR", raising=False)
    other = shipped_jar_name(jar.__version__, Fingerprint("2.11", "streaming-2", False))
    (tmp_path / other).write_bytes(b"jar")
    monkeypatch.setattr("s3commit.spark.jar.SHIPPED_JARS", tmp_path)
    monkeypatch.setattr("s3commit.spark.jar.shutil.which", lambda name: None)
    with pytest.raises(BridgeBuildError) as failure:
        jar.jar_path()
    message = str(failure.value)
    assert f"PySpark {pyspark.__version__}" in message and "Scala 2." in message and other in message
    assert "javac was not found" in message and "S3COMMIT_JAR" in message and "JDK 17" in message
