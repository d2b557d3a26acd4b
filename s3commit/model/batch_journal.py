"""A Structured Streaming sink batch's journal: what a batch commit is about to complete, recorded before the batch's
entry in the sink's log (the commit point; :mod:`s3commit.committers.sink_batches`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from s3commit.errors import ManifestError
from s3commit.model.manifests import now_millis

BATCH_JOURNAL_FORMAT = "s3commit.StreamBatchJournal/1"
"""The ``name`` of a batch journal. Not a job-commit journal: ``s3commit recover`` refuses it, because finishing
a batch regardless of the sink's log would publish files the log does not name."""


@dataclass(frozen=True, kw_only=True)
class BatchJournal:
    """What a batch commit is about to complete, written (``If-None-Match: *``) before its log entry."""

    job_id: str
    batch_id: int
    bucket: str
    dest_key: str
    pendingsets: tuple[str, ...]
    created: int = field(default_factory=now_millis)

    def to_json(self) -> bytes:
        return json.dumps({"name": BATCH_JOURNAL_FORMAT, "jobId": self.job_id, "batchId": self.batch_id,
                           "bucket": self.bucket, "destKey": self.dest_key, "pendingsets": list(self.pendingsets),
                           "created": self.created}, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str | None = None) -> BatchJournal:
        try:
            obj = json.loads(data)
        except ValueError as err:
            raise ManifestError(f"not JSON: {err}", source=source) from err
        if not isinstance(obj, dict) or obj.get("name") != BATCH_JOURNAL_FORMAT:
            raise ManifestError(f"not a streaming batch journal ({BATCH_JOURNAL_FORMAT})", source=source)
        pendingsets = obj.get("pendingsets")
        if not isinstance(pendingsets, list) or not all(isinstance(k, str) and k.endswith(".pendingset")
                                                        for k in pendingsets):
            raise ManifestError("pendingsets must be a list of .pendingset keys", source=source)
        try:
            return cls(job_id=str(obj["jobId"]), batch_id=int(obj["batchId"]), bucket=str(obj["bucket"]),
                       dest_key=str(obj["destKey"]), pendingsets=tuple(pendingsets),
                       created=int(obj.get("created", 0)))
        except (KeyError, TypeError, ValueError) as err:
            raise ManifestError(f"a batch journal without {err}", source=source) from err
