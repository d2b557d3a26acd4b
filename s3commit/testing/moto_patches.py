"""Changes to moto, inside the test server's own process only, where moto's cost model is not S3's.

moto answers every GET by reading the whole object into memory and then slicing out the range asked for
(``FakeKey.value`` in ``moto/s3/models.py``, sliced in ``S3Response._handle_range_header``). On S3 a ranged
GET costs the range; on moto a 1 MiB range of a 128 MiB object costs a 128 MiB read and copy, so any reader
that fetches ranges (prefetching streams, vectored reads, every parallel downloader) would look as slow as
moto's CPU makes it, not as S3 does. :func:`serve_ranges_lazily` makes a ranged GET read only its range.
The answers are byte for byte the same; only the cost changes.

moto also completes a multipart upload by copying every byte about six times under the interpreter lock
(``FakeMultipart.complete`` reads each part twice, joins them twice, then copies the result), so completing a
128 MiB object costs about a second of CPU on the server, serialised with every other request; on S3 a
Complete costs the same whatever the size (the latency profile gives it 50 ms). :func:`complete_in_one_copy`
reads each part once into the object's buffer. Uploads that ask for checksums keep moto's own code.
"""

from __future__ import annotations

import threading
from typing import Any

_RANGED = threading.local()


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


def complete_in_one_copy() -> None:
    """Patch moto so that completing a multipart upload copies each part's bytes once."""
    from moto.s3 import models
    from moto.s3.exceptions import EntityTooSmall, InvalidPart, MalformedXML

    if getattr(models.FakeMultipart, "_s3commit_one_copy", False):
        return
    original = models.FakeMultipart.complete

    def complete(self: Any, body: Any) -> Any:
        if self.metadata.get("x-amz-checksum-algorithm"):
            return original(self, body)
        parts, md5s, last = [], bytearray(), None
        for number, etag in body:
            part = self.parts.get(number)
            if part is None or part.etag.replace('"', "") != etag.replace('"', ""):
                raise InvalidPart()
            if last is not None and last.contentsize < models.S3_UPLOAD_PART_MIN_SIZE:
                raise EntityTooSmall()
            md5s.extend(bytes.fromhex(part.etag.replace('"', "")))
            parts.append(part)
            last = part
        if not parts:
            raise MalformedXML
        total = bytearray(sum(p.contentsize for p in parts))
        view, offset = memoryview(total), 0
        for part in parts:
            with part.lock:
                part._value_buffer.seek(0)
                offset += part._value_buffer.readinto(view[offset:offset + part.contentsize])
        view.release()
        etag = models.md5_hash(bytes(md5s)).hexdigest()
        return total, f"{etag}-{len(parts)}", None

    models.FakeMultipart.complete = complete  # type: ignore[method-assign]
    models.FakeMultipart._s3commit_one_copy = True  # type: ignore[attr-defined]
