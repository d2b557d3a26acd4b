"""What the S3A tier's child Spark applications share: the driver's JVM options, the session builder, and the line of a
Spark error that names its cause. Each child runs as a script with the checkout on its path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""As the suite's drivers (tests/spark/conftest.py): C1 only and one GC thread, on a 2-core machine."""


def builder(name: str, conf: Mapping[str, str]) -> Any:
    """A ``local[2]`` SparkSession builder named ``name``, no UI, 2 shuffle partitions, with ``conf``."""
    from pyspark.sql import SparkSession

    built = (SparkSession.builder.master("local[2]").appName(name)
             .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2"))
    for key, value in conf.items():
        built = built.config(key, value)
    return built


def cause_line(err: BaseException, limit: int = 800) -> str:
    """The line of a Spark error that names the cause: its innermost ``Caused by``, else its first lines."""
    lines = [line for line in str(err).splitlines() if line.strip() and not line.startswith("\tat ")]
    causes = [line for line in lines if line.startswith("Caused by:")]
    return (causes[-1] if causes else " ".join(lines[:3]))[:limit]
