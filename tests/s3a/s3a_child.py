"""One Spark application with Hadoop's S3A serving ``s3a://`` (its jars on ``spark.jars``, no s3commit), in a
process of its own: a JVM with S3A's jars cannot be the one the test suite's s3commit sessions share. Prints one
JSON line: the result, or the error.

``python s3a_child.py upload ENDPOINT BUCKET KEY SIZE [KEY=VALUE ...]``: write SIZE pseudo-random bytes to
``s3a://BUCKET/KEY`` through S3A's FileSystem API; prints their SHA-256.

``python s3a_child.py magic ENDPOINT BUCKET TABLE ROWS [KEY=VALUE ...]``: write a DataFrame of 4 partitions to
``s3a://BUCKET/TABLE`` through S3A's magic committer (PathOutputCommitProtocol), read it back; prints the count.

The modes below drive S3A's committer and file classes directly through py4j (no Spark job, so nothing depends on
timing):

``python s3a_child.py s3a-leftovers ENDPOINT BUCKET DEST=UUID [DEST=UUID ...]``: for each destination
``s3a://BUCKET/DEST``, S3A's magic committer (from the scheme's committer factory) of job ``UUID`` sets up the job,
commits task 0 (two files, one of two parts: its ``.pendingset``) and leaves task 1 running (two files: their
``.pending`` files and magic markers); then the JVM is killed with SIGKILL, without ``commitJob`` or any abort:
what a SIGKILLed S3A job leaves. Prints, before the kill, what each job wrote where.

``python s3a_child.py s3a-read ENDPOINT BUCKET KEY [KEY ...]``: loads each key with S3A's own classes
(``SuccessData.load`` for a ``_SUCCESS``, ``PendingSet.load`` for a ``.pendingset``, ``SinglePendingCommit.load``
for a ``.pending``), runs their ``validate()`` and prints what they hold, or the error each load raised.

``python s3a_child.py s3a-uploads ENDPOINT BUCKET PREFIX``: the pending uploads under the key ``PREFIX``, as
``S3AFileSystem.listUploads`` lists them and as ``hadoop s3guard uploads -list s3a://BUCKET/PREFIX`` prints them
(``S3GuardTool`` run in the JVM, its output captured).

Each ``KEY=VALUE`` starting with ``spark.`` is one more Spark setting (e.g.
``spark.hadoop.fs.s3a.multipart.size=5M``), over :func:`testbed.s3a.s3a_conf`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testbed.s3a import s3a_committer_conf, s3a_conf
from tests.s3a.spark_children import JVM_OPTIONS

CHUNK = 1 << 20


def session(endpoint: str, conf: dict[str, str], name: str) -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(name)
               .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in {**s3a_conf(endpoint), **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def upload(endpoint: str, bucket: str, key: str, size: int, conf: dict[str, str]) -> dict[str, Any]:
    spark = session(endpoint, conf, "s3a-upload")
    try:
        jvm = spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/{key}")
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        data = random.Random(size).randbytes(size)
        out = fs.create(path, True)
        for start in range(0, size, CHUNK):
            out.write(bytearray(data[start:start + CHUNK]))
        out.close()
        return {"ok": True, "sha256": hashlib.sha256(data).hexdigest(), "size": size,
                "filesystem": fs.getClass().getName(), "length": fs.getFileStatus(path).getLen()}
    finally:
        spark.stop()


def magic(endpoint: str, bucket: str, table: str, rows: int, conf: dict[str, str]) -> dict[str, Any]:
    spark = session(endpoint, {**s3a_committer_conf("magic"), **conf}, "s3a-magic")
    try:
        dest = f"s3a://{bucket}/{table}"
        frame = spark.range(0, rows, numPartitions=4).selectExpr("id", "id % 7 as k")
        frame.write.mode("overwrite").parquet(dest)
        return {"ok": True, "count": spark.read.parquet(dest).count(),
                "protocol": spark.conf.get("spark.sql.sources.commitProtocolClass")}
    finally:
        spark.stop()


# --- S3A's committer and file classes, driven through py4j --------------------------------------------------------

LEFTOVER_JOB_TRACKER = "20261127000000"
"""The MapReduce job tracker id of the leftover jobs' task attempts (any digits: Spark uses a timestamp)."""
TWO_PARTS = 6 * CHUNK
"""A file of two parts with ``fs.s3a.multipart.size=5M``."""


def java_error(err: BaseException) -> str:
    """A Java exception raised through py4j as ``Class: message``, with its causes; anything else as Python's."""
    java = getattr(err, "java_exception", None)
    if java is None:
        return f"{type(err).__name__}: {err}"
    parts = []
    while java is not None and len(parts) < 4:
        parts.append(f"{java.getClass().getName()}: {java.getMessage()}")
        java = java.getCause()
    return " / caused by ".join(parts)


def private_session(endpoint: str, conf: dict[str, str], name: str, scratch: str) -> Any:
    """A session whose local directories (the 686 MB copy of the SDK bundle in ``userFiles-*``, block managers,
    S3A's upload buffers) are all under ``scratch``: a JVM killed with SIGKILL runs no shutdown hook to delete
    them, so the caller removes ``scratch`` itself."""
    return session(endpoint, {"spark.local.dir": scratch, "spark.hadoop.fs.s3a.buffer.dir": f"{scratch}/s3a",
                              **conf}, name)


def leftover_job(jvm: Any, hadoop_conf: Any, bucket: str, dest: str, job_uuid: str) -> dict[str, Any]:
    """One S3A magic job under ``s3a://bucket/dest``: job set up, task 0 committed, task 1 still writing."""
    mapreduce = jvm.org.apache.hadoop.mapreduce
    path = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/{dest}")
    conf = jvm.org.apache.hadoop.mapred.JobConf(hadoop_conf)
    conf.set("fs.s3a.committer.uuid", job_uuid)
    conf.set("spark.sql.sources.writeJobUUID", job_uuid)
    job_id = mapreduce.JobID(LEFTOVER_JOB_TRACKER, 1)

    def attempt(task: int) -> Any:
        task_attempt = mapreduce.TaskAttemptID(LEFTOVER_JOB_TRACKER, 1, mapreduce.TaskType.MAP, task, 0)
        context = mapreduce.task.TaskAttemptContextImpl(conf, task_attempt)
        factory = mapreduce.lib.output.PathOutputCommitterFactory.getCommitterFactory(path, conf)
        return context, factory.createOutputCommitter(path, context)

    def write(committer: Any, relative: str, size: int) -> str:
        file = jvm.org.apache.hadoop.fs.Path(committer.getWorkPath(), relative)
        out = file.getFileSystem(conf).create(file, True)
        data = random.Random(relative).randbytes(size)
        for start in range(0, size, CHUNK):
            out.write(bytearray(data[start:start + CHUNK]))
        out.close()  # the upload stays pending: the magic stream writes a .pending file instead of completing
        return file.toUri().getPath().lstrip("/")

    job_context = mapreduce.task.JobContextImpl(conf, job_id)
    context0, committer0 = attempt(0)
    committer0.setupJob(job_context)
    committer0.setupTask(context0)
    committed = {"part-00000.csv": TWO_PARTS, "p=1/part-00000.csv": 1000}
    for relative, size in committed.items():
        write(committer0, relative, size)
    committer0.commitTask(context0)  # its .pendingset in the job attempt directory; the attempt's directory deleted
    context1, committer1 = attempt(1)
    committer1.setupTask(context1)
    running = {"part-00001.csv": 2000, "p=1/part-00001.csv": 3000}
    magic_paths = [write(committer1, relative, size) for relative, size in running.items()]
    return {"dest": dest, "job_uuid": job_uuid, "committer": committer0.getClass().getName(),
            "committed_task_attempt": str(context0.getTaskAttemptID()),
            "running_task_attempt": str(context1.getTaskAttemptID()),
            "pendingset": committer0.getJobAttemptPath(job_context).toUri().getPath().lstrip("/") + "/"
                          + f"{context0.getTaskAttemptID().getTaskID()}.pendingset",
            "committed_keys": sorted(f"{dest}/{r}" for r in committed),
            "running_keys": sorted(f"{dest}/{r}" for r in running),
            "running_magic_paths": sorted(magic_paths)}


def s3a_leftovers(endpoint: str, bucket: str, jobs: list[tuple[str, str]], conf: dict[str, str]) -> None:
    """Leave S3A magic jobs half done (:func:`leftover_job`), print what they left, then SIGKILL the JVM."""
    scratch = tempfile.mkdtemp(prefix="s3a-leftovers-")
    try:
        spark = private_session(endpoint, {**s3a_committer_conf("magic"),
                                           "spark.hadoop.fs.s3a.multipart.size": "5M",
                                           "spark.hadoop.fs.s3a.fast.upload.buffer": "array", **conf},
                                "s3a-leftovers", scratch)
        jvm = spark._jvm
        hadoop_conf = spark._jsc.hadoopConfiguration()
        left = [leftover_job(jvm, hadoop_conf, bucket, dest, job_uuid) for dest, job_uuid in jobs]
        jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        print(json.dumps({"ok": True, "jobs": left, "jvm_pid": jvm_pid}), flush=True)
        os.kill(jvm_pid, signal.SIGKILL)  # no commitJob, no abortJob, no shutdown hook: the job is simply gone
    except Exception as err:
        print(json.dumps({"ok": False, "error": java_error(err)[:6000]}), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    os._exit(0)  # the gateway is dead: nothing of PySpark's may run at exit


def _map(java_map: Any) -> dict[str, Any]:
    return {str(k): (v if isinstance(v, (int, float, bool)) or v is None else str(v))
            for k, v in dict(java_map or {}).items()}


def _commit(commit: Any) -> dict[str, Any]:
    etags = list(commit.getEtags() or [])
    return {"bucket": commit.getBucket(), "destinationKey": commit.getDestinationKey(),
            "uploadId": commit.getUploadId(), "uri": commit.getUri(), "length": commit.getLength(),
            "partCount": commit.getPartCount(), "jobId": commit.getJobId(), "taskId": commit.getTaskId(),
            "created": commit.getCreated(), "saved": commit.getSaved(), "text": commit.getText(),
            "etags": [e.getEtag() for e in etags],
            "checksums": [[e.getChecksumAlgorithm(), e.getChecksum()] for e in etags],
            "extraData": _map(commit.getExtraData()), "destinationPath": commit.destinationPath().toString()}


def _validated(manifest: Any) -> str:
    try:
        manifest.validate()
    except Exception as err:
        return java_error(err)
    return "ok"


def read_one(jvm: Any, fs: Any, path: Any, key: str) -> dict[str, Any]:
    files = jvm.org.apache.hadoop.fs.s3a.commit.files
    name = key.rsplit("/", 1)[-1]
    if name == "_SUCCESS":
        success = files.SuccessData.load(fs, path)
        return {"kind": "success", "validate": _validated(success), "name": success.getName(),
                "success": success.getSuccess(), "committer": success.getCommitter(), "jobId": success.getJobId(),
                "jobIdSource": success.getJobIdSource(), "hostname": success.getHostname(),
                "description": success.getDescription(), "timestamp": success.getTimestamp(),
                "date": success.getDate(), "filenames": [str(f) for f in success.getFilenames()],
                "metrics": _map(success.getMetrics()), "diagnostics": _map(success.getDiagnostics()),
                "counters": _map(success.getIOStatistics().counters())}
    status = fs.getFileStatus(path)
    if name.endswith(".pendingset"):
        pendingset = files.PendingSet.load(fs, path, status)
        return {"kind": "pendingset", "validate": _validated(pendingset), "version": pendingset.getVersion(),
                "jobId": pendingset.getJobId(), "size": pendingset.size(),
                "commits": [_commit(c) for c in pendingset.getCommits()]}
    pending = files.SinglePendingCommit.load(fs, path, status, files.SinglePendingCommit.serializer())
    return {"kind": "pending", "validate": _validated(pending), **_commit(pending)}


def s3a_read(endpoint: str, bucket: str, keys: list[str], conf: dict[str, str]) -> dict[str, Any]:
    spark = session(endpoint, conf, "s3a-read")
    try:
        jvm = spark._jvm
        hadoop_conf = spark._jsc.hadoopConfiguration()
        read: dict[str, Any] = {}
        for key in keys:
            path = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/{key}")
            fs = path.getFileSystem(hadoop_conf)
            try:
                read[key] = {"loaded": True, **read_one(jvm, fs, path, key)}
            except Exception as err:
                read[key] = {"loaded": False, "error": java_error(err)[:3000]}
        return {"ok": True, "read": read}
    finally:
        spark.stop()


def s3a_uploads(endpoint: str, bucket: str, prefix: str, conf: dict[str, str]) -> dict[str, Any]:
    spark = session(endpoint, conf, "s3a-uploads")
    try:
        jvm = spark._jvm
        hadoop_conf = spark._jsc.hadoopConfiguration()
        fs = jvm.org.apache.hadoop.fs.Path(f"s3a://{bucket}/").getFileSystem(hadoop_conf)
        listed = []
        uploads = fs.listUploads(prefix)
        while uploads.hasNext():
            upload = uploads.next()
            listed.append({"key": upload.key(), "uploadId": upload.uploadId(), "initiated": str(upload.initiated())})
        # `hadoop s3guard uploads -list s3a://bucket/prefix`, in this JVM, with System.out captured.
        args = spark.sparkContext._gateway.new_array(jvm.java.lang.String, 3)
        for i, arg in enumerate(("uploads", "-list", f"s3a://{bucket}/{prefix}")):
            args[i] = arg
        captured = jvm.java.io.ByteArrayOutputStream()
        system_out = jvm.java.lang.System.out
        jvm.java.lang.System.setOut(jvm.java.io.PrintStream(captured, True, "UTF-8"))
        try:
            exit_code = jvm.org.apache.hadoop.fs.s3a.s3guard.S3GuardTool.run(hadoop_conf, args)
        finally:
            jvm.java.lang.System.setOut(system_out)
        return {"ok": True, "uploads": listed, "tool_exit": exit_code, "tool_output": captured.toString("UTF-8")}
    finally:
        spark.stop()


def main() -> int:
    mode, endpoint, bucket, *rest = sys.argv[1:]
    settings = [arg for arg in rest if arg.startswith("spark.") and "=" in arg]
    args = [arg for arg in rest if arg not in settings]
    conf = dict(setting.split("=", 1) for setting in settings)
    try:
        if mode == "upload":
            result = upload(endpoint, bucket, args[0], int(args[1]), conf)
        elif mode == "magic":
            result = magic(endpoint, bucket, args[0], int(args[1]), conf)
        elif mode == "s3a-leftovers":
            s3a_leftovers(endpoint, bucket, [tuple(arg.split("=", 1)) for arg in args], conf)  # never returns
            raise AssertionError("unreachable")
        elif mode == "s3a-read":
            result = s3a_read(endpoint, bucket, args, conf)
        elif mode == "s3a-uploads":
            result = s3a_uploads(endpoint, bucket, args[0], conf)
        else:
            raise ValueError(f"unknown mode {mode!r}")
    except Exception as err:
        result = {"ok": False, "error": f"{type(err).__name__}: {str(err)[:6000]}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
