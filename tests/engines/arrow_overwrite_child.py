"""One ``s3commit.arrow.write_dataset(mode=...)`` in a process of its own, committed when a "go" file appears (the
concurrent-writers test starts two at once). It touches its "reached" file when its job commit first reads the commit
lease (it has reached its commit). Prints one JSON line: the job id, or the error."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa

from s3commit import S3Store, StoreOptions
from s3commit.arrow import write_dataset
from s3commit.model.paths import LEASE_NAME
from s3commit.store.objects import ObjectRequests
from s3commit.store.uploads import UploadRequests


class LeaseReads(ObjectRequests):
    """Touches the ``reached`` file when the commit lease is read (the job has reached its commit)."""

    reached = ""

    def read_object(self, bucket, key):  # type: ignore[no-untyped-def]
        if key.endswith(LEASE_NAME) and self.reached:
            Path(self.reached).touch()
        return super().read_object(bucket, key)


class HeldCompletes(UploadRequests):
    """Holds each CompleteMultipartUpload until the ``go`` file exists."""

    go = ""

    def complete_multipart_upload(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        while not os.path.exists(self.go):
            time.sleep(0.01)
        return super().complete_multipart_upload(*args, **kwargs)


class WaitingStore(S3Store):
    """Holds the first CompleteMultipartUpload until the go file exists: the two jobs' commits then meet. Touches
    the reached file when the commit lease is read."""

    objects_class = LeaseReads
    uploads_class = HeldCompletes

    def __init__(self, options: StoreOptions, *, go: str, reached: str) -> None:
        super().__init__(options)
        self.objects.reached = reached  # type: ignore[attr-defined]
        self.uploads.go = go  # type: ignore[attr-defined]


def main() -> int:
    endpoint, dest, tag, mode, go, reached = sys.argv[1:7]
    store = WaitingStore(StoreOptions(endpoint_url=endpoint, region="us-east-1", path_style=True,
                                      access_key="testing", secret_key="testing"), go=go, reached=reached)
    table = pa.table({"day": ["2026-11-24", "2026-11-25"] * 50, "writer": [tag] * 100, "n": list(range(100))})
    try:
        success = write_dataset(table, dest, partitioning=["day"], mode=mode, store=store)
        print(json.dumps({"ok": True, "tag": tag, "job_id": success["jobId"]}))
    except Exception as err:
        print(json.dumps({"ok": False, "tag": tag, "error": f"{type(err).__name__}: {err}"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
