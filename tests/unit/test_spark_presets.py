"""``configure()`` and ``python -m s3commit.spark conf`` against settings already made: Spark 4.1+'s S3A committer
presets (SPARK-47618) and a cluster's spark-defaults.conf; S3A keys refused or named in a warning; secrets on a
printed command line named in a warning (no JVM needed)."""

from __future__ import annotations

import shlex
import sys

import pytest

from s3commit.errors import ConfigError
from s3commit.spark import S3AKeyWarning, configure, main, spark_conf

SPARK_47618 = {
    "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
    "spark.hadoop.fs.s3a.committer.name": "magic",
    "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a": "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory",
    "spark.sql.parquet.output.committer.class": "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter",
    "spark.sql.sources.commitProtocolClass": "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
}
"""What SparkContext sets where spark-hadoop-cloud is on the classpath (4.1+), unless already set."""


class Builder:
    def __init__(self, options=None):
        self._options = dict(options or {})

    def config(self, key, value):
        self._options[key] = value
        return self


@pytest.fixture(autouse=True)
def _jar(monkeypatch):
    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: "/tmp/bridge.jar")
    monkeypatch.setenv("S3COMMIT_PYTHON", sys.executable)
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)


def sparks_presets(options: dict[str, str]) -> dict[str, str]:
    """The session's settings once SparkContext has applied SPARK-47618's ``setIfMissing`` to them."""
    return {**SPARK_47618, **options}


@pytest.mark.parametrize("rdd_writes", [True, False])
def test_spark_41s_s3a_committer_presets_leave_s3commit_bound_everywhere(rdd_writes):
    options = sparks_presets(configure(Builder(), rdd_writes=rdd_writes)._options)
    assert options["spark.sql.sources.commitProtocolClass"] == "s3commit.spark.S3CommitProtocol"
    # RDD writes: s3commit's factory, or Hadoop's renames; never S3A's factory, which refuses s3commit's FileSystem.
    assert options["spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a"] == (
        "s3commit.hadoop.S3CommitterFactory" if rdd_writes
        else "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory")


def test_with_hadoop_aws_kept_and_no_rdd_writes_spark_may_bind_s3as_factory():
    options = configure(Builder(), rdd_writes=False, use_s3a_filesystem=False)._options
    assert "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a" not in options


def test_settings_made_before_configure_that_it_replaces_are_named_once():
    with pytest.warns(S3AKeyWarning, match="configure\\(\\) replaces settings made before it") as caught:
        options = configure(Builder(SPARK_47618))._options
    [message] = [str(w.message) for w in caught]
    assert ("spark.sql.sources.commitProtocolClass=org.apache.spark.internal.io.cloud.PathOutputCommitProtocol -> "
            "s3commit.spark.S3CommitProtocol") in message
    assert "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory -> s3commit.hadoop.S3CommitterFactory" in message
    assert "committer.name" not in message  # the same value: nothing replaced
    parquet = "spark.sql.parquet.output.committer.class"
    assert options[parquet] == SPARK_47618[parquet]  # Spark's own: it serves destinations outside S3


def test_unsupported_s3a_keys_are_named_in_one_warning():
    with pytest.warns(S3AKeyWarning) as caught:
        conf = spark_conf(extra={"fs.s3a.threads.max": "64", "fs.s3a.bucket.logs.multipart.purge": "true",
                                 "fs.s3a.connection.maximum": "128"})
    [message] = [str(w.message) for w in caught]
    assert "fs.s3a.threads.max" in message and "fs.s3a.bucket.logs.multipart.purge" in message
    assert "connection.maximum" not in message.split(":")[0] and conf["spark.hadoop.fs.s3a.threads.max"] == "64"


@pytest.mark.parametrize(("extra", "message"), [
    ({"fs.s3a.aws.credentials.provider": "com.example.Custom"}, "names com.example.Custom"),
    ({"fs.s3a.bucket.logs.proxy.port": "8080"}, "fs.s3a.proxy.port is set without fs.s3a.proxy.host"),
])
def test_bad_s3a_settings_fail_before_spark_starts(extra, message):
    with pytest.raises(ConfigError, match=message):
        spark_conf(extra=extra)


def conf_command(capsys, *argv: str) -> tuple[dict[str, str], str]:
    assert main(["conf", *argv]) == 0
    out, err = capsys.readouterr()
    words = shlex.split(out)
    return dict(pair.split("=", 1) for pair in words[3::2]), err


def test_the_conf_command_warns_of_secrets_it_prints(capsys):
    conf, err = conf_command(capsys, "--conf", "fs.s3a.access.key=AKIAEXAMPLE", "--conf",
                             "fs.s3a.bucket.b.secret.key=do-not-print", "--conf", "fs.s3a.proxy.password=pw")
    assert conf["spark.hadoop.fs.s3a.bucket.b.secret.key"] == "do-not-print"  # printed, as asked ...
    assert "warning: the arguments carry spark.hadoop.fs.s3a.bucket.b.secret.key, " \
           "spark.hadoop.fs.s3a.proxy.password in clear text" in err  # ... and said so
    assert "do-not-print" not in err and "pw" not in err.split("clear text")[0].split("carry")[0]
    _, quiet = conf_command(capsys, "--region", "eu-west-1")
    assert quiet == ""


def test_the_conf_command_names_the_spark_defaults_it_replaces_and_unsupported_keys(capsys, tmp_path, monkeypatch):
    (tmp_path / "spark-defaults.conf").write_text(
        "# a cluster's defaults\n"
        "spark.sql.sources.commitProtocolClass  org.apache.spark.internal.io.cloud.PathOutputCommitProtocol\n"
        "spark.hadoop.fs.s3a.committer.name=directory\n"
        "spark.executor.memory 4g\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    conf, err = conf_command(capsys, "--conf", "fs.s3a.threads.max=8")
    assert conf["spark.sql.sources.commitProtocolClass"] == "s3commit.spark.S3CommitProtocol"
    assert ("these arguments replace spark-defaults.conf's settings: spark.sql.sources.commitProtocolClass="
            "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol -> s3commit.spark.S3CommitProtocol; "
            "spark.hadoop.fs.s3a.committer.name=directory -> magic") in err
    assert "warning: s3commit does not support these S3A settings" in err and "fs.s3a.threads.max" in err
    assert "executor.memory" not in err


def test_configure_says_in_one_line_that_s3commit_serves_s3a(caplog):
    with caplog.at_level("INFO", logger="s3commit.spark"):
        configure(Builder())
    lines = [r for r in caplog.records if r.name == "s3commit.spark"]
    assert len(lines) == 1 and lines[0].levelname == "INFO"
    assert "s3a:// is served by s3commit's FileSystem (s3commit.hadoop.S3FileSystem)" in lines[0].getMessage()


@pytest.mark.parametrize(("options", "origin"), [
    ({"spark.jars": "/opt/hadoop-aws-3.5.0.jar,/opt/bundle-2.35.4.jar"}, "hadoop-aws-3.5.0.jar on spark.jars"),
    ({"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"}, "on spark.jars.packages"),
    ({"spark.driver.extraClassPath": "/x/a.jar:/x/hadoop-aws-3.3.4.jar"}, "hadoop-aws-3.3.4.jar on spark.driver"),
    ({"spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}, "(spark.hadoop.fs.s3a.impl)"),
])
def test_with_hadoop_aws_kept_configure_names_s3a_and_the_magic_scheme(caplog, options, origin):
    with caplog.at_level("INFO", logger="s3commit.spark"):
        configure(Builder(options), use_s3a_filesystem=False)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "s3commit.spark"]
    assert "s3a:// stays with org.apache.hadoop.fs.s3a.S3AFileSystem" in line and origin in line
    assert "s3commit-magic://" in line


def test_with_hadoop_aws_in_sparks_own_jars_configure_finds_it(caplog, monkeypatch, tmp_path):
    (tmp_path / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    monkeypatch.setattr("s3commit.spark.conf.spark_jars_dir", lambda: tmp_path)
    with caplog.at_level("INFO", logger="s3commit.spark"):
        configure(Builder(), use_s3a_filesystem=False)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "s3commit.spark"]
    assert f"hadoop-aws-3.5.0.jar in {tmp_path}" in line


def test_with_no_filesystem_for_s3a_configure_warns_that_reads_fail(caplog, monkeypatch, tmp_path):
    monkeypatch.setattr("s3commit.spark.conf.spark_jars_dir", lambda: tmp_path)
    with caplog.at_level("INFO", logger="s3commit.spark"):
        configure(Builder(), use_s3a_filesystem=False)
    (record,) = [r for r in caplog.records if r.name == "s3commit.spark"]
    assert record.levelname == "WARNING"
    assert "no FileSystem serves s3a://" in record.getMessage() and "reading s3a:// fails" in record.getMessage()
