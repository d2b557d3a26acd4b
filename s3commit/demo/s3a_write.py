"""S3A's magic committer in ``s3commit demo``: the demo's DataFrame written through Hadoop's ``S3AFileSystem`` and
spark-hadoop-cloud's ``PathOutputCommitProtocol`` (S3A's jars and settings: :mod:`s3commit.demo.s3a`), on the same
embedded S3, beside s3commit's magic committer and FileOutputCommitter v1.

A JVM with S3A's jars on its class path must not hold s3commit's session: the driver's class path is fixed when its
JVM starts, a JVM holds one SparkContext, and the demo's session serves ``s3a://`` with s3commit's FileSystem where
this one needs ``S3AFileSystem`` (the repository's tests and benchmarks run S3A in processes of their own for the
same reason). So the write runs in a Spark application of its own, in a child process
(``python -m s3commit.demo.s3a_write CONFIG_JSON``), after the demo's own session has stopped. The child warms up as
the demo's session does (a small sample through S3A's committer, the whole DataFrame once to local disk), says it is
ready, then writes when the parent says ``go``: the parent counts the write's requests at the same server-side
counter as the other writes (:class:`~s3commit.demo.measure.ServerMeter`), between ``go`` and the answer. Lines for
the parent start with :data:`MARK`; Spark's output goes to a log file.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from s3commit.demo.measure import (
    DEFAULT_PROTOCOL,
    RunReport,
    ServerMeter,
    demo_frame,
    job_commit_seconds,
    job_seconds,
    read_outcome,
    write_phases,
)
from s3commit.store.s3store import S3Store

MARK = "@@s3a-demo "
LABEL = "S3A-magic"
"""The S3A write's column in the summary."""
START_TIMEOUT = 600.0
"""The child's start and warm-up: a JVM with ~690 MB of jars on its class path, the first write, the local one."""
WRITE_TIMEOUT = 1800.0
PARQUET_COMMITTER = "org.apache.parquet.hadoop.ParquetOutputCommitter"


class S3AWriteError(RuntimeError):
    """S3A's write did not happen: the child failed to start, warm up or write (the message ends with its log)."""


class _Child:
    """The S3A application's process: one JSON answer per :data:`MARK` line on its stdout."""

    def __init__(self, config: dict[str, Any], log: Path) -> None:
        self.log = log
        self._log = log.open("w")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        self.process = subprocess.Popen([sys.executable, "-m", "s3commit.demo.s3a_write", json.dumps(config)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                        env=env)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(MARK):
                self._lines.put(line[len(MARK):])
        self._lines.put(None)

    def answer(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise S3AWriteError(f"S3A's application answered nothing within {timeout:.0f} s (log {self.log})") from None
        if line is None:
            code = self.process.wait()
            self._log.flush()
            tail = self.log.read_text(errors="replace")[-2000:]
            raise S3AWriteError(f"S3A's application ended (exit {code}):\n{tail}")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise S3AWriteError(f"S3A's application failed: {answer.get('error')}")
        return answer

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self._log.close()


def run_s3a_write(server: Any, store: S3Store, *, bucket: str, dest: str, warm_dest: str, rows: int, tasks: int,
                  partitions: int, log_dir: str | None = None) -> RunReport:
    """The demo's write through S3A's magic committer, in a Spark application of its own, on the embedded S3
    ``server``: its phases, its requests by type (counted at ``server``, as the other writes'), and what it left
    (read through ``store``). Raises :class:`S3AWriteError` when it could not be done."""
    config = {"endpoint": server.endpoint_url, "dest": dest, "warm_dest": warm_dest, "rows": rows, "tasks": tasks,
              "partitions": partitions}
    directory = Path(log_dir or tempfile.gettempdir())
    child = _Child(config, directory / f"s3commit-demo-s3a-{uuid.uuid4().hex[:6]}.log")
    meter = ServerMeter(server)
    try:
        warm = child.answer(START_TIMEOUT)
        print(f"S3A's application warmed up (first small write {warm['cold_seconds']:.1f} s; the whole write to "
              f"local disk {warm['local_seconds']:.1f} s); writing through S3A's magic committer ...", flush=True)
        meter.start()
        child.send("go")
        done = child.answer(WRITE_TIMEOUT)
        report = RunReport(LABEL)
        report.requests, report.bytes_copied = meter.read()
    finally:
        child.close()
    report.phases = write_phases(done["seconds"], done["tasks"], done.get("job_commit"))
    return read_outcome(report, store, dest)


def _session(config: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    from s3commit.demo.s3a import s3a_committer_conf, s3a_conf

    builder = (SparkSession.builder.master("local[2]").appName("s3commit-demo-s3a")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(config["tasks"])))
    # the jars on the driver's class path: spark.jars would copy ~690 MB into the application before its first task
    conf = {**s3a_conf(config["endpoint"], driver_classpath=True), **s3a_committer_conf("magic")}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _warm_up(spark: Any, df: Any, dest: str) -> dict[str, float]:
    """As :func:`~s3commit.demo.measure.warm_up`: a 1% sample through S3A's committer, then the whole DataFrame
    once to local disk through Spark's own protocol (``PathOutputCommitProtocol`` refuses a FileOutputCommitter)."""
    started = time.perf_counter()
    df.sample(fraction=0.01, seed=1).write.partitionBy("day").mode("overwrite").parquet(dest)
    cold = time.perf_counter() - started
    conf = spark.conf
    protocol = conf.get("spark.sql.sources.commitProtocolClass")
    committer = conf.get("spark.sql.parquet.output.committer.class")
    conf.set("spark.sql.sources.commitProtocolClass", DEFAULT_PROTOCOL)
    conf.set("spark.sql.parquet.output.committer.class", PARQUET_COMMITTER)
    with tempfile.TemporaryDirectory(prefix="s3commit-warm-up-") as local:
        started = time.perf_counter()
        df.write.partitionBy("day").parquet(f"{Path(local).as_uri()}/whole")
        local_seconds = time.perf_counter() - started
    conf.set("spark.sql.sources.commitProtocolClass", protocol)
    conf.set("spark.sql.parquet.output.committer.class", committer)
    return {"cold_seconds": cold, "local_seconds": local_seconds}


def _say(answer: dict[str, Any]) -> None:
    print(MARK + json.dumps(answer), flush=True)


def main(argv: list[str] | None = None) -> int:
    """The child: start, warm up, say ready, write on ``go``, answer, stop."""
    config = json.loads((argv or sys.argv[1:])[0])
    try:
        spark = _session(config)
    except Exception as err:  # any failure is the parent's to report
        _say({"ok": False, "error": f"{type(err).__name__}: {err}"[:3000]})
        return 1
    try:
        df = demo_frame(spark, config["rows"], config["tasks"], config["partitions"])
        _say({"ok": True, **_warm_up(spark, df, config["warm_dest"])})
        if sys.stdin.readline().strip() != "go":
            return 0
        description = f"s3commit-demo-{LABEL}-{uuid.uuid4().hex[:6]}"
        spark.sparkContext.setJobDescription(description)
        started = time.perf_counter()
        df.write.partitionBy("day").parquet(config["dest"])
        seconds = time.perf_counter() - started
        spark.sparkContext.setJobDescription(None)
        _say({"ok": True, "seconds": seconds, "tasks": job_seconds(spark, description),
              "job_commit": job_commit_seconds(spark, description)})
    except Exception as err:  # any failure is the parent's to report
        _say({"ok": False, "error": f"{type(err).__name__}: {err}"[:3000]})
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
