"""A Spark distribution's layout, built from the pip PySpark: how EMR, Dataproc and the apache/spark images lay
Spark out. ``$SPARK_HOME`` holds ``jars/``, ``bin/``, ``sbin/`` and ``python/`` (``pyspark`` there has no
``jars/`` of its own; ``python/lib`` has ``pyspark.zip`` and py4j's zip for the executors' Python workers), and the
environment names ``SPARK_HOME`` and puts ``$SPARK_HOME/python`` first on ``PYTHONPATH``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyspark

PIP = Path(pyspark.__file__).resolve().parent
"""The pip package the layout is built from."""


def build(home: Path) -> Path:
    """Lay a Spark distribution out at ``home`` (jars and python/lib are links; the rest copies); returns it."""
    (home / "jars").mkdir(parents=True)
    for jar in (PIP / "jars").iterdir():  # a link per jar: the directory itself is the distribution's own
        (home / "jars" / jar.name).symlink_to(jar)
    for scripts in ("bin", "sbin"):  # copies: the scripts find SPARK_HOME from where they are
        shutil.copytree(PIP / scripts, home / scripts)
    shutil.copytree(PIP, home / "python" / "pyspark",
                    ignore=shutil.ignore_patterns("jars", "bin", "sbin", "python", "__pycache__"))
    (home / "python" / "lib").mkdir()
    for archive in (PIP / "python" / "lib").iterdir():
        (home / "python" / "lib" / archive.name).symlink_to(archive)
    (home / "conf").mkdir()
    (home / "RELEASE").write_text(f"Spark {pyspark.__version__} (laid out by s3commit's tests)\n")
    return home


def environment(home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process on that distribution: ``SPARK_HOME`` set, its ``python/`` and py4j first on
    ``PYTHONPATH`` (the pip PySpark stays installed but is shadowed, as a cluster's own Python may have none)."""
    env = dict(os.environ if base is None else base)
    py4j = sorted((home / "python" / "lib").glob("py4j-*.zip"))
    env["SPARK_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(home / "python"), *map(str, py4j),
                                         *filter(None, [env.get("PYTHONPATH")])])
    return env
