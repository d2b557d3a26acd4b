"""Two small records s3commit keeps beside a job's manifests, as JSON:

- the **upload marker** (``<magic path>.upload``): a magic writer records the upload it started the moment it
  starts it, so an attempt killed before its ``.pending`` still leaves the upload findable (:class:`UploadMarker`);
- the **owner record** (``_owner.json`` in a job's scratch directory): which run of a job owns the job id on a
  destination (:class:`OwnerRecord`; :mod:`s3commit.commit.ownership` claims it).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field

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
    """Which run (``token``) of job ``job_id`` owns the job id on a destination, and where it runs."""

    job_id: str
    token: str
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    claimed: str = field(default_factory=_utc_now)

    def to_json(self) -> bytes:
        return json.dumps({"job_id": self.job_id, "token": self.token, "host": self.host, "pid": self.pid,
                           "claimed": self.claimed}).encode()

    @staticmethod
    def token_of(data: bytes | str) -> str:
        """The owning run's token in a record's body. Raises ValueError for a body that is not JSON."""
        return str(json.loads(data).get("token"))
