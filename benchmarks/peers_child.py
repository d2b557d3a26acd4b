"""One Spark application of the ``peers`` section (:mod:`benchmarks.peers_bench`), in a process of its own: one
path (s3commit's magic or directory committer with s3commit's FileSystem, or Hadoop's S3A with one of its
committers or with FileOutputCommitter v1; ``s3commit-magic-snapshot`` is s3commit's magic committer writing to
snapshot destinations, which the parent makes, in mode ``append``), started once, warmed up, then driven by the
parent one command at a time so that the parent can interleave the paths' rounds.

``python benchmarks/peers_child.py CONFIG_JSON``; then one JSON command per line on stdin, one JSON answer per
command on stdout, on a line starting with :data:`MARK` (Spark's own output goes to stderr). Commands:

- ``{"op": "write", "shape": ..., "dest": ..., "description": ...}``: the shape's DataFrame written to ``dest``
  partitioned by ``day`` (Parquet); the whole write's seconds, the tasks' seconds (Spark's status store), CPU.
- ``{"op": "fs_write", "prefix": ..., "files": N, "mib": M, "threads": T, "source": F}``: N files of M MiB written
  through the FileSystem API (``fs.create``, the bytes copied in the JVM from the local file F), T at a time, from
  the driver; with a ``file://`` prefix, the harness's own cost (the JVM's CPU writing to local disk).
- ``{"op": "fs_read", ...}``: the same files read back whole (``fs.open``, every byte copied to a null stream).
- ``{"op": "quit"}``.

CPU: the JVM's (``/proc/<pid>/stat``, without its JIT compiler threads: compiling is a cost of the first runs,
not of the bytes), the s3commit sidecars' (the JVM's descendants running ``s3commit.bridge``), and this Python's.

The driver has 4 GiB of heap: with 2 GiB, S3A's default input stream in Hadoop 3.5.0 (the analytics accelerator)
ran out of heap (``OutOfMemoryError`` in its ``s3-analytics-accelerator`` threads) reading two 128 MiB files at once.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MARK = "@@peers "
MIB = 1 << 20
DEFAULT_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"
FOC_FACTORY = "org.apache.hadoop.mapreduce.lib.output.FileOutputCommitterFactory"


def _stat_cpu(path: str) -> float:
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jvm_cpu(pid: int) -> float:
    """The JVM's CPU seconds so far, less its JIT compiler threads'."""
    total = _stat_cpu(f"/proc/{pid}/stat")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if "CompilerThre" in f.read():
                    total -= _stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
    return total


def sidecars(jvm_pid: int) -> dict[int, float]:
    """CPU seconds so far of each s3commit sidecar among the JVM's descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = {}, list(children.get(jvm_pid, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"s3commit.bridge" in f.read():
                    found[pid] = _stat_cpu(f"/proc/{pid}/stat")
        except OSError:
            continue
    return found


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """CPU of the JVM, its sidecars and this Python between :meth:`start` and :meth:`stop`."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm_pid = jvm_pid

    def start(self) -> None:
        self._jvm, self._side, self._own = jvm_cpu(self.jvm_pid), sidecars(self.jvm_pid), own_cpu()
        self._started = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        seconds = time.perf_counter() - self._started
        side = sidecars(self.jvm_pid)
        return {"seconds": seconds, "jvm_cpu_seconds": jvm_cpu(self.jvm_pid) - self._jvm,
                "sidecar_cpu_seconds": sum(cpu - self._side.get(pid, 0.0) for pid, cpu in side.items()),
                "sidecars": len(side), "driver_python_cpu_seconds": own_cpu() - self._own}


def session(config: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    endpoint, path = config["endpoint"], config["path"]
    part, blocks, threads = config["part_mib"], config["active_blocks"], config["threads"]
    builder = (SparkSession.builder.master("local[2]").appName(f"s3commit-peers-{path}")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "4g").config("spark.sql.shuffle.partitions", "2"))
    if config.get("jvm_options"):  # quick runs: C1 only and one GC thread, as the test suite's drivers
        builder = builder.config("spark.driver.extraJavaOptions", config["jvm_options"])
    if path.startswith("s3commit-"):
        from s3commit.spark import configure

        committer = path.removeprefix("s3commit-").removesuffix("-snapshot")
        builder = configure(builder, committer=committer, endpoint_url=endpoint,
                            region="us-east-1", access_key="testing", secret_key="testing", threads=threads,
                            part_size=f"{part}M", extra={"fs.s3a.fast.upload.active.blocks": blocks})
    else:
        from testbed.s3a import s3a_committer_conf, s3a_conf

        conf = s3a_conf(endpoint, driver_classpath=True)  # spark.jars would copy 686 MB into each application
        h = "spark.hadoop."
        conf.update({h + "fs.s3a.multipart.size": f"{part}M", h + "fs.s3a.fast.upload.active.blocks": str(blocks),
                     h + "fs.s3a.committer.threads": str(threads)})
        if path == "s3a-foc-v1":
            # Spark's default protocol and Hadoop's FileOutputCommitter (v1) over S3A's FileSystem. Spark 4.1
            # fills in S3A's magic committer where spark-hadoop-cloud is on the class path unless magic is off.
            conf.update({"spark.sql.sources.commitProtocolClass": DEFAULT_PROTOCOL,
                         "spark.sql.parquet.output.committer.class":
                             "org.apache.parquet.hadoop.ParquetOutputCommitter",
                         h + "fs.s3a.committer.magic.enabled": "false",
                         h + "mapreduce.fileoutputcommitter.algorithm.version": "1",
                         h + "mapreduce.outputcommitter.factory.scheme.s3a": FOC_FACTORY})
        else:
            name, _, tracking = path.removeprefix("s3a-").partition("-")
            conf.update(s3a_committer_conf(name, in_memory=tracking == "inmemory"))
        for key, value in conf.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark: Any, shape: dict[str, Any]) -> Any:
    """The shape's DataFrame: ``rows`` rows in ``tasks`` tasks, a ``day`` column of ``days`` values (each task
    holds every day, so the write makes tasks x days files)."""
    day = f"concat('2026-11-', lpad(cast(id % {shape['days']} + 1 as string), 3, '0')) as day"
    return (spark.range(shape["rows"], numPartitions=shape["tasks"])
            .selectExpr("id", day, "id * 0.5 as value", "sha2(cast(id as string), 256) as payload"))


class Child:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.spark = session(config)
        jvm = self.spark._jvm
        self.jvm = jvm
        self.meter = Meter(int(jvm.java.lang.ProcessHandle.current().pid()))
        self.hadoop_conf = self.spark._jsc.hadoopConfiguration()

    def _fs(self, location: str) -> tuple[Any, Any]:
        path = self.jvm.org.apache.hadoop.fs.Path(location)
        return path.getFileSystem(self.hadoop_conf), path

    def write(self, shape: dict[str, Any], dest: str, description: str) -> dict[str, Any]:
        from s3commit.demo.measure import job_commit_seconds, job_seconds

        df = frame(self.spark, shape)
        writer = df.write.partitionBy("day")
        if self.config["path"].endswith("-snapshot"):  # the destination exists (its log): the default mode refuses it
            writer = writer.mode("append")
        self.spark.sparkContext.setJobDescription(description)
        self.meter.start()
        writer.parquet(dest)
        run = self.meter.stop()
        self.spark.sparkContext.setJobDescription(None)
        tasks = job_seconds(self.spark, description)
        spark_commit = job_commit_seconds(self.spark, description)
        # job_commit_seconds: the write outside its tasks (the job's setup and Spark's planning too), as this harness
        # has always reported it; spark_job_commit_seconds: Spark's own time around commitJob (-1: not measured)
        run.update(task_phase_seconds=tasks, job_commit_seconds=max(0.0, run["seconds"] - tasks),
                   spark_job_commit_seconds=-1.0 if spark_commit is None else spark_commit)
        fs, _ = self._fs(dest)
        run["filesystem"] = fs.getClass().getName()
        return run

    def _each(self, threads: int, files: int, one: Any) -> dict[str, Any]:
        self.meter.start()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(files)))
        return self.meter.stop()

    def fs_write(self, prefix: str, files: int, mib: int, threads: int, source: str) -> dict[str, Any]:
        """``files`` files of ``mib`` MiB through ``fs.create``, ``threads`` at a time, each copied 1 MiB a call in
        the JVM from the local file ``source`` (``mib`` MiB, in the page cache: the bare clients upload the same
        file). Not from an array handed over py4j: py4j takes 1.5 s to pass a 128 MiB ``byte[]`` to a constructor
        (measured: ``ByteArrayInputStream(array)``), which an earlier version of this harness timed with the
        write."""
        jvm = self.jvm
        io = jvm.org.apache.hadoop.io.IOUtils

        def one(index: int) -> None:
            fs, path = self._fs(f"{prefix}/part-{index:05d}")
            io.copyBytes(jvm.java.io.FileInputStream(source), fs.create(path, True), MIB, True)

        run = self._each(threads, files, one)
        fs, path = self._fs(f"{prefix}/part-00000")
        run["length"] = int(fs.getFileStatus(path).getLen())
        if run["length"] != mib * MIB:
            raise RuntimeError(f"{prefix}/part-00000 holds {run['length']} bytes, expected {mib * MIB}")
        run["filesystem"] = fs.getClass().getName()
        return run

    def fs_read(self, prefix: str, files: int, mib: int, threads: int) -> dict[str, Any]:
        """Each file opened and read whole (``fs.open``, copied 1 MiB a read to a null stream in the JVM)."""
        jvm = self.jvm
        counted = []

        def one(index: int) -> None:
            fs, path = self._fs(f"{prefix}/part-{index:05d}")
            sink = jvm.org.apache.commons.io.output.CountingOutputStream(jvm.java.io.OutputStream.nullOutputStream())
            jvm.org.apache.hadoop.io.IOUtils.copyBytes(fs.open(path), sink, MIB, True)
            counted.append(int(sink.getByteCount()))

        run = self._each(threads, files, one)
        if counted != [mib * MIB] * files:
            raise RuntimeError(f"read {counted}, expected {files} x {mib * MIB}")
        run["bytes"] = sum(counted)
        return run

    def warm_up(self, warm: dict[str, Any]) -> dict[str, Any]:
        """Unmeasured: the small shape written once (class loading, the sidecar's start, the committer's code),
        the demo's DataFrame once to local disk (Spark's Parquet writer at size), and a file of a few parts
        written and read through the FileSystem."""
        started = time.perf_counter()
        bucket = warm["bucket"]
        self.write(warm["shape"], f"s3a://{bucket}/warm-up/{self.config['path']}/table", "warm-up")
        protocol = self.spark.conf.get("spark.sql.sources.commitProtocolClass", None)
        self.spark.conf.set("spark.sql.sources.commitProtocolClass", DEFAULT_PROTOCOL)  # file://: Spark's own
        frame(self.spark, warm["local_shape"]).write.partitionBy("day").mode("overwrite").parquet(
            Path(warm["local_dir"], self.config["path"]).as_uri())
        if protocol is not None:
            self.spark.conf.set("spark.sql.sources.commitProtocolClass", protocol)
        else:
            self.spark.conf.unset("spark.sql.sources.commitProtocolClass")
        prefix = f"s3a://{bucket}/warm-up/{self.config['path']}/fs"
        source = Path(warm["local_dir"], f"{self.config['path']}.data")
        source.write_bytes(os.urandom(warm["fs_mib"] * MIB))
        self.fs_write(prefix, 2, warm["fs_mib"], 2, str(source))
        self.fs_read(prefix, 2, warm["fs_mib"], 2)
        self.fs_write(Path(warm["local_dir"], f"{self.config['path']}-fs").as_uri(), 2, warm["fs_mib"], 2, str(source))
        return {"seconds": time.perf_counter() - started}


def main() -> int:
    config = json.loads(sys.argv[1])
    try:
        child = Child(config)
        answer: dict[str, Any] = {"ok": True, "jvm_pid": child.meter.jvm_pid}
    except Exception as err:
        print(MARK + json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"[:4000]}), flush=True)
        return 1
    print(MARK + json.dumps(answer), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            result = {"ok": True, **getattr(child, op)(**command)}
        except Exception as err:
            result = {"ok": False, "error": f"{type(err).__name__}: {err}"[:4000],
                      "trace": traceback.format_exc()[-4000:]}
        print(MARK + json.dumps(result), flush=True)
    child.spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
