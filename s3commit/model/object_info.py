"""What S3 says about objects and uploads, and the one rule for "is this upload already complete?".

Pure: no I/O. The store fills these values from S3's answers; callers above it decide with them.

- :class:`ObjectInfo` (HEAD, LIST) and :class:`UploadInfo` (ListMultipartUploads); :class:`KeyPage`, a LIST's page
  as its keys and ETags only.
- :func:`multipart_etag`: the ETag S3 gives an object completed from given parts.
- :func:`is_completed_upload`: whether an object is what a given upload completed to. The store asks it
  when a Complete's answer was lost or the upload is gone (an earlier commit, or an earlier attempt, may
  have completed it); recovery asks it before it reverts an upload of an interrupted commit.
- :class:`CreateWindow`: when, on S3's clock, a CreateMultipartUpload whose answer was lost may have started
  an upload S3 never named to us (see :class:`s3commit.store.retry.Retry`). The window travels in the upload's
  records (upload marker, ``.pending``, pendingset) to the job's clean-up, which aborts the uploads of that
  exact key initiated inside it (:mod:`s3commit.commit.job_uploads`).
- :class:`UploadRef`: just enough to abort an upload (bucket, key, upload id, and its Create's window).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

CLOCK_SKEW = timedelta(minutes=15)
"""How far a client's clock may be from S3's: S3 refuses requests signed further off
(``RequestTimeTooSkewed``), so a writer that got an upload id was at most this far off."""

CREATE_WINDOW_SLACK_MS = 1_000
"""Added to both ends of a :class:`CreateWindow`, for the clocks' drift over the Create's attempts and the
rounding of S3's ``Initiated`` (milliseconds) against its ``Date`` header (whole seconds, rounded down)."""

CREATE_WINDOW_KEY = "s3commit.createWindow"
"""Name of the create window in a ``.pending``'s ``extraData`` and in an upload marker (``.upload``)."""


@dataclass(frozen=True)
class ObjectInfo:
    """An object (or, with ``size == -1``, a common prefix from a delimited listing)."""

    key: str
    size: int
    etag: str = ""
    last_modified: datetime | None = None
    checksums: tuple[tuple[str, str], ...] = ()
    """``(algorithm, value)`` the server returned (a HEAD with ``ChecksumMode=ENABLED``)."""

    @property
    def is_prefix(self) -> bool:
        return self.size < 0


class KeyPage(NamedTuple):
    """One page of a listing as two columns, its keys and their ETags in S3's order, and where the next page starts
    (``token``: None on the last page). No object per entry: an overwrite lists its 100,000s of old files this way
    beside its Completes, where an :class:`ObjectInfo` each (and the timestamp each carries) is most of the CPU."""

    keys: list[str]
    etags: list[str]
    token: str | None


@dataclass(frozen=True)
class UploadInfo:
    """A multipart upload in progress."""

    key: str
    upload_id: str
    initiated: datetime | None = None


def multipart_etag(part_etags: Sequence[str]) -> str | None:
    """The ETag S3 gives an object completed from these parts (md5 of the part md5s, ``-N``).

    ``None`` when a part ETag is not a plain MD5 (e.g. SSE-KMS, SSE-C), so it cannot be predicted.
    """
    try:
        digest = hashlib.md5(b"".join(bytes.fromhex(e.strip('"')) for e in part_etags), usedforsecurity=False)
    except ValueError:
        return None
    return f'"{digest.hexdigest()}-{len(part_etags)}"'


def is_completed_upload(info: ObjectInfo, etags: Sequence[str], *, length: int | None = None,
                        created_ms: int = 0, multipart_etags: bool = True) -> bool:
    """Whether the object ``info`` is what the upload with these part ETags completed to.

    One rule for every caller:

    - when the multipart ETag can be predicted (every part ETag an MD5, and the store gives completed objects S3's
      multipart ETag: ``multipart_etags``), the object's ETag must equal it;
    - otherwise (SSE-KMS, SSE-C; a store whose completed objects carry another ETag, such as the MD5 of the whole
      object) the object must have the upload's ``length`` and must not be older than the
      upload (``created_ms``, the writer's clock when it started the upload, less :data:`CLOCK_SKEW`), so that
      an older object of the same length at the key is never taken for ours. S3 dates a completed multipart
      object at its initiation or its completion; both come after the upload was created. Without a known
      length the object is not ours; without a known ``created_ms`` (0) the length alone decides.
    """
    expected = multipart_etag(etags) if multipart_etags else None
    if expected is not None:
        return info.etag == expected
    if length is None or info.size != length:
        return False
    if not created_ms or info.last_modified is None:
        return True
    return _millis(info.last_modified) >= created_ms - int(CLOCK_SKEW.total_seconds() * 1000)


@dataclass(frozen=True)
class CreateWindow:
    """When, on S3's clock, an upload may have been initiated by a Create attempt whose answer was lost.

    Epoch milliseconds, both ends included (slack already added). An upload of the same key whose S3
    ``Initiated`` time lies inside was started by that Create: S3 never named it to us, and nobody else
    can know it exists.
    """

    start_ms: int
    end_ms: int

    @classmethod
    def around(cls, answered_at: datetime, elapsed_seconds: float) -> CreateWindow:
        """The window of a Create whose successful answer carried S3's time ``answered_at`` (its ``Date``
        header), ``elapsed_seconds`` after its first attempt was sent."""
        end = _millis(answered_at)
        start = end - int(elapsed_seconds * 1000)
        return cls(start - CREATE_WINDOW_SLACK_MS, end + 1_000 + CREATE_WINDOW_SLACK_MS)

    def contains(self, initiated: datetime | None) -> bool:
        """Whether an upload initiated at ``initiated`` (S3's clock) falls inside; unknown: never."""
        return initiated is not None and self.start_ms <= _millis(initiated) <= self.end_ms

    def encode(self) -> str:
        """``"<start_ms>,<end_ms>"``, as kept in manifests and upload markers."""
        return f"{self.start_ms},{self.end_ms}"

    @classmethod
    def decode(cls, text: object) -> CreateWindow | None:
        """The window :meth:`encode` wrote, or ``None`` for anything else (an absent or foreign value)."""
        if not isinstance(text, str):
            return None
        start, _, end = text.partition(",")
        try:
            window = cls(int(start), int(end))
        except ValueError:
            return None
        return window if 0 < window.start_ms <= window.end_ms else None


@dataclass(frozen=True)
class UploadRef:
    """Just enough to abort an upload; ``window``: its Create lost an answer, and an upload of the same key
    initiated inside the window is its orphan (see :class:`CreateWindow`)."""

    bucket: str
    key: str
    upload_id: str
    window: CreateWindow | None = None


def _millis(when: datetime) -> int:
    aware = when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
    return int(aware.timestamp() * 1000)
