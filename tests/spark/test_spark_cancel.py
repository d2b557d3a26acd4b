"""A Spark query cancelled while its job commits: the output is either committed and the write reports success,
or rolled back and the write fails; never rolled back under a ``_SUCCESS`` naming the job (before, an interrupted
commitJob made Spark call abortJob, which rolled the live commit back while the sidecar finished it)."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from s3commit.model.paths import is_scratch_key
from s3commit.testing._sim.profiles import LatencyProfile
from s3commit.testing.assertions import assert_no_pending_uploads, list_keys

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _outcome_is_consistent(client, bucket: str, prefix: str, result: dict) -> None:
    data = [k for k in list_keys(client, bucket, prefix) if not is_scratch_key(k) and k.endswith(".parquet")]
    success = [k for k in list_keys(client, bucket, prefix) if k.endswith("_SUCCESS")]
    if result.get("ok"):
        assert len(data) == 4 and success, (result, data)  # committed, and reported so
    else:
        assert data == [] and not success, (result, data)  # rolled back, and reported failed
    assert_no_pending_uploads(client, bucket)


def _interrupt_threads_in(spark, method: str, *, until: float, alive) -> int:
    """Interrupt every JVM thread with ``method`` on its stack; scan again until one is found (or time runs out).

    A JVM that has run many tests has hundreds of threads and each frame is a py4j call: one scan can take longer
    than a short commit, so the test makes the commit long (the simulator holds each Complete) and scans again.
    """
    jvm = spark._jvm
    while time.monotonic() < until and alive():
        interrupted = 0
        traces = jvm.java.lang.Thread.getAllStackTraces()
        for thread in traces.keySet():
            if any(frame.getMethodName() == method for frame in traces.get(thread)):
                thread.interrupt()
                interrupted += 1
        if interrupted:
            return interrupted
        time.sleep(0.05)
    return 0


@pytest.mark.parametrize("how", ["cancelJobGroup", "interrupt"])
def test_a_query_cancelled_during_its_job_commit_is_committed_or_rolled_back_never_both(
        spark, s3_sim, s3_bucket, s3_client, how):
    sc = spark.sparkContext
    dest = f"s3a://{s3_bucket}/cancel-{how}-{uuid.uuid4().hex[:6]}"
    frame = spark.range(0, 4000, numPartitions=4)
    result: dict = {}

    def write() -> None:
        sc.setJobGroup("s3commit-cancel", "a write cancelled during its commit", interruptOnCancel=True)
        try:
            frame.write.parquet(dest)
            result["ok"] = True
        except Exception as err:  # the cancellation, as the user sees it
            result["error"] = str(err)[:500]

    # Each Complete waits 2 s in the simulator and the first four are refused with SlowDown: the job commit lasts
    # several seconds, so the cancel lands inside it however slowly this machine scans the JVM's threads.
    s3_sim.configure(profile=LatencyProfile(name="slow-complete", first_byte_seconds={"CompleteMultipartUpload": 2.0}))
    s3_sim.fail_next("CompleteMultipartUpload", "503", count=4)
    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 120
    while s3_sim.stats().requests.get("CompleteMultipartUpload", 0) == 0:  # the job commit has begun
        assert time.monotonic() < deadline and writer.is_alive(), result
        time.sleep(0.02)
    if how == "cancelJobGroup":
        sc.cancelJobGroup("s3commit-cancel")
    else:  # what a Thrift or Connect cancel does: interrupt the thread running the write, inside commitJob
        assert _interrupt_threads_in(spark, "commitJob", until=deadline, alive=writer.is_alive), result
    writer.join(180)
    assert not writer.is_alive()
    prefix = dest.split("/", 3)[3] + "/"
    _outcome_is_consistent(s3_client, s3_bucket, prefix, result)
    if result.get("ok"):
        marker = json.loads(s3_client.get_object(Bucket=s3_bucket, Key=f"{prefix}_SUCCESS")["Body"].read())
        assert marker["committer"] == "magic"
