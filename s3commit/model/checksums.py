"""Checksums of uploaded bytes: which algorithms, how they are computed, recorded and checked. Pure: no I/O.

Every part and every single-PUT object is sent with a checksum of the bytes as they left the buffer
(S3A's ``fs.s3a.create.checksum.algorithm``; ``auto`` by default: ``CRC32C`` where AWS's CRT (``awscrt``, the
``s3commit[crt]`` extra) computes it, 0.08 s of CPU per GiB on the reference machine, else ``CRC32`` from the
standard library, 0.47 s per GiB). A server that validates checksums answers ``BadDigest`` to bytes that changed on
the way; for one that does not, the answer's ETag is compared with the MD5 of the bytes sent, where S3 defines it so (no
SSE-KMS). Either mismatch is :class:`~s3commit.errors.ChecksumMismatchError`, retried from the buffer. Under
``auto``, a store seen to validate no checksum and to give MD5 part ETags gets none: the MD5 is the check there, and
a CRC it ignores would only cost CPU.

The part checksums of an upload are kept in its ``.pending`` (Hadoop's ``extraData`` map, which Hadoop
reads and ignores): ``s3commit.checksum.algorithm`` and ``s3commit.checksum.parts`` (the base64 values in part
order, space-separated), and passed again at CompleteMultipartUpload, so a server that validates refuses a
part that is not the one uploaded. For the algorithms S3 combines as COMPOSITE checksums (CRC32, CRC32C,
SHA256), the object's checksum is derived from the parts' (:func:`composite`): what a HEAD with
``ChecksumMode=ENABLED`` returns for the completed object, ``<base64>-<parts>``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from s3commit.errors import ChecksumMismatchError, ConfigError, ManifestError

ALGORITHMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA256")
"""What ``checksum_algorithm`` may name (or ``auto``, or ``none``)."""
AUTO = "auto"
"""The default: the cheapest algorithm S3 combines as COMPOSITE that this process can compute (:func:`automatic`)."""
NEEDS_CRT = frozenset({"CRC32C", "CRC64NVME"})
"""Algorithms computed by AWS's CRT (``awscrt``): the ``s3commit[crt]`` extra."""
COMPOSITE = frozenset({"CRC32", "CRC32C", "SHA256"})
"""Algorithms whose multipart object checksum is S3's COMPOSITE (a checksum of the part checksums)."""

ALGORITHM_KEY = "s3commit.checksum.algorithm"
PARTS_KEY = "s3commit.checksum.parts"


def normalise(name: str | None) -> str | None:
    """The algorithm ``name`` names, upper case (``auto``: :func:`automatic`'s), or None for ``none``/empty
    (checksums off).

    Raises:
        ConfigError: an unknown name (naming the valid ones), or one that needs ``awscrt`` when it is missing.
    """
    text = (name or "").strip().upper().replace("-", "")
    if text in ("", "NONE"):
        return None
    if text == AUTO.upper():
        return automatic()
    if text not in ALGORITHMS:
        raise ConfigError(f"checksum algorithm {name!r} is not valid. Valid values are: "
                          f"{', '.join(ALGORITHMS)}, {AUTO}, none")
    if text in NEEDS_CRT and not crt_available():
        raise ConfigError(f"checksum algorithm {text} needs AWS's CRT: pip install 's3commit[crt]' "
                          "(awscrt), or choose CRC32 or SHA256")
    return text


def is_auto(name: str | None) -> bool:
    """Whether ``name`` is ``auto`` (any case): the algorithm is then s3commit's to choose, per store."""
    return (name or "").strip().lower() == AUTO


def automatic() -> str:
    """What ``auto`` chooses: ``CRC32C`` where ``awscrt`` is installed (its CRC32C uses the CPU's CRC instruction,
    about 6x less CPU than the standard library's CRC32), else ``CRC32``. Both are validated alike by every store
    s3commit was measured on, both combine into S3's COMPOSITE object checksum, and each upload records its own
    algorithm, so processes that choose differently can write one job. Where a store validates no checksum and its
    part ETags are the MD5s the ETag check compares, ``auto`` sends none there
    (:meth:`s3commit.store.capabilities.Capabilities.auto_checksum`)."""
    return "CRC32C" if crt_available() else "CRC32"


@functools.cache
def crt_available() -> bool:
    """Whether AWS's CRT checksums (``awscrt.checksums``) can be imported here (asked once per process)."""
    try:
        import awscrt.checksums  # noqa: F401
    except ImportError:
        return False
    return True


def _crt(name: str) -> Callable[[bytes | bytearray | memoryview], bytes]:
    from awscrt import checksums

    if name == "CRC32C":
        return lambda data: checksums.crc32c(data).to_bytes(4, "big")
    return lambda data: checksums.crc64nvme(data).to_bytes(8, "big")


def digest(algorithm: str, data: bytes | bytearray | memoryview) -> bytes:
    """The raw checksum of ``data`` (big-endian for the CRCs, as S3 encodes them)."""
    if algorithm == "CRC32":
        return zlib.crc32(data).to_bytes(4, "big")
    if algorithm == "SHA256":
        return hashlib.sha256(data).digest()
    return _crt(algorithm)(data)


def checksum(algorithm: str, data: bytes | bytearray | memoryview) -> str:
    """The base64 checksum S3 expects in ``x-amz-checksum-<algorithm>``."""
    return base64.b64encode(digest(algorithm, data)).decode("ascii")


def request_field(algorithm: str) -> str:
    """The boto3 parameter (and response field) carrying a checksum: ``ChecksumCRC32``..."""
    return f"Checksum{algorithm}"


def composite(algorithm: str, part_checksums: Sequence[str]) -> str | None:
    """S3's COMPOSITE checksum of a multipart object from its parts' (``<base64>-<parts>``), or None where
    the algorithm's object checksum is not composite (CRC64NVME is a full-object checksum) or this process cannot
    compute it (CRC32C recorded by a process with ``awscrt``, read by one without)."""
    if algorithm not in COMPOSITE or not part_checksums or (algorithm in NEEDS_CRT and not crt_available()):
        return None
    joined = b"".join(base64.b64decode(value) for value in part_checksums)
    return f"{checksum(algorithm, joined)}-{len(part_checksums)}"


def md5_etag(data: bytes | bytearray | memoryview) -> str:
    """The ETag S3 gives a part or a single-PUT object without SSE-KMS/SSE-C: the hex MD5 of its bytes."""
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def etag_is_md5_of(etag: str, md5_hex: str) -> bool:
    """False only for an ETag shaped as an MD5 (32 hex digits) that is another MD5: a store whose ETags are
    not MD5s (some S3-compatible ones) cannot be checked this way, and is not failed for it."""
    value = etag.strip().strip('"').lower()
    return value == md5_hex or len(value) != 32 or any(c not in "0123456789abcdef" for c in value)


def record(algorithm: str | None, part_checksums: Sequence[str]) -> dict[str, str]:
    """The ``extraData`` entries recording an upload's part checksums (none when checksums are off)."""
    if algorithm is None or not part_checksums:
        return {}
    return {ALGORITHM_KEY: algorithm, PARTS_KEY: " ".join(part_checksums)}


def _base64_of(size: int) -> str:
    """A pattern of the base64 (padded, as ``b64encode`` writes it) of ``size`` bytes."""
    symbols = (size * 8 + 5) // 6
    return f"[A-Za-z0-9+/]{{{symbols}}}" + "=" * (-symbols % 4)


_PARTS_FORMS = {algorithm: re.compile(f"{one}(?: {one})*") for algorithm, one in (
    (algorithm, _base64_of(32 if algorithm == "SHA256" else 8 if algorithm == "CRC64NVME" else 4))
    for algorithm in ALGORITHMS)}
"""Per algorithm, the parts' checksums as :func:`record` writes them: what :func:`recorded` takes with one match,
before it checks each (and names the first that is wrong)."""


def recorded(extra_data: Mapping[str, str], part_count: int,
             source: str | None = None) -> tuple[str | None, tuple[str, ...]]:
    """The algorithm and part checksums an upload's ``extraData`` records: ``(None, ())`` when it records
    none (an upload written without checksums, or by Hadoop).

    Raises:
        ManifestError: an unknown algorithm, a count of checksums that is not the count of parts, or a value
            that is not the base64 of a checksum of that algorithm, naming the manifest.
    """
    name = extra_data.get(ALGORITHM_KEY, "")
    parts = extra_data.get(PARTS_KEY, "")
    form = _PARTS_FORMS.get(name)
    if form is not None and form.fullmatch(parts):  # (as written: each the base64 of its size, one space apart)
        values = tuple(parts.split(" "))
        if len(values) == part_count:
            return name, values
    values = tuple(parts.split())
    where = f" in {source}" if source else ""
    if not name and not values:
        return None, ()
    algorithm = name.strip().upper()
    if algorithm not in ALGORITHMS:
        raise ManifestError(f"{ALGORITHM_KEY} {name!r}{where} is not a checksum algorithm "
                            f"({', '.join(ALGORITHMS)})")
    if len(values) != part_count:
        raise ManifestError(f"{PARTS_KEY}{where} has {len(values)} {algorithm} checksum(s) for {part_count} "
                            "part(s): the manifest is corrupt or was edited")
    size = len(digest("SHA256", b"")) if algorithm == "SHA256" else (8 if algorithm == "CRC64NVME" else 4)
    for number, value in enumerate(values, start=1):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != size:
            raise ManifestError(f"{PARTS_KEY}{where}: part {number}'s {algorithm} checksum {value!r} is not "
                                f"the base64 of {size} bytes")
    return algorithm, values


class SentPart(NamedTuple):
    """An uploaded part: its ETag, and the checksum sent with it (None with checksums off)."""

    etag: str
    checksum: str | None


class Sending:
    """What is sent with one body and checked in the answer: the checksum header, and the MD5 its ETag must
    be where S3 defines it so (``etag_is_md5``). Computed once per body, before the first attempt."""

    __slots__ = ("algorithm", "md5", "value")

    def __init__(self, algorithm: str | None, data: bytes | bytearray | memoryview, *, etag_is_md5: bool) -> None:
        self.algorithm = algorithm
        self.value = checksum(algorithm, data) if algorithm else None
        self.md5 = md5_etag(data) if etag_is_md5 else None

    def args(self) -> dict[str, str]:
        """The request's checksum parameter (``ChecksumCRC32=...``), or none."""
        return {request_field(self.algorithm): self.value} if self.algorithm and self.value else {}

    def arrived(self, etag: str) -> bool:
        """Whether the answer's ETag says the bytes arrived as sent (True where it cannot say)."""
        return self.md5 is None or not etag or etag_is_md5_of(etag, self.md5)

    def check(self, where: str, response: Any) -> Any:
        """``response`` if its ETag says the bytes arrived as sent, else :class:`ChecksumMismatchError`."""
        if not self.arrived(str(response.get("ETag", ""))):
            raise ChecksumMismatchError(
                f"{where}: the server's ETag {response.get('ETag')} is not the MD5 {self.md5} of the bytes sent "
                f"({self.describe()}): they changed on the way", code="ETagMismatch")
        return response

    def describe(self) -> str:
        return f"{self.algorithm} {self.value}" if self.algorithm else "no checksum (MD5 of the ETag only)"


def complete_parts(etags: Sequence[str], algorithm: str | None, part_checksums: Sequence[str]) -> list[dict]:
    """The ``Parts`` of a CompleteMultipartUpload, each with its checksum where they are recorded."""
    parts: list[dict] = [{"PartNumber": n, "ETag": etag} for n, etag in enumerate(etags, start=1)]
    if algorithm and len(part_checksums) == len(parts) and all(part_checksums):
        for part, value in zip(parts, part_checksums, strict=True):
            part[request_field(algorithm)] = value
    return parts


def composite_matches(expected: str, returned: str) -> bool | None:
    """Whether a returned checksum is the expected COMPOSITE one (``<base64>-<parts>``; moto leaves the
    ``-<parts>`` out); None when a value without the suffix differs: a server that keeps a full-object checksum
    for a multipart object, not comparable with the parts'."""
    base = expected.rsplit("-", 1)[0]
    if returned in (expected, base):
        return True
    return False if "-" in returned else None
