"""What a store honours, as measured by a probe, and what s3commit does about each finding. Pure: no I/O.

S3-compatible stores honour different parts of S3: conditional writes, checksum validation, listing uploads.
s3commit decides from what a store was *seen* to do (:mod:`s3commit.store.probe` asks it,
:mod:`s3commit.store.capability_cache` keeps the answer), never from the endpoint's name:

- the ETag-vs-MD5 check of every part (``s3commit.checksum.verify-etag=auto``) is on exactly where the store was
  seen not to validate the checksum s3commit sends, and its part ETags are MD5s (:meth:`Capabilities.needs_etag_check`);
- the commit lease (``s3commit.commit.lease=auto``) is on where conditional PUT and DELETE are honoured and one of
  racing ``If-None-Match`` PUTs wins (:attr:`Capabilities.conditional_writes`);
- the orphan sweep needs ``ListMultipartUploads`` by prefix (:attr:`Capabilities.lists_uploads`);
- the sweep of dead jobs at job commit (:mod:`s3commit.commit.sweep`) takes a dead job's liveness record with
  ``If-Match``: only where conditional writes are honoured.

A finding the probe could not make (``denied``: the credentials may not; ``failed``: another error) decides as an
unknown store would: the safe way (ETag check on where ETags can say; lease and sweep treated as unavailable).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from s3commit.errors import ManifestError

FORMAT = "s3commit.Capabilities/1"
"""The ``format`` of a capabilities document (the cache file, ``s3commit doctor --json``)."""


class Outcome(enum.Enum):
    """What the store did with one probe. Valid values are the members' values."""

    HONOURED = "honoured"
    """It did what S3 does with the condition or checksum (refused what it must refuse, accepted the rest)."""
    IGNORED = "ignored"
    """It accepted the request as if the condition or checksum were not there."""
    REFUSED = "refused"
    """It refused the request itself, with the code named (not what S3 does)."""
    YES = "yes"
    NO = "no"
    DENIED = "denied"
    """The credentials may not make the request (403): not a missing capability."""
    FAILED = "failed"
    """The probe could not tell (another error, named)."""


@dataclass(frozen=True)
class Finding:
    """One probe's outcome, with the S3 error code seen (if any) and what it saw, in a few words."""

    outcome: Outcome
    code: str = ""
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.outcome.value} ({self.code})" if self.code else self.outcome.value

    @property
    def known(self) -> bool:
        """False where the probe could not tell (denied or failed)."""
        return self.outcome not in (Outcome.DENIED, Outcome.FAILED)


@dataclass(frozen=True)
class Check:
    """One capability the probe asks about: its name, the request, and what s3commit does with each answer."""

    name: str
    request: str
    good: Outcome
    """The answer AWS S3 gives (what s3commit can build on)."""
    when_good: str
    when_not: str


CHECKS: tuple[Check, ...] = (
    Check("put-if-none-match", "PUT with If-None-Match: * on an existing key", Outcome.HONOURED,
          "commit lease taken with it; _SUCCESS and checkpoint files never replace another writer's",
          "commit lease off; If-None-Match writes may replace an object that exists"),
    Check("put-if-match", "PUT with If-Match: a wrong ETag refused, the right one accepted", Outcome.HONOURED,
          "commit lease renewed with it; a dead job's liveness record taken with it, so job commits sweep dead jobs",
          "commit lease off (it cannot be renewed safely); dead jobs are never swept automatically (s3commit uploads "
          "sweep DEST --older-than AGE)"),
    Check("delete-if-match", "DELETE with If-Match: a wrong ETag refused, the right one deletes", Outcome.HONOURED,
          "overwrite deletions keep objects replaced since the listing",
          "overwrite deletions are unconditional (an object another writer replaced since the listing is deleted)"),
    Check("delete-objects-if-match", "DeleteObjects with a wrong ETag for each key: every key refused",
          Outcome.HONOURED, "overwrite deletions go in batches of 1,000, each key conditional on the ETag listed",
          "where DELETE If-Match is honoured, overwrite deletions are sent one by one, each with the ETag listed"),
    Check("put-if-none-match-race", "8 concurrent PUTs with If-None-Match: * on a new key: exactly one wins",
          Outcome.HONOURED, "two jobs can never both take the commit lease",
          "commit lease off: two jobs could both take it"),
    Check("complete-if-none-match", "Complete with If-None-Match: * on an existing key", Outcome.HONOURED,
          "conflict-mode=fail and mode=error never replace an object that appeared after the check",
          "conflict-mode=fail and mode=error check by listing only: an object that appears during the commit "
          "is replaced"),
    Check("checksum-crc32", "UploadPart with a wrong x-amz-checksum-crc32", Outcome.HONOURED,
          "the store refuses damaged CRC32 parts (BadDigest): no MD5 of the parts is needed",
          "with CRC32, each part's ETag is compared with the MD5 of its bytes"),
    Check("checksum-sha256", "UploadPart with a wrong x-amz-checksum-sha256", Outcome.HONOURED,
          "the store refuses damaged SHA256 parts: no MD5 needed with SHA256",
          "with SHA256, each part's ETag is compared with the MD5 of its bytes"),
    Check("content-md5", "UploadPart with a wrong Content-MD5", Outcome.HONOURED,
          "the store refuses a body whose Content-MD5 does not match", "nothing (s3commit sends no Content-MD5)"),
    Check("part-etag-md5", "a part's ETag is the MD5 of its bytes", Outcome.YES,
          "the ETag check can catch damage where the store validates no checksum",
          "no ETag check: where the store also validates no checksum, damage in transit cannot be caught"),
    Check("list-uploads", "ListMultipartUploads by prefix", Outcome.YES,
          "job commit and abort sweep the job's orphan uploads",
          "orphan sweep off (warned once per job): uploads of crashed tasks wait for the bucket's lifecycle rule"),
    Check("repeated-complete", "a second Complete of an upload already completed succeeds", Outcome.YES,
          "a re-sent Complete succeeds", "a re-sent Complete is confirmed by a HEAD of the object (no loss)"),
    Check("multipart-etag", "HEAD of a completed upload gives S3's multipart ETag, the MD5 of its parts' MD5s and -N",
          Outcome.YES, "a completed upload is recognised by its ETag (a Complete whose answer was lost, a roll-back, "
          "`recover`)", "a completed upload is recognised by its length and its date, not by its ETag"),
    Check("part-number-gaps", "Complete of a single part numbered 2 (no part 1) succeeds", Outcome.YES,
          "nothing to do (s3commit numbers parts 1..n)", "nothing to do (s3commit numbers parts 1..n)"),
    Check("head-checksum", "HEAD with ChecksumMode after Complete returns the object's checksum", Outcome.YES,
          "validate.output compares each object's checksum", "validate.output compares sizes only"),
)
CHECK_BY_NAME = {check.name: check for check in CHECKS}
LEASE_CHECKS = ("put-if-none-match", "put-if-match", "put-if-none-match-race")
"""The checks the commit lease needs honoured (:attr:`Capabilities.conditional_writes`)."""

_CHECKSUM_CHECK = {"CRC32": "checksum-crc32", "SHA256": "checksum-sha256", "CRC32C": "checksum-crc32c",
                   "CRC64NVME": "checksum-crc64nvme"}
EXTRA_CHECKSUM_CHECKS = (
    Check("checksum-crc32c", "UploadPart with a wrong x-amz-checksum-crc32c", Outcome.HONOURED,
          "the store refuses damaged CRC32C parts", "with CRC32C, each part's ETag is compared with its MD5"),
    Check("checksum-crc64nvme", "UploadPart with a wrong x-amz-checksum-crc64nvme", Outcome.HONOURED,
          "the store refuses damaged CRC64NVME parts", "with CRC64NVME, each part's ETag is compared with its MD5"),
)
"""Probed only where AWS's CRT computes them (``s3commit[crt]``)."""
CHECK_BY_NAME.update({check.name: check for check in EXTRA_CHECKSUM_CHECKS})


def checksum_check(algorithm: str) -> str:
    """The name of the check of ``algorithm``'s validation (``checksum-crc32``...)."""
    return _CHECKSUM_CHECK[algorithm]


@dataclass(frozen=True)
class Capabilities:
    """What one store (endpoint and bucket) was seen to honour, and when (``probed_at``, seconds since the epoch
    on this host's clock)."""

    endpoint: str
    bucket: str
    probed_at: float
    findings: Mapping[str, Finding] = field(default_factory=dict)

    def outcome(self, name: str) -> Outcome | None:
        finding = self.findings.get(name)
        return finding.outcome if finding is not None else None

    def good(self, name: str) -> bool:
        """True if check ``name`` got the answer AWS S3 gives."""
        return self.outcome(name) is CHECK_BY_NAME[name].good

    @property
    def conditional_writes(self) -> bool:
        """Conditional PUTs (``If-None-Match``, ``If-Match``) honoured, and exactly one of racing ``If-None-Match``
        PUTs wins: what the commit lease needs (taken, renewed, released and taken over by PUTs: :mod:`s3commit.
        commit.lease`), and a dead job's liveness record, a snapshot's entry and ``_SUCCESS`` that never replaces
        another writer's. A conditional DELETE is not among them: only an overwrite's deletions use one
        (:attr:`conditional_deletes`)."""
        return all(self.good(name) for name in LEASE_CHECKS)

    @property
    def conditional_complete(self) -> bool:
        """``If-None-Match: *`` on Complete honoured (fail-if-exists without a window)."""
        return self.good("complete-if-none-match")

    @property
    def conditional_batch_deletes(self) -> bool:
        """DeleteObjects honours a per-key ``ETag`` (refuses a key whose ETag changed)."""
        return self.good("delete-objects-if-match")

    @property
    def lists_uploads(self) -> bool:
        return self.good("list-uploads")

    @property
    def multipart_etags(self) -> bool:
        """Whether a completed upload's object has S3's multipart ETag, the one s3commit predicts from its parts'
        (unknown: as on S3). Where it has not (rclone's `serve s3`, gofakes3: the MD5 of the whole object), an
        upload is recognised as completed by its length and date (:func:`~s3commit.model.object_info.
        is_completed_upload`)."""
        return self.outcome("multipart-etag") is not Outcome.NO

    @property
    def conditional_deletes(self) -> bool:
        return self.good("delete-if-match")

    def validates(self, algorithm: str | None) -> bool:
        """True if the store was seen to refuse a part whose ``algorithm`` checksum is wrong."""
        return bool(algorithm) and self.good(checksum_check(str(algorithm)))

    def needs_etag_check(self, algorithm: str | None) -> bool:
        """Whether parts sent with ``algorithm`` (None: no checksum) need the ETag-vs-MD5 check: the store does not
        validate that checksum, and its part ETags are MD5s (where that is unknown, the check is on: it tolerates
        ETags that are not MD5-shaped)."""
        if self.validates(algorithm):
            return False
        return self.outcome("part-etag-md5") is not Outcome.NO

    def auto_checksum(self, algorithm: str | None) -> str | None:
        """The checksum ``auto`` sends here, ``algorithm`` being what it chose by itself: none where the store was
        seen to ignore that checksum (accept a wrong one) and to give part ETags that are the MD5 of their bytes (the
        ETag check then catches damage in transit, and a checksum the store ignores would cost CPU for nothing: 0.47
        s a GiB for CRC32), else ``algorithm`` (also where that checksum was never probed here)."""
        ignored = algorithm is not None and self.outcome(checksum_check(algorithm)) is Outcome.IGNORED
        return None if ignored and self.outcome("part-etag-md5") is Outcome.YES else algorithm

    def integrity_verified(self, algorithm: str | None) -> bool:
        """True if damage in transit of a part sent with ``algorithm`` is caught (by the store or the ETag check)."""
        return self.validates(algorithm) or self.outcome("part-etag-md5") is Outcome.YES

    def lost_features(self, algorithm: str | None) -> list[str]:
        """What s3commit cannot do safely on this store, in words (empty: every committer feature is safe)."""
        lost = []
        if not self.conditional_writes:
            lost.append("the commit lease (concurrent commits to one destination are not serialized)")
            lost.append("the sweep of dead jobs at job commit (their uploads stay until `s3commit uploads sweep DEST "
                        "--older-than AGE`)")
        if not self.conditional_complete:
            lost.append("fail-if-exists without a window (conflict-mode=fail, mode=error)")
        if not self.integrity_verified(algorithm):
            lost.append(f"detecting damage in transit ({algorithm or 'no checksum'}: neither validated nor an MD5 "
                        "ETag)")
        if not self.lists_uploads:
            lost.append("the orphan-upload sweep (no ListMultipartUploads)")
        return lost

    def summary(self) -> str:
        """One line for ``_SUCCESS`` diagnostics: ``name=outcome`` per finding."""
        return ",".join(f"{name}={finding.outcome.value}" for name, finding in self.findings.items())

    def rows(self) -> list[tuple[str, str, str, str]]:
        """``(capability, request, result, what s3commit does)`` for every finding, in probe order."""
        rows = []
        for name, finding in self.findings.items():
            check = CHECK_BY_NAME[name]
            if not finding.known:
                action = "unknown: s3commit acts as if it were missing" + (" (grant the permission to probe)"
                                                                           if finding.outcome is Outcome.DENIED else "")
            else:
                action = check.when_good if finding.outcome is check.good else check.when_not
            rows.append((name, check.request, str(finding), action))
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "endpoint": self.endpoint, "bucket": self.bucket, "probed_at": self.probed_at,
                "findings": {name: {"outcome": f.outcome.value, "code": f.code, "detail": f.detail}
                             for name, f in self.findings.items()}}

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=2).encode()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "") -> Capabilities:
        """Raises :class:`ManifestError` naming ``source`` for a document of another format or shape."""
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format is {data.get('format')!r}, not {FORMAT}")
            findings = {str(name): Finding(Outcome(value["outcome"]), str(value.get("code", "")),
                                           str(value.get("detail", "")))
                        for name, value in dict(data["findings"]).items() if name in CHECK_BY_NAME}
            return cls(str(data["endpoint"]), str(data["bucket"]), float(data["probed_at"]), findings)
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ManifestError(f"not a capabilities document: {err}", source=source or None) from err

    @classmethod
    def from_json(cls, data: bytes | str, *, source: str = "") -> Capabilities:
        try:
            parsed = json.loads(data)
        except ValueError as err:
            raise ManifestError(f"not JSON: {err}", source=source or None) from err
        if not isinstance(parsed, dict):
            raise ManifestError("not a capabilities document: not a JSON object", source=source or None)
        return cls.from_dict(parsed, source=source)
