"""A writer in a child process for the reader-loop tests of snapshot destinations: jobs ``first`` to ``last`` of a
fixed sequence written with ``s3commit.arrow.write_dataset``, in the environment of an S3 test server
(``S3TestServer.env()``).

Run as ``python tests/reliability/snapshot_writer_child.py DEST FIRST LAST [--kill-at JOB]``. Job ``i`` writes
``ROWS`` rows into each partition it touches, every row's ``job`` column ``i``: a full overwrite of partitions
``day=0..3`` (``i % 3 == 0``), a dynamic overwrite of two of them (``1``), an append of a new partition
``day=100+i`` (``2``). So in every committed state each partition holds exactly ``ROWS`` rows of one job. With
``--kill-at JOB``, that job's driver SIGKILLs itself right after its first Complete (mid-commit: the journal
written, some files complete, the snapshot not published); the parent runs the next jobs in a new child, whose
first commit takes the dead job's lease over once it expired and settles its commit.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

ROWS = 50
LEASE_SECONDS = 2.0
"""The lease's duration: a dead writer's lease is taken over after this, not after the default two minutes."""


def job_data(i: int) -> tuple[Any, str]:
    """Job ``i``'s table and its write mode."""
    import pyarrow as pa

    kind = i % 3
    days = [0, 1, 2, 3] if kind == 0 else [i % 4, (i + 1) % 4] if kind == 1 else [100 + i]
    rows = [(day * 1000 + n, day, i) for day in days for n in range(ROWS)]
    table = pa.table({"id": [r[0] for r in rows], "day": [r[1] for r in rows], "job": [r[2] for r in rows]})
    return table, ("overwrite", "overwrite-partitions", "append")[kind]


def killing_store() -> Any:
    """A store whose first Complete is the process's last request (answered, then SIGKILL)."""
    from s3commit import S3Store
    from s3commit.store.uploads import UploadRequests

    class KillAfterFirstComplete(UploadRequests):
        def complete_multipart_upload(self, *args: Any, **kwargs: Any) -> Any:
            result = super().complete_multipart_upload(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
            return result

    class KillingStore(S3Store):
        uploads_class = KillAfterFirstComplete

    return KillingStore()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dest")
    parser.add_argument("first", type=int)
    parser.add_argument("last", type=int)
    parser.add_argument("--kill-at", type=int, default=-1)
    args = parser.parse_args()
    import s3commit.arrow

    for i in range(args.first, args.last + 1):
        table, mode = job_data(i)
        store = killing_store() if i == args.kill_at else None
        s3commit.arrow.write_dataset(table, args.dest, partitioning=["day"], mode=mode, store=store,
                                     lease_duration=LEASE_SECONDS, threads=4)
        print(f"job {i} committed ({mode})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
