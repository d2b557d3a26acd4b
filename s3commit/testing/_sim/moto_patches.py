"""Changes to moto where its cost model or its semantics are not S3's: applied in the test server's own process, and
in a test's process only where the test asks (:func:`atomic_conditional_writes`, public as
``s3commit.testing.atomic_conditional_writes``, for moto's in-process mock); never on import.

moto answers every GET by reading the whole object into memory and then slicing out the range asked for
(``FakeKey.value`` in ``moto/s3/models.py``, sliced in ``S3Response._handle_range_header``). On S3 a ranged
GET costs the range; on moto a 1 MiB range of a 128 MiB object costs a 128 MiB read and copy, so any reader
that fetches ranges (prefetching streams, vectored reads, every parallel downloader) would look as slow as
moto's CPU makes it, not as S3 does. :func:`serve_ranges_lazily` makes a ranged GET read only its range.
The answers are byte for byte the same; only the cost changes.

moto also completes a multipart upload by copying every byte about six times under the interpreter lock
(``FakeMultipart.complete`` reads each part twice, joins them twice, then copies the result into a new
buffer), so completing a 128 MiB object costs about a second of CPU on the server, serialised with every other
request; on S3 a Complete costs the same whatever the size (the latency profile gives it 50 ms).
:func:`complete_without_copying` makes the completed object read through its parts' buffers, which moto
keeps alive with the object anyway (``FakeKey.multipart``). A COMPOSITE checksum is built from each part's
digest as moto builds it, but each part's digest is computed when the part arrives (where S3 spends that work:
it checks a part's checksum at UploadPart), not by reading every part again at the Complete, which made a
Complete of 1 GiB cost about a second of the server's CPU. (moto still validates no part checksum: the digest is
of the bytes received, so the object's checksum is what moto computed before.) Uploads with a FULL_OBJECT
checksum (CRC64NVME) keep moto's code.

moto computes CRC32C with the optional ``crc32c`` package and, where it is missing, silently computes CRC32
instead (``compute_checksum`` in ``moto/s3/utils.py``): every CRC32C it then records and returns (a part's, an
object's COMPOSITE one) is wrong, and a client that compares them (``s3commit.committer.validate.output``) finds
nothing comparable. :func:`crc32c_as_s3` computes CRC32C as S3 does, with AWS's CRT where it is installed.

moto checks a conditional write's ``If-None-Match``/``If-Match`` and then writes, with nothing between: racing
writers could both win where S3 lets exactly one (:func:`atomic_conditional_writes`).

moto lists a bucket by going through every key in it (``S3Backend.list_objects``), whatever the prefix, and each key
costs three Python calls (``_VersionedKeyStore.items``: a copy of the store, then ``self[name]`` for each): 9 ms of
the server's CPU to find no key under a prefix in a bucket of 20,000 (23 ms to list 50), which grows with every object
any test or benchmark left in the bucket, while S3's listing costs what it returns. :func:`iterate_keys_lightly`
yields the same names and latest versions from the copy itself: 5 ms (17 ms).

moto's server picks the service of every request by host (``DomainDispatcherApplication.get_backend_for_host``):
it lists moto's package directory (``os.listdir`` and an ``isdir`` for each of ~190 entries) and then tries the
URL patterns of every service, twice for a request to ``127.0.0.1`` (the host, then the service named by the
request's signature), under one lock for all requests. That was a fifth of the server's CPU (the GIL's time)
while 32 Completes were answered at once, about 0.8 ms a request; S3 has no such cost.
:func:`dispatch_hosts_once` remembers each host's answer: the directory and the patterns never change while the
server runs, so the answer is the one moto would compute.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from typing import Any

_RANGED = threading.local()

_CONDITIONAL = threading.RLock()


class _LazyValue:
    """Stands in for ``FakeKey.value`` during a ranged GET: reads only the slice taken of it."""

    def __init__(self, key: Any) -> None:
        self._key = key

    def __len__(self) -> int:
        return int(self._key.contentsize)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, item: slice) -> bytes:
        if not isinstance(item, slice) or item.step not in (None, 1):
            return bytes(self)[item]
        start, stop, _ = item.indices(len(self))
        with self._key.lock:
            buffer = self._key._value_buffer
            buffer.seek(start)
            return bytes(buffer.read(max(0, stop - start)))

    def __bytes__(self) -> bytes:
        return self[0:len(self)]


def serve_ranges_lazily() -> None:
    """Patch moto so that a GET with a ``Range`` header reads only that range of the object."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    if getattr(S3Response, "_s3commit_lazy_ranges", False):
        return
    original_value: Any = FakeKey.__dict__["value"]
    original_key_response = S3Response.key_response

    def value(self: Any) -> Any:
        if getattr(_RANGED, "active", False):
            return _LazyValue(self)
        return original_value.fget(self)

    def key_response(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        ranged = request.method == "GET" and bool(request.headers.get("range"))
        _RANGED.active = ranged
        try:
            status, response_headers, content = original_key_response(self, request, full_url, headers)
        finally:
            _RANGED.active = False
        if isinstance(content, _LazyValue):  # a range moto chose not to apply: the whole object after all
            content = bytes(content)
        return status, response_headers, content

    FakeKey.value = property(value, original_value.fset)  # type: ignore[method-assign,assignment,unused-ignore]
    S3Response.key_response = key_response  # type: ignore[method-assign]
    S3Response._s3commit_lazy_ranges = True  # type: ignore[attr-defined]


class _PartsValue:
    """What a Complete returns in place of the object's bytes: its parts, in order."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self.size = sum(int(p.contentsize) for p in parts)

    def __len__(self) -> int:
        return self.size


class _ChainedParts:
    """A completed object's buffer that reads through its parts' own buffers (read-only, seekable)."""

    def __init__(self, parts: list[Any]) -> None:
        self._parts = parts
        self._starts = []
        start = 0
        for part in parts:
            self._starts.append(start)
            start += int(part.contentsize)
        self._size = start
        self._pos = 0

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = max(0, offset if whence == 0 else (self._pos + offset if whence == 1 else self._size + offset))
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        out = bytearray()
        for part, start in zip(self._parts, self._starts, strict=True):
            part_end = start + int(part.contentsize)
            if part_end <= self._pos or start >= end:
                continue
            buffer = part._value_buffer
            buffer.seek(max(0, self._pos - start))
            out += buffer.read(min(part_end, end) - max(start, self._pos))
        self._pos = end
        return bytes(out)

    def readinto(self, target: Any) -> int:
        data = self.read(len(target))
        target[:len(data)] = data
        return len(data)

    def truncate(self, size: int | None = None) -> int:
        raise OSError("a completed object's buffer is read-only")

    def close(self) -> None:
        """The parts' buffers are the parts' to close (when the object's multipart is disposed)."""


def complete_without_copying() -> None:
    """Patch moto so that completing a multipart upload copies nothing: the object reads through its parts."""
    from moto.s3 import models
    from moto.s3.exceptions import EntityTooSmall, InvalidPart, MalformedXML

    if getattr(models.FakeMultipart, "_s3commit_chained", False):
        return
    original_complete = models.FakeMultipart.complete
    original_set_part = models.FakeMultipart.set_part
    value_property: Any = models.FakeKey.__dict__["value"]

    def set_part(self: Any, part_id: int, value: bytes) -> Any:
        part = original_set_part(self, part_id, value)
        algorithm = self.metadata.get("x-amz-checksum-algorithm")
        if algorithm and models.MultipartChecksumBuilder(algorithm, self.metadata.get("x-amz-checksum-type")) \
                .checksum_type == "COMPOSITE":
            part._s3commit_digest = models.compute_checksum(value, algorithm, encode_base64=False)  # type: ignore[attr-defined]
        return part

    def complete(self: Any, body: Any) -> Any:
        algorithm = self.metadata.get("x-amz-checksum-algorithm")
        checksums = models.MultipartChecksumBuilder(algorithm, self.metadata.get("x-amz-checksum-type"))
        if algorithm and checksums.checksum_type != "COMPOSITE":
            return original_complete(self, body)  # a full-object checksum reads every byte anyway
        parts, md5s, last = [], bytearray(), None
        for number, etag in body:
            part = self.parts.get(number)
            if part is None or part.etag.replace('"', "") != etag.replace('"', ""):
                raise InvalidPart()
            if last is not None and last.contentsize < models.S3_UPLOAD_PART_MIN_SIZE:
                raise EntityTooSmall()
            md5s.extend(bytes.fromhex(part.etag.replace('"', "")))
            if algorithm:  # a composite checksum: each part's digest, computed when the part arrived
                digest = getattr(part, "_s3commit_digest", None)
                if digest is None:
                    checksums.addPart(part.value)
                else:
                    checksums.checksum.extend(digest)
                    checksums.part_count += 1
            parts.append(part)
            last = part
        if not parts:
            raise MalformedXML
        etag = models.md5_hash(bytes(md5s)).hexdigest()
        self._s3commit_read_through = True  # its parts now hold the object's bytes: see delitem
        return _PartsValue(parts), f"{etag}-{len(parts)}", checksums.build() if algorithm else None

    original_delitem = models.MultipartDict.__delitem__

    def delitem(self: Any, key: str) -> None:
        # moto disposes of an upload's parts when it leaves the bucket's uploads; a completed object reading
        # through them disposes of them itself, when it goes (FakeKey.dispose -> multipart.dispose).
        if key in self and getattr(self[key], "_s3commit_read_through", False):
            dict.__delitem__(self, key)
            return
        original_delitem(self, key)

    def set_value(self: Any, new_value: Any) -> None:
        if isinstance(new_value, _PartsValue):
            self._value_buffer.close()
            self._value_buffer = _ChainedParts(new_value.parts)
            self.contentsize = new_value.size
            return
        if isinstance(self._value_buffer, _ChainedParts):  # a completed object written again
            import tempfile

            self._value_buffer = tempfile.SpooledTemporaryFile(self._max_buffer_size)  # noqa: SIM115 (moto's)
        value_property.fset(self, new_value)

    models.FakeMultipart.complete = complete  # type: ignore[method-assign]
    models.FakeMultipart.set_part = set_part  # type: ignore[method-assign]
    models.MultipartDict.__delitem__ = delitem  # type: ignore[method-assign]
    models.FakeKey.value = property(value_property.fget, set_value)  # type: ignore[method-assign,assignment,unused-ignore]
    models.FakeMultipart._s3commit_chained = True  # type: ignore[attr-defined]


def dispatch_hosts_once() -> None:
    """Patch moto's server so that the service a host maps to is computed once per host (see the module)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    if getattr(DomainDispatcherApplication, "_s3commit_hosts_once", False):
        return
    original = DomainDispatcherApplication.get_backend_for_host
    missing = object()

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        known = self.__dict__.setdefault("_s3commit_backends", {})
        backend = known.get(host, missing)
        if backend is missing:
            backend = known[host] = original(self, host)
        return backend

    DomainDispatcherApplication.get_backend_for_host = get_backend_for_host  # type: ignore[method-assign]
    DomainDispatcherApplication._s3commit_hosts_once = True  # type: ignore[attr-defined]


def iterate_keys_lightly() -> None:
    """Patch moto's key store so that iterating a bucket's keys costs no Python call per key (see the module)."""
    from moto.s3.utils import _VersionedKeyStore

    if getattr(_VersionedKeyStore, "_s3commit_light", False):
        return

    def items(self: Any) -> Iterator[tuple[str, Any]]:
        # moto's own: a copy of the store, then self[name] (the latest version) for each, three calls deep. A copy
        # still (the store may change while a listing goes through it), and no list of 20,000 pairs made at once
        # (which sets the garbage collector going through moto's every object)
        for name, versions in dict.items(dict(self)):
            yield name, versions[-1]

    def values(self: Any) -> Iterator[Any]:
        for versions in dict.values(dict(self)):
            yield versions[-1]

    _VersionedKeyStore.items = _VersionedKeyStore.iteritems = _VersionedKeyStore._iteritems = items  # type: ignore
    _VersionedKeyStore.values = _VersionedKeyStore.itervalues = _VersionedKeyStore._itervalues = values  # type: ignore
    _VersionedKeyStore._s3commit_light = True  # type: ignore[attr-defined]


def crc32c_as_s3() -> None:
    """moto's CRC32C computed as CRC32C where ``awscrt`` is installed, not CRC32 (see the module)."""
    from moto.s3 import models, responses, utils

    from s3commit.model import checksums

    if getattr(utils, "_s3commit_crc32c", False) or not checksums.crt_available():
        return
    original = utils.compute_checksum

    def compute_checksum(body: bytes, algorithm: str, encode_base64: bool = True) -> bytes:
        if algorithm != "CRC32C":
            return original(body, algorithm, encode_base64=encode_base64)
        raw = checksums.digest("CRC32C", body)
        return base64.b64encode(raw) if encode_base64 else raw

    for module in (utils, models, responses):
        module.compute_checksum = compute_checksum  # type: ignore[attr-defined]
    utils._s3commit_crc32c = True  # type: ignore[attr-defined]


def atomic_conditional_writes() -> None:
    """Patch moto, in this process, so that a conditional write is atomic, as on S3 (idempotent).

    moto checks ``If-None-Match``/``If-Match`` and then writes, with nothing between the two: under load two of
    eight racing ``If-None-Match: *`` PUTs of one new key both won, so the capability probe (rightly) found the
    race lost and turned the commit lease off for that server. Here every PUT, DELETE and Complete that carries a
    condition, and every DeleteObjects (whose conditions are in its body), runs its check and its write under one
    lock. Unconditional requests (parts, plain PUTs) are not serialised. The test server's process always applies
    it; inside moto's in-process mock (``mock_aws``) a test calls it (``s3commit.testing.atomic_conditional_writes``)
    before its first request.
    """
    from moto.s3.responses import S3Response

    if getattr(S3Response, "_s3commit_atomic", False):
        return

    def guarded(method: Any, *, always: bool = False) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if always or self.headers.get("If-None-Match") or self.headers.get("If-Match"):
                with _CONDITIONAL:
                    return method(self, *args, **kwargs)
            return method(self, *args, **kwargs)

        return run

    S3Response._key_response_put = guarded(S3Response._key_response_put)  # type: ignore[method-assign]
    S3Response._key_response_post = guarded(S3Response._key_response_post)  # type: ignore[method-assign]
    S3Response.delete_object = guarded(S3Response.delete_object)  # type: ignore[method-assign]
    S3Response._bucket_response_delete_keys = guarded(  # type: ignore[method-assign]
        S3Response._bucket_response_delete_keys, always=True)
    S3Response._s3commit_atomic = True  # type: ignore[attr-defined]
