"""A job that dies in its task phase, in a process of its own: it sets the job up (its liveness record renewed every
quarter of ``--liveness``), commits task 0 (one file: a pendingset), leaves task 1's file half written (an upload
started, one part sent, no ``.pending``: only its upload marker or its name says whose it is), and optionally a
file for an absolute location outside the destination; then prints one JSON line and waits to be SIGKILLed.

    python tests/reliability/liveness_child.py --endpoint URL --dest s3://b/t --committer magic --liveness 2
        [--absolute s3://b/elsewhere/p=1] [--staging-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from s3commit import S3Store, StoreOptions, create_committer
from s3commit.config.options import MIN_PART_SIZE, RetryPolicy


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--dest", required=True)
    parser.add_argument("--committer", default="magic")
    parser.add_argument("--liveness", type=float, required=True)
    parser.add_argument("--absolute", default=None)
    parser.add_argument("--staging-dir", default=None)
    args = parser.parse_args()
    store = S3Store(StoreOptions(endpoint_url=args.endpoint, region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing",
                                 retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.2)))
    committer = create_committer(args.committer, args.dest, store=store, threads=4, staging_dir=args.staging_dir,
                                 job_liveness=args.liveness, part_size=MIN_PART_SIZE)
    committer.setup_job()
    done = committer.setup_task(committer.new_task_attempt_id(0))
    with done.open(f"p=1/part-00000-{committer.job_id}.txt") as out:
        out.write(b"committed task of a job that dies")
    if args.absolute:
        with done.open_absolute(args.absolute, f"part-00000-{committer.job_id}.txt") as out:
            out.write(b"a file for a custom partition location")
    committer.commit_task(done)
    running = committer.setup_task(committer.new_task_attempt_id(1))
    half = running.open(f"p=2/part-00001-{committer.job_id}.txt")
    half.write(b"x" * (MIN_PART_SIZE + 1024))  # one whole part goes up (magic); the rest never will
    assert half is not None
    print(json.dumps({"job_id": committer.job_id}), flush=True)
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
