"""Measured writes: what one write cost (:class:`RunReport`), and how a Spark write is routed and measured (the
commit protocol a label names, the warm-up, the tasks' time from Spark's status store, request meters at the
server or at the sidecar). Shared by ``s3commit demo`` and ``s3commit bench``; pyspark objects are passed in, never
imported here.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from s3commit.config.connection import duration_seconds
from s3commit.errors import ConfigError
from s3commit.model.paths import is_scratch_key
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store


@dataclass
class RunReport:
    """What one write cost: phases, requests, bytes."""

    label: str
    files: int = 0
    bytes: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    bytes_copied: int = 0
    success: dict[str, Any] | None = None

    @property
    def total(self) -> float:
        return sum(self.phases.values())


DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"


FACTORY_KEY = "mapreduce.outputcommitter.factory.scheme.s3a"
FILE_OUTPUT_COMMITTER_FACTORY = "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"


def use_protocol(spark: Any, label: str) -> None:
    """Route the session's next writes through ``label``: an s3commit committer name (``magic``,
    ``directory``, ``partitioned``) or ``FileOutputCommitter-v1`` / ``-v2`` (Spark's default protocol)."""
    from s3commit.spark import PROTOCOL_CLASS

    if label.startswith("FileOutputCommitter-v"):
        spark.conf.set("spark.sql.sources.commitProtocolClass", DEFAULT_PROTOCOL)
        spark.conf.set("mapreduce.fileoutputcommitter.algorithm.version", label[-1])
        # Formats other than Parquet ask Hadoop's committer factory for s3a: the plain FileOutputCommitter.
        spark.conf.set(FACTORY_KEY, FILE_OUTPUT_COMMITTER_FACTORY)
    else:
        spark.conf.set("spark.sql.sources.commitProtocolClass", PROTOCOL_CLASS)
        spark.conf.set("fs.s3a.committer.name", label)
        spark.conf.unset(FACTORY_KEY)


class WarmUp(NamedTuple):
    cold_seconds: float
    """The first, cold write of the session: a small sample through the first protocol."""
    local_seconds: float
    """The whole write to local disk, which warms Spark's own code for the measured writes."""


def warm_up(spark: Any, df: Any, dest: str, labels: list[str]) -> WarmUp:
    """Write a small sample of ``df`` once through each protocol, then the whole of ``df`` once to local disk,
    before anything is measured.

    The first write of a session pays for class loading and the start of the sidecar (a Python process importing
    boto3); the first write of the whole data pays again for compiling Spark's generated code and the Parquet
    writer at full size (a second write to local disk takes about half the time of the first). Charged to
    whichever protocol ran first, either would skew the comparison.
    """
    sample = df.sample(fraction=0.01, seed=1)
    cold = 0.0
    for i, label in enumerate(labels):
        use_protocol(spark, label)
        started = time.perf_counter()
        sample.write.partitionBy("day").mode("overwrite").parquet(f"{dest}/{label.lower()}")
        if i == 0:
            cold = time.perf_counter() - started
    use_protocol(spark, "FileOutputCommitter-v1")  # Spark's own protocol, for a local directory
    with tempfile.TemporaryDirectory(prefix="s3commit-warm-up-") as local:
        started = time.perf_counter()
        df.write.partitionBy("day").parquet(f"{Path(local).as_uri()}/whole")
        return WarmUp(cold, time.perf_counter() - started)


def job_seconds(spark: Any, description: str) -> float:
    """Wall time of the Spark job(s) run under ``description`` (the tasks), from the status store."""
    store = spark.sparkContext._jsc.sc().statusStore()
    for _ in range(50):  # the store is fed asynchronously
        jobs = store.jobsList(None)
        total = 0.0
        for i in range(jobs.size()):
            job = jobs.apply(i)
            if job.description().isDefined() and job.description().get() == description \
                    and job.completionTime().isDefined() and job.submissionTime().isDefined():
                total += (job.completionTime().get().getTime() - job.submissionTime().get().getTime()) / 1000
        if total:
            return total
        time.sleep(0.1)
    return 0.0


JOB_COMMIT_METRIC = "job commit time"
"""The name of Spark's own timing of ``FileCommitProtocol.commitJob`` (``BasicWriteJobStatsTracker``, Spark 3.3+), a
SQL metric of the write command: the time the protocol's ``commitJob`` call took (``FileFormatWriter`` times that
call alone), for every protocol alike."""

def spark_duration(text: str) -> float | None:
    """Seconds of a driver-side timing metric as Spark prints it (``Utils.msDurationToString``: ``51 ms``,
    ``12.3 s``, ``2.1 m``, ``1.05 h``); ``None`` for anything else."""
    try:
        return duration_seconds(text, unit="ms", what="Spark's job commit time")
    except ConfigError:
        return None


def job_commit_seconds(spark: Any, description: str) -> float | None:
    """Spark's own ``job commit time`` of the write run under ``description``, from the SQL status store (fed
    whether or not the UI is on); ``None`` where this Spark does not measure it or the write is not found."""
    store = spark._jsparkSession.sharedState().statusStore()
    for _ in range(50):  # the store is fed asynchronously
        executions = store.executionsList()
        for i in range(executions.size()):
            execution = executions.apply(i)
            if execution.description() != description:
                continue
            metrics, values = execution.metrics(), store.executionMetrics(execution.executionId())
            for j in range(metrics.size()):
                metric = metrics.apply(j)
                value = values.get(metric.accumulatorId()) if metric.name() == JOB_COMMIT_METRIC else None
                if value is not None and value.isDefined():
                    return spark_duration(value.get())
        time.sleep(0.1)
    return None


class ServerMeter:
    """Counts a write's requests where they arrive: the embedded S3's own statistics."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def start(self) -> None:
        self._server.reset_stats()

    def read(self) -> tuple[dict[str, int], int]:
        stats = self._server.stats()
        return dict(stats.requests), stats.copy_bytes


class SidecarMeter:
    """Counts a write's requests at the client, for an S3 whose statistics we cannot see: the sidecar of
    this JVM makes every S3 request of a ``local`` session (the s3a:// FileSystem's and the committers')."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._before: dict[str, Any] = {}

    def _counters(self) -> dict[str, Any]:
        return dict(json.loads(self._jvm.s3commit.bridge.Sidecar.countersJson()))

    def start(self) -> None:
        self._before = self._counters()

    def read(self) -> tuple[dict[str, int], int]:
        after, before = self._counters(), self._before
        requests = {op: n - before["requests"].get(op, 0) for op, n in after["requests"].items()
                    if n > before["requests"].get(op, 0)}
        return requests, after["bytes_copied"] - before["bytes_copied"]


def measured_write(spark: Any, meter: ServerMeter | SidecarMeter, store: S3Store, df: Any, dest: str,
                   label: str, *, mode: str | None = None) -> RunReport:
    """Write ``df`` partitioned by ``day`` to ``dest`` through the session's current protocol (``mode``: the
    DataFrame writer's save mode; Spark's default where None); what it cost (tasks and job commit time, requests by
    ``meter``, bytes copied; :func:`write_phases`) and what it left (files, ``_SUCCESS``, read through ``store``)."""
    description = f"s3commit-demo-{label}-{uuid.uuid4().hex[:6]}"
    spark.sparkContext.setJobDescription(description)
    meter.start()
    started = time.perf_counter()
    writer = df.write.partitionBy("day")
    (writer.mode(mode) if mode else writer).parquet(dest)
    total = time.perf_counter() - started
    spark.sparkContext.setJobDescription(None)
    report = RunReport(label)
    report.requests, report.bytes_copied = meter.read()
    report.phases = write_phases(total, job_seconds(spark, description), job_commit_seconds(spark, description))
    return read_outcome(report, store, dest)


SETUP_AND_DRIVER = "setup, driver"
"""The phase of a Spark write that is neither its tasks nor its job commit."""


def write_phases(total: float, tasks: float, commit: float | None) -> dict[str, float]:
    """A Spark write's ``total`` seconds in phases: its tasks, its job commit as Spark measures it (``commit``), and
    the rest (Spark's planning, the protocol's ``setupJob``, the driver's work around the tasks and after the
    commit). Where Spark gave no commit time, the job commit is everything outside the tasks, as the demo measured
    it before it read Spark's metric."""
    outside = max(0.0, total - tasks)
    if commit is None:
        return {"tasks (write)": tasks, "job commit": outside}
    commit = min(commit, outside)
    return {"tasks (write)": tasks, "job commit": commit, SETUP_AND_DRIVER: outside - commit}



def read_outcome(report: RunReport, store: S3Store, dest: str) -> RunReport:
    """What a write left under ``dest``, read through ``store`` into ``report``: its data files (count, bytes; not
    ``_SUCCESS``, scratch keys or directory markers) and its ``_SUCCESS``, parsed (``None`` when absent, empty or
    not JSON)."""
    uri = S3Uri.from_location(dest)
    # data files: not the lease, nor the directory markers S3A keeps (empty objects named ``dest/``)
    sizes = [o.size for o in store.objects.list_objects(uri.bucket, uri.prefix)
             if not o.key.endswith(("/_SUCCESS", "/")) and not is_scratch_key(o.key)]
    report.files, report.bytes = len(sizes), sum(sizes)
    marker = store.objects.get_object(uri.bucket, uri.child("_SUCCESS").key)
    try:
        report.success = json.loads(marker) if marker else None
    except ValueError:  # a _SUCCESS that is not JSON (Hadoop's FileOutputCommitter writes an empty one)
        report.success = None
    return report


def demo_frame(spark: Any, rows: int, tasks: int, partitions: int) -> Any:
    """The demo's DataFrame: ``rows`` rows in ``tasks`` tasks, a ``day`` column of ``partitions`` values (every task
    holds every day: a write partitioned by ``day`` makes tasks x partitions files)."""
    day = f"concat('2026-11-', lpad(cast(id % {partitions} + 1 as string), 2, '0')) as day"
    return (spark.range(rows, numPartitions=tasks)
            .selectExpr("id", day, "id * 0.5 as value", "sha2(cast(id as string), 256) as payload"))
