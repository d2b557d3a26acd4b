"""The bridge's classes for Spark's own threads, not only its tasks: a Hadoop ``Configuration`` under the JVM's
system class loader (what a thread Spark owns creates: decommissioning, RPC endpoints, shutdown hooks) resolves
``fs.s3a.impl``, because ``configure()`` put the jar on the driver's classpath (``spark.driver.extraClassPath``
reaches the JVM PySpark launches). The executors' side is tested on a standalone cluster
(``test_spark_decommission.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


def test_hadoop_configurations_of_sparks_own_threads_resolve_the_filesystem(spark):
    jvm = spark._jvm
    system = jvm.java.lang.ClassLoader.getSystemClassLoader()
    name = "s3commit.hadoop.S3FileSystem"
    conf = jvm.org.apache.hadoop.conf.Configuration(False)
    conf.setClassLoader(system)  # as in a thread whose context class loader is the JVM's
    assert conf.getClassByNameOrNull(name) is not None
    # One class, loaded once: the tasks' loader delegates to the system one, which has the jar.
    assert jvm.java.lang.Class.forName(name, False, system).getClassLoader().equals(system)
    settings = spark.sparkContext.getConf()
    assert settings.get("spark.driver.extraClassPath") == settings.get("spark.executor.extraClassPath")
    assert settings.get("spark.driver.extraClassPath") in settings.get("spark.jars").split(",")
    assert "s3commit.spark.S3CommitPlugin" in settings.get("spark.plugins").split(",")
