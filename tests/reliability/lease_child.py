"""One job in a process of its own, for the concurrent-writers tests: it sets up, writes its files in one task,
commits the task, then waits for a "go" file and a random moment before it commits the job, so that several such
processes commit to one destination at the same time. It prints one JSON line: what it did.

    python tests/reliability/lease_child.py --endpoint URL --dest s3://b/t --committer magic --mode overwrite
        --tag a --partitions 1,2 --files 4 --go /tmp/go [--jitter 0.3] [--lease-duration 120] [--lease-wait 60]
        [--die-after-completes K]

``--die-after-completes K``: SIGKILL itself after its K-th Complete (holding the commit lease, mid-commit).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from s3commit import S3Store, StoreOptions, create_committer
from s3commit.config.options import RetryPolicy
from s3commit.store.uploads import UploadRequests


class DyingUploads(UploadRequests):
    """Kills its process after the K-th Complete it made (``die_after``; 0: never): the commit holds the lease
    then."""

    die_after = 0
    completes = 0

    def complete_multipart_upload(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        etag = super().complete_multipart_upload(*args, **kwargs)
        self.completes += 1
        if self.die_after and self.completes >= self.die_after:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return etag


class DyingStore(S3Store):
    """A store whose process dies after the K-th Complete it made (:class:`DyingUploads`)."""

    uploads_class = DyingUploads

    def __init__(self, options: StoreOptions, *, die_after: int = 0) -> None:
        super().__init__(options)
        self.uploads.die_after = die_after  # type: ignore[attr-defined]


def file_keys(tag: str, partitions: list[str], files: int) -> list[str]:
    """The relative names job ``tag`` writes: ``p=<partition>/part-<tag>-<n>.txt``, spread over its partitions."""
    return [f"p={partitions[n % len(partitions)]}/part-{tag}-{n:03d}.txt" for n in range(files)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--committer", default="magic")
    parser.add_argument("--mode", choices=["append", "overwrite", "partitions"], default="append")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--partitions", default="1")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--go", required=True)
    parser.add_argument("--jitter", type=float, default=0.3)
    parser.add_argument("--lease-duration", type=float, default=120.0)
    parser.add_argument("--lease-wait", type=float, default=120.0)
    parser.add_argument("--die-after-completes", type=int, default=0)
    parser.add_argument("--staging-dir", default=None)
    args = parser.parse_args()

    store = DyingStore(StoreOptions(endpoint_url=args.endpoint, region="us-east-1", path_style=True,
                                    access_key="testing", secret_key="testing",
                                    retry=RetryPolicy(max_attempts=5, initial_delay=0.01, max_delay=0.2)),
                       die_after=args.die_after_completes)
    committer = create_committer(args.committer, args.dest, store=store, threads=4, unique_filenames=False,
                                 staging_dir=args.staging_dir, lease_duration=args.lease_duration,
                                 lease_wait=args.lease_wait)
    names = file_keys(args.tag, args.partitions.split(","), args.files)
    result: dict = {"tag": args.tag, "mode": args.mode, "job_id": committer.job_id,
                    "files": [committer.dest.child(n).key for n in names]}
    try:
        committer.setup_job()
        attempt = committer.setup_task(committer.new_task_attempt_id(0))
        for name in names:
            with attempt.open(name) as out:
                out.write(f"{args.tag} {name}\n".encode())
        message = committer.commit_task(attempt)
        print(json.dumps({"ready": args.tag, "job_id": committer.job_id}), flush=True)
        while not os.path.exists(args.go):
            time.sleep(0.01)
        time.sleep(random.uniform(0, args.jitter))  # the jobs commit at random moments, not in a set order
        success = committer.commit_job([message], delete_paths=[""] if args.mode == "overwrite" else (),
                                       replace_partitions=args.mode == "partitions")
        result.update(ok=True, committed_at=time.time(), lease_wait_ms=success.metrics["committer_lease_wait_ms"])
    except Exception as err:
        result.update(ok=False, error=f"{type(err).__name__}: {err}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
