"""Wire helpers: request body framing, S3 error documents, copy ranges."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from s3commit.testing._sim import wire


def test_read_body_reads_exactly_content_length_bytes() -> None:
    stream = io.BytesIO(b"helloNEXT REQUEST")
    assert wire.read_body(stream, [("Content-Length", "5")]) == b"hello"
    assert stream.read() == b"NEXT REQUEST"  # the keep-alive stream stays in sync


def test_read_body_dechunks_and_skips_trailers() -> None:
    body = b"3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nx-amz-checksum-crc32: AAAA\r\n\r\nNEXT"
    stream = io.BytesIO(body)
    assert wire.read_body(stream, [("Transfer-Encoding", "chunked")]) == b"abcdefg"
    assert stream.read() == b"NEXT"


def test_read_body_rejects_truncated_and_malformed_bodies() -> None:
    with pytest.raises(wire.BadRequestBody, match="short"):
        wire.read_body(io.BytesIO(b"abc"), [("Content-Length", "10")])
    with pytest.raises(wire.BadRequestBody, match="chunk size"):
        wire.read_body(io.BytesIO(b"zz\r\n"), [("Transfer-Encoding", "chunked")])


def test_forwardable_drops_hop_by_hop_and_framing_headers() -> None:
    headers = [("Connection", "keep-alive"), ("Expect", "100-continue"), ("Content-Length", "3"),
               ("x-amz-checksum-crc32", "abc"), ("Content-Encoding", "aws-chunked")]  # fmt: skip
    assert wire.forwardable(headers) == [("x-amz-checksum-crc32", "abc"), ("Content-Encoding", "aws-chunked")]


def test_error_document_is_the_s3_error_xml() -> None:
    status, body = wire.error_document("NoSuchUpload", resource="/b/k", upload_id="U1")
    root = ET.fromstring(body)
    assert status == 404
    assert (root.tag, root.findtext("Code"), root.findtext("UploadId")) == ("Error", "NoSuchUpload", "U1")
    assert root.findtext("Resource") == "/b/k"


@pytest.mark.parametrize(
    ("value", "length"), [("bytes=0-99", 100), ("bytes=100-100", 1), ("bytes=5-4", None), (None, None)]
)
def test_copy_range_length(value: str | None, length: int | None) -> None:
    assert wire.copy_range_length(value) == length
