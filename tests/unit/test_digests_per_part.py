"""Each byte of a part the sidecar uploads is digested once per digest its store's policy needs, and by the
implementation ``auto`` names: the CPU-per-byte guard of issue 56 (DESIGN.md section 21), counted, not timed.

A file is written as the JVM hands it to the sidecar (block files, :meth:`MultipartWriter.write_part`, the last part at
``close``; full parts cut into pieces) through a real store over :class:`~s3commit.testing.S3Wire` (botocore's
whole request path, no socket). Every digest a byte can go through is counted in bytes: the part checksum
(``zlib``'s CRC32, awscrt's CRC32C), the ETag check's MD5, the payload's SHA-256 (s3commit's and botocore's signer's),
and any checksum botocore would compute itself. Per store policy (``benchmarks/write_cpu.py`` measures what each costs):

- a store that validates the checksum sent (S3): the checksum once, nothing else;
- a store that validates nothing but gives MD5 part ETags (moto): the MD5 once, nothing else (``auto`` sends no
  checksum such a store ignores);
- a store that validates nothing and whose ETags are not MD5s: the checksum once and the signed payload's SHA-256 once.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections import Counter

import botocore.auth
import botocore.httpchecksum
import pytest

from s3commit.model import checksums
from s3commit.store import body_policy
from s3commit.store.capabilities import Capabilities, Finding, Outcome
from s3commit.testing import MemoryS3, S3Wire
from s3commit.testing.memory_wire import ENDPOINT_URL
from s3commit.transfer.parts import FilePart, pieces_per_part
from s3commit.transfer.writer import MultipartWriter

MIB = 1024 * 1024
PART = 16 * MIB  # cut into two pieces of 8 MiB on the wire
PARTS = 3


def _capabilities(crc: Outcome, etag_md5: Outcome) -> Capabilities:
    checks = {"checksum-crc32": Finding(crc), "checksum-crc32c": Finding(crc), "checksum-sha256": Finding(crc),
              "part-etag-md5": Finding(etag_md5)}
    return Capabilities(ENDPOINT_URL, "bucket", 0.0, checks)


POLICIES = {
    "validates": (_capabilities(Outcome.HONOURED, Outcome.YES), {"checksum": 1, "md5": 0, "sha256": 0}),
    "md5-etags": (_capabilities(Outcome.IGNORED, Outcome.YES), {"checksum": 0, "md5": 1, "sha256": 0}),
    "neither": (_capabilities(Outcome.IGNORED, Outcome.NO), {"checksum": 1, "md5": 0, "sha256": 1}),
}


@pytest.fixture
def digested(monkeypatch):
    """Bytes through each digest, by name (``crc32``, ``crc32c``, ``md5``, ``sha256``, ``botocore-checksum``)."""
    counts: Counter[str] = Counter()

    def size(data) -> int:
        return memoryview(data).nbytes

    def hasher(name, real):
        def make(data=b"", **kwargs):
            counts[name] += size(data)
            digest = real(data, **kwargs)

            class Counted:
                def update(self, more):
                    counts[name] += size(more)
                    digest.update(more)

                def __getattr__(self, attribute):
                    return getattr(digest, attribute)

            return Counted()
        return make

    class Zlib:  # what s3commit's checksums see as zlib and hashlib (the in-process store hashes with the real ones)
        @staticmethod
        def crc32(data, *more):
            counts["crc32"] += size(data)
            return zlib.crc32(data, *more)

    class Hashlib:
        md5 = staticmethod(hasher("md5", hashlib.md5))
        sha256 = staticmethod(hasher("sha256", hashlib.sha256))

    monkeypatch.setattr(checksums, "zlib", Zlib)
    monkeypatch.setattr(checksums, "hashlib", Hashlib)
    monkeypatch.setattr(body_policy, "hashlib", Hashlib, raising=False)
    monkeypatch.setattr(botocore.auth, "sha256", hasher("sha256", hashlib.sha256))  # the signer's own name
    real_handle = botocore.httpchecksum.BaseChecksum.handle
    monkeypatch.setattr(botocore.httpchecksum.BaseChecksum, "handle",
                        lambda self, body: counts.update({"botocore-checksum": 1}) or real_handle(self, body))
    if checksums.crt_available():
        from awscrt import checksums as crt

        real_crc32c = crt.crc32c
        monkeypatch.setattr(crt, "crc32c", lambda data, *a: counts.update(crc32c=size(data)) or real_crc32c(data, *a))
    return counts


def _write_as_the_jvm_does(store, directory) -> bytes:
    """A file of ``PARTS`` block files handed over whole, the last at close; returns its bytes."""
    writer = MultipartWriter(store, "bucket", "file", part_size=PART, max_in_flight=4)
    data = b""
    for number in range(1, PARTS + 1):
        block = os.urandom(PART)
        data += block
        path = directory / f"h1-p{number}.block"
        path.write_bytes(block)
        part = FilePart(str(path), owned=True)
        if number < PARTS:
            writer.write_part(part)
        else:
            writer.close(part)
    return data


@pytest.mark.parametrize("policy", list(POLICIES))
def test_each_byte_is_digested_once_per_digest_its_store_needs(policy, digested, tmp_path):
    known, expected = POLICIES[policy]
    s3 = MemoryS3()
    s3.create_bucket("bucket")
    store = S3Wire(s3).store()
    store.capabilities["bucket"] = known
    algorithm = store.options.checksum_algorithm
    assert pieces_per_part(PART) == 2  # the pieces of a part are digested, not the part and then its pieces
    data = _write_as_the_jvm_does(store, tmp_path)
    assert s3.get_object({"Bucket": "bucket", "Key": "file"})["Body"].read() == data
    size = len(data)

    def passes(name: str) -> float:
        """How many times each byte went through ``name`` (requests' headers and the like add a few KiB)."""
        assert digested[name] % size < size // 1000 or digested[name] < size // 1000, (name, digested[name], size)
        return digested[name] // size

    checksum = {"CRC32": "crc32", "CRC32C": "crc32c"}[algorithm]
    assert passes(checksum) == expected["checksum"], f"{algorithm}: {digested[checksum] / size:.2f} passes a byte"
    assert passes("crc32" if checksum == "crc32c" else "crc32c") == 0
    assert passes("md5") == expected["md5"], f"MD5: {digested['md5'] / size:.2f} passes"
    assert passes("sha256") == expected["sha256"], f"SHA-256: {digested['sha256'] / size:.2f} passes"
    assert digested["botocore-checksum"] == 0  # botocore sends the checksum given, computes none of its own
    assert not list(tmp_path.iterdir())  # every block file released


def test_auto_is_the_cheapest_checksum_this_process_computes(monkeypatch):
    """``auto``: CRC32C through awscrt (the CPU's CRC instruction) where it is installed, else the standard library's
    CRC32; never a checksum computed in Python bytecode."""
    monkeypatch.setattr(checksums, "crt_available", lambda: True)
    assert checksums.normalise("auto") == "CRC32C"
    monkeypatch.setattr(checksums, "crt_available", lambda: False)
    assert checksums.normalise("auto") == "CRC32"
    assert checksums.digest("CRC32", b"abc") == zlib.crc32(b"abc").to_bytes(4, "big")
