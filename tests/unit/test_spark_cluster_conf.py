"""What ``configure()``, ``spark_conf()`` and ``python -m s3commit.spark conf`` set beyond the task: the bridge jar on
every JVM's classpath, the plugin for where it is not, and decommissioning to S3 fallback storage (no JVM)."""

from __future__ import annotations

import os
import shlex
import sys

import pytest

import s3commit.spark as spark_module
from s3commit.errors import ConfigError
from s3commit.spark.cluster_conf import FALLBACK_PATH, PLUGIN_CLASS, fallback_storage_conf, jar_on_executors, merged

JAR = "/opt/jars/bridge.jar"


class FakeBuilder:
    def __init__(self, **options):
        self._options = dict(options)

    def config(self, key, value):
        self._options[key] = value
        return self


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path_factory):
    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: JAR)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path_factory.mktemp("no-spark-defaults")))
    monkeypatch.setenv("S3COMMIT_PYTHON", "/opt/env/bin/python")  # configure() sets it; restored after the test
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


def printed(capsys, *argv: str) -> dict[str, str]:
    assert spark_module.main(["conf", *argv]) == 0
    words = shlex.split(capsys.readouterr().out)
    assert words[0] == "--jars"
    return {"spark.jars": words[1], **dict(pair.split("=", 1) for pair in words[3::2])}


def test_the_jar_is_on_the_driver_and_executor_classpath_with_the_plugin_by_default(capsys):
    # Spark's own threads (decommissioning, RPC, an executor's start) resolve fs.s3a.impl through Hadoop's
    # Configuration, which sees the JVM's classpath, not the jars spark.jars adds to the tasks' class loader.
    for conf in (spark_module.configure(FakeBuilder())._options, spark_module.spark_conf(), printed(capsys)):
        assert conf["spark.jars"] == conf["spark.driver.extraClassPath"] == JAR
        assert conf["spark.executor.extraClassPath"] == JAR
        assert conf["spark.plugins"] == PLUGIN_CLASS == "s3commit.spark.S3CommitPlugin"


def test_lists_already_set_keep_their_entries_and_get_s3commits_after_them(capsys):
    builder = FakeBuilder(**{"spark.plugins": "com.example.Metrics", "spark.executor.extraClassPath": "/opt/x.jar",
                             "spark.driver.extraClassPath": JAR, "spark.jars": "/opt/y.jar"})
    options = spark_module.configure(builder)._options
    assert options["spark.plugins"] == f"com.example.Metrics,{PLUGIN_CLASS}"
    assert options["spark.executor.extraClassPath"] == f"/opt/x.jar{os.pathsep}{JAR}"
    assert options["spark.driver.extraClassPath"] == JAR, "an entry already there is not repeated"
    assert options["spark.jars"] == f"/opt/y.jar,{JAR}"
    conf = printed(capsys, "--conf", "spark.plugins=com.example.Metrics", "--conf",
                   "spark.executor.extraClassPath=/opt/x.jar", "--conf", "spark.sql.shuffle.partitions=4")
    assert conf["spark.plugins"] == f"com.example.Metrics,{PLUGIN_CLASS}"
    assert conf["spark.executor.extraClassPath"] == f"/opt/x.jar{os.pathsep}{JAR}"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert merged({}, {"spark.plugins": PLUGIN_CLASS}) == {"spark.plugins": PLUGIN_CLASS}


def test_executors_find_the_jar_inside_a_shipped_virtualenv_when_their_python_is_relative(tmp_path):
    prefix = tmp_path / "venv"
    jar = prefix / "lib" / "python3.11" / "site-packages" / "s3commit" / "jars" / "bridge.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"")
    # --archives env.tar.gz#environment, spark.pyspark.python=./environment/bin/python: the same layout unpacked
    assert jar_on_executors(str(jar), "./environment/bin/python", prefix=str(prefix)) == \
        "environment/lib/python3.11/site-packages/s3commit/jars/bridge.jar"
    # the same installation on every node, or a jar built on this machine: its own path
    assert jar_on_executors(str(jar), "/opt/env/bin/python", prefix=str(prefix)) == str(jar)
    assert jar_on_executors("/root/.cache/s3commit/b.jar", "./environment/bin/python", prefix=str(prefix)) == \
        "/root/.cache/s3commit/b.jar"
    assert jar_on_executors(str(jar), "python3", prefix=str(prefix)) == str(jar)


def test_the_executors_jar_can_be_named_when_their_nodes_keep_it_elsewhere(capsys):
    assert spark_module.spark_conf(executor_jar="/srv/s3commit.jar")["spark.executor.extraClassPath"] == \
        "/srv/s3commit.jar"
    conf = printed(capsys, "--executor-jar", "/srv/s3commit.jar")
    assert conf["spark.executor.extraClassPath"] == "/srv/s3commit.jar" and conf["spark.driver.extraClassPath"] == JAR


def test_fallback_storage_sets_sparks_decommissioning_keys(capsys):
    expected = {"spark.decommission.enabled": "true", "spark.storage.decommission.enabled": "true",
                "spark.storage.decommission.shuffleBlocks.enabled": "true",
                "spark.storage.decommission.fallbackStorage.cleanUp": "true",
                FALLBACK_PATH: "s3a://bucket/spark/fallback/"}
    assert fallback_storage_conf("s3a://bucket/spark/fallback") == expected  # a directory: the slash is added
    options = spark_module.configure(FakeBuilder(), fallback_storage="s3a://bucket/spark/fallback/")._options
    assert {k: options[k] for k in expected} == expected
    conf = printed(capsys, "--fallback-storage", "s3a://bucket/spark/fallback/")
    assert {k: conf[k] for k in expected} == expected
    assert not [k for k in spark_module.spark_conf() if "decommission" in k], "only when asked"


@pytest.mark.parametrize(("path", "message"), [
    ("s3://bucket/x/", "expected an s3a:// location"),
    ("hdfs:///fallback", "expected an s3a:// location"),
    ("/tmp/fallback", "expected an s3a:// location"),
    ("s3a:///x", "names no bucket"),
])
def test_a_fallback_storage_that_is_not_s3a_is_refused_naming_it(capsys, path, message):
    with pytest.raises(ConfigError, match=message) as refused:
        spark_module.configure(FakeBuilder(), fallback_storage=path)
    assert repr(path) in str(refused.value)
    assert spark_module.main(["conf", "--fallback-storage", path]) == 2
    assert message in capsys.readouterr().err


def test_the_sidecars_python_and_the_executors_jar_agree_for_an_archive(monkeypatch, tmp_path):
    # configure() with spark.pyspark.python set to the archive's Python: the executors' classpath follows it.
    jar = os.path.join(sys.prefix, "lib", "s3commit-test.jar")
    monkeypatch.setattr("s3commit.spark.conf.jar_path", lambda: jar)
    monkeypatch.delenv("S3COMMIT_PYTHON")
    builder = FakeBuilder(**{"spark.pyspark.python": "./environment/bin/python"})
    options = spark_module.configure(builder)._options
    assert options["spark.executorEnv.S3COMMIT_PYTHON"] == "./environment/bin/python"
    assert options["spark.executor.extraClassPath"] == "environment/lib/s3commit-test.jar"
    assert options["spark.driver.extraClassPath"] == jar


def test_lists_in_spark_defaults_are_kept_since_a_setting_given_replaces_the_files(capsys, monkeypatch, tmp_path):
    # A cluster's spark-defaults.conf (EMR's classpaths, a GPU plugin): spark-submit's --conf and the builder's
    # settings replace its values, so s3commit's entries are appended to them, not put in their place.
    (tmp_path / "spark-defaults.conf").write_text(
        "# cluster defaults\n"
        "spark.executor.extraClassPath   /usr/lib/hadoop/lib/*:/usr/share/aws/emr/emrfs/lib/*\n"
        "spark.plugins=com.nvidia.spark.SQLPlugin\n"
        "! another comment\n"
        "spark.driver.memory: 4g\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_module.spark_defaults() == {
        "spark.executor.extraClassPath": "/usr/lib/hadoop/lib/*:/usr/share/aws/emr/emrfs/lib/*",
        "spark.plugins": "com.nvidia.spark.SQLPlugin", "spark.driver.memory": "4g"}
    for conf in (printed(capsys), spark_module.configure(FakeBuilder())._options):
        assert conf["spark.executor.extraClassPath"] == \
            f"/usr/lib/hadoop/lib/*:/usr/share/aws/emr/emrfs/lib/*{os.pathsep}{JAR}"
        assert conf["spark.plugins"] == f"com.nvidia.spark.SQLPlugin,{PLUGIN_CLASS}"
        assert conf["spark.driver.extraClassPath"] == JAR
        assert "spark.driver.memory" not in conf, "only lists s3commit extends are repeated"
    # A value given wins over the file's, as in Spark: s3commit's entries go after it.
    options = spark_module.configure(FakeBuilder(**{"spark.plugins": "com.example.P"}))._options
    assert options["spark.plugins"] == f"com.example.P,{PLUGIN_CLASS}"
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    assert spark_module.spark_defaults() == {}
