"""Two small records s3commit keeps beside a job's manifests, as JSON:

- the **upload marker** (``<magic path>.upload``): a magic writer records the upload it started the moment it
  starts it, so an attempt killed before its ``.pending`` still leaves the upload findable (:class:`UploadMarker`);
- the **owner record** (``_owner.json`` in a job's scratch directory): which run of a job owns the job id on a
  destination, and, renewed while the job runs, that the job is alive (:class:`OwnerRecord`;
  :mod:`s3commit.commit.ownership` claims it, :mod:`s3commit.commit.liveness` keeps it fresh).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field, replace

from s3commit.model.object_info import CREATE_WINDOW_KEY, CreateWindow, UploadRef


class UploadMarker:
    """The body of an upload marker: the bucket, destination key and upload id (and the Create's window, where its
    answer was lost) of the upload a magic file started."""

    @staticmethod
    def encode(ref: UploadRef) -> bytes:
        marker = {"bucket": ref.bucket, "destinationKey": ref.key, "uploadId": ref.upload_id}
        if ref.window is not None:
            marker[CREATE_WINDOW_KEY] = ref.window.encode()
        return json.dumps(marker).encode()

    @staticmethod
    def decode(data: bytes | str) -> UploadRef:
        """Raises ValueError, KeyError or TypeError for a body that is not an upload marker."""
        obj = json.loads(data)
        return UploadRef(str(obj["bucket"]), str(obj["destinationKey"]), str(obj["uploadId"]),
                         CreateWindow.decode(obj.get(CREATE_WINDOW_KEY)))


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class OwnerRecord:
    """Which run (``token``) of job ``job_id`` owns the job id on a destination, where it runs, and that it is
    alive: the job's **liveness record**. Its driver rewrites it every quarter of ``liveness`` seconds (the
    window the job declared; 0: a job that never renews, written before liveness existed) with ``If-Match``,
    so the store's ``Last-Modified`` of the object says when the job last spoke (:mod:`s3commit.commit.liveness`).

    A record with ``swept_by`` is a dead job's, taken by whoever swept it (:meth:`taken_by`)."""

    job_id: str
    token: str
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    claimed: str = field(default_factory=_utc_now)
    liveness: float = 0.0
    renewed: int = 0
    swept_by: str = ""

    def to_json(self) -> bytes:
        body = {"job_id": self.job_id, "token": self.token, "host": self.host, "pid": self.pid,
                "claimed": self.claimed, "liveness": self.liveness, "renewed": self.renewed}
        if self.swept_by:
            body["swept_by"] = self.swept_by
        return json.dumps(body).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> OwnerRecord:
        """Raises ValueError for a body that is not an owner record."""
        obj = json.loads(data)
        if not isinstance(obj, dict) or "job_id" not in obj or "token" not in obj:
            raise ValueError("not an s3commit owner record (no job_id or token)")
        try:
            return cls(str(obj["job_id"]), str(obj["token"]), str(obj.get("host", "?")), int(obj.get("pid", 0)),
                       str(obj.get("claimed", "")), float(obj.get("liveness", 0.0)), int(obj.get("renewed", 0)),
                       str(obj.get("swept_by", "")))
        except (TypeError, ValueError) as err:
            raise ValueError(f"not an s3commit owner record: {err}") from err

    @staticmethod
    def token_of(data: bytes | str) -> str:
        """The owning run's token in a record's body. Raises ValueError for a body that is not JSON."""
        return str(json.loads(data).get("token"))

    def renewed_once(self) -> OwnerRecord:
        return replace(self, renewed=self.renewed + 1)

    def taken_by(self, sweeper: str) -> OwnerRecord:
        """The record as a sweeper leaves it while it sweeps the job (``sweeper``: who, and when)."""
        return replace(self, swept_by=f"{sweeper} at {_utc_now()}")
