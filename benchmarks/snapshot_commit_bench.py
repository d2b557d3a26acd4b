"""The job commit on a snapshot destination with and without its uploads completed at task commit (issue 55,
outcome 3): 100 to 10,000 files, on S3Wire (:mod:`s3commit.testing.memory_wire`: MemoryS3 behind a real botocore
client, S3's ``s3-standard`` latencies).

The destination is made a snapshot destination and the job's uploads and pendingsets are made in the model directly
(no latency, not timed), in pendingsets of FILES_PER_TASK. With ``early`` the uploads are completed in the model and
their pendingset entries marked so (what the tasks' commits do, in parallel on the executors, with
``s3commit.snapshot.complete-at-task-commit``); without, they are left pending (the key off). Then
:class:`~s3commit.commit.engine.CommitEngine` commits them over the wire as the driver's job commit does (pendingsets
read, journal, the Completes still pending, the snapshot's log entry, ``_SUCCESS``, clean-up), timed: the driver's
work after the tasks. No lease (as in ``benchmarks/scale_bench.py``: a lease adds a GET and two PUTs).

    python -m benchmarks.snapshot_commit_bench --files 100,1000,10000 [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

from s3commit.commit.engine import CommitEngine
from s3commit.commit.overwrite import OverwritePlan
from s3commit.commit.snapshots import SnapshotLog, enable
from s3commit.config.options import CommitterOptions, RetryPolicy
from s3commit.model.manifests import PendingSet, PendingUpload
from s3commit.model.paths import JobLayout
from s3commit.model.uri import S3Uri
from s3commit.testing.memory import MemoryS3
from s3commit.testing.memory_wire import S3Wire

BUCKET = "snap"
FILES_PER_TASK = 100
PROFILE = "s3-standard"


def prepare(s3: MemoryS3, dest: S3Uri, layout: JobLayout, job_id: str, files: int, *, early: bool) -> list[str]:
    """``files`` uploads of one part each, in pendingsets of FILES_PER_TASK; ``early``: completed and marked."""
    client = s3.store().requests.client  # the model's own client: no latency
    keys = []
    for task in range(0, files, FILES_PER_TASK):
        commits = []
        for n in range(task, min(files, task + FILES_PER_TASK)):
            key = f"{dest.key}/day={n % 30}/part-{task // FILES_PER_TASK:05d}-{job_id}-c{n:06d}.parquet"
            upload_id = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
            etag = client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=1, Body=b"new")["ETag"]
            commit = PendingUpload(bucket=BUCKET, destination_key=key, upload_id=upload_id, etags=(etag,),
                                   length=3, uri=f"s3a://{BUCKET}/{key}")
            if early:
                client.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id,
                                                 MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
                commit = commit.as_completed()
            commits.append(commit)
        attempt = f"attempt_snap_0000_m_{task // FILES_PER_TASK:06d}_0"
        pendingset_key = layout.pendingset_key(f"task_snap_0000_m_{task // FILES_PER_TASK:06d}")
        body = PendingSet(commits=tuple(commits)).with_job(job_id, attempt).to_json()
        client.put_object(Bucket=BUCKET, Key=pendingset_key, Body=body)
        keys.append(pendingset_key)
    return keys


def run_case(files: int, *, early: bool) -> dict[str, Any]:
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    job_id = str(uuid.uuid4())
    dest = S3Uri(BUCKET, "table")
    enable(s3.store(), dest, retention=24 * 3600)
    layout = JobLayout(dest.key, job_id)
    keys = prepare(s3, dest, layout, job_id, files, early=early)
    wire = S3Wire(s3, profile=PROFILE)
    store = wire.store(retry=RetryPolicy())
    engine = CommitEngine(store, dest=dest, layout=layout, job_id=job_id, committer="magic",
                          options=CommitterOptions(journal=True))
    started = time.perf_counter()
    success = engine.run(keys, OverwritePlan())
    seconds = time.perf_counter() - started
    snapshot = SnapshotLog(s3.store(), dest).current()
    exact = (snapshot is not None and snapshot.id == 1 and len(snapshot.files) == files
             and not s3.uploads(BUCKET))
    requests = store.counters.snapshot()["requests"]
    return {"files": files, "completed_at_task_commit": early, "exact": exact, "seconds": round(seconds, 3),
            "completes_sent": requests.get("CompleteMultipartUpload", 0),
            "requests": sum(requests.values()),
            "timings_ms": {k: v for k, v in success.metrics.items() if k.startswith("duration_")}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="100,1000,10000", help="comma-separated file counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case (the median is reported)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    results = []
    for files in (int(f) for f in args.files.split(",")):
        for early in (False, True):
            runs = [run_case(files, early=early) for _ in range(args.repeat)]
            result = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
            result["all_seconds"] = [r["seconds"] for r in runs]
            result["exact"] = all(r["exact"] for r in runs)
            results.append(result)
            print(json.dumps(result), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "profile": PROFILE,
                       "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
