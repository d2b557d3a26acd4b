"""Initiation dates of multipart uploads, which moto does not keep.

moto answers every upload in ``ListMultipartUploads`` with ``Initiated`` 2010-11-10T20:48:33.000Z. S3 gives
the time the upload was created, and s3commit relies on it: an orphan left by a CreateMultipartUpload whose
answer was lost is recognised by its key and its initiation time (:class:`s3commit.model.object_info.CreateWindow`),
and ``s3commit uploads --older-than`` filters by age. The simulator therefore notes when moto answered each
Create (on its own clock, the one its ``Date`` headers carry) and puts that time into the listings it relays.
Uploads created behind its back (on moto's raw endpoint) keep moto's date.
"""

from __future__ import annotations

import re
import threading
import time

_UPLOAD_ID = re.compile(rb"<UploadId>([^<]+)</UploadId>")
_UPLOAD = re.compile(rb"<Upload>.*?</Upload>", re.DOTALL)
_INITIATED = re.compile(rb"<Initiated>[^<]*</Initiated>")


def s3_timestamp(seconds: float) -> bytes:
    """``2026-01-02T03:04:05.678Z`` for ``time.time()`` seconds, as S3 writes ``Initiated``."""
    whole = int(seconds)
    millis = int((seconds - whole) * 1000)
    return (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z").encode()


class InitiationDates:
    """When each upload the simulator saw created was initiated, by upload id. Thread-safe; an upload is
    forgotten once it is completed or aborted, so memory follows the uploads in progress."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dates: dict[bytes, bytes] = {}

    def created(self, answer: bytes, now: float | None = None) -> None:
        """Note the upload a CreateMultipartUpload answer names, initiated ``now`` (the store's time in
        ``time.time()`` seconds; this host's by default)."""
        match = _UPLOAD_ID.search(answer)
        if match:
            with self._lock:
                self._dates[match.group(1)] = s3_timestamp(time.time() if now is None else now)

    def ended(self, upload_id: str | None) -> None:
        """Forget an upload that was completed or aborted."""
        if upload_id:
            with self._lock:
                self._dates.pop(upload_id.encode(), None)

    def rewrite_listing(self, answer: bytes) -> bytes:
        """A ListMultipartUploads answer with each known upload's ``Initiated`` replaced by its real date."""
        with self._lock:
            dates = dict(self._dates)

        def fix(upload: re.Match[bytes]) -> bytes:
            block = upload.group(0)
            found = _UPLOAD_ID.search(block)
            date = dates.get(found.group(1)) if found else None
            if date is None:
                return block
            return _INITIATED.sub(b"<Initiated>" + date + b"</Initiated>", block, count=1)

        return _UPLOAD.sub(fix, answer)

    def clear(self) -> None:
        with self._lock:
            self._dates.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._dates)
