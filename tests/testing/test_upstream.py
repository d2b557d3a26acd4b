"""The simulator's upstream: moto called in-process answers every request as moto's own HTTP server does."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from s3commit.testing._sim.upstream import HttpUpstream, UpstreamAnswer, WsgiUpstream

AUTH = "AWS4-HMAC-SHA256 Credential=testing/20261129/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00"
VARYING_HEADERS = {"date", "server", "x-amz-request-id", "x-amzn-requestid", "x-amz-id-2", "last-modified",
                   "connection", "transfer-encoding"}
ODD_KEY = "dir one/c+d%2Fe/ü €/file=1&x.txt"


@pytest.fixture(scope="module")
def moto_server() -> Iterator[Any]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def upstreams(moto_server: Any) -> tuple[HttpUpstream, WsgiUpstream, str]:
    host, port = moto_server.get_host_and_port()
    return HttpUpstream(f"http://{host}:{port}"), WsgiUpstream.of_moto(moto_server), f"{host}:{port}"


def _comparable(answer: UpstreamAnswer, method: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """The answer less what varies between two requests: dates, request and upload ids (and the length, which
    an upload id's varies: checked against the body instead)."""
    length = answer.header("Content-Length")
    if method != "HEAD" and length is not None:
        assert int(length) == len(answer.body)
    varying = VARYING_HEADERS | ({"content-length"} if method != "HEAD" else set())
    headers = sorted((name.lower(), value) for name, value in answer.headers if name.lower() not in varying)
    body = re.sub(rb"<(LastModified|Initiated|RequestId|HostId|UploadId)>[^<]*</\1>", b"", answer.body)
    return answer.status, headers, body


def _both(upstreams: tuple[HttpUpstream, WsgiUpstream, str], method: str, path: str, body: bytes = b"",
          **extra: str) -> UpstreamAnswer:
    http, wsgi, host = upstreams
    headers = {"Host": host, "Authorization": AUTH, **extra}
    if body or method in ("PUT", "POST"):
        headers["Content-Length"] = str(len(body))
    by_http = http.send(method, path, headers, body)
    by_wsgi = wsgi.send(method, path, headers, body)
    assert _comparable(by_wsgi, method) == _comparable(by_http, method), f"{method} {path}"
    return by_wsgi


def test_moto_in_process_answers_as_its_http_server(upstreams: tuple[HttpUpstream, WsgiUpstream, str]) -> None:
    bucket = f"upstream-{uuid.uuid4().hex[:8]}"
    key_path = f"/{bucket}/{quote(ODD_KEY, safe='/~')}"
    assert _both(upstreams, "PUT", f"/{bucket}").status == 200
    put = _both(upstreams, "PUT", key_path, b"hello", **{"x-amz-meta-plain": "1", "x-amz-meta-under_score": "2",
                                                           "Content-Type": "text/plain"})
    assert put.status == 200

    got = _both(upstreams, "GET", key_path)
    assert got.body == b"hello"
    assert got.header("x-amz-meta-under_score") == "2"  # moto's request handler keeps the underscore
    assert got.header("x-amz-meta-plain") == "1"
    head = _both(upstreams, "HEAD", key_path)
    assert (head.status, head.header("Content-Length"), head.body) == (200, "5", b"")
    assert _both(upstreams, "GET", key_path, Range="bytes=1-2").body == b"el"

    listed = _both(upstreams, "GET", f"/{bucket}?list-type=2&prefix={quote('dir one/', safe='')}&encoding-type=url")
    assert b"<KeyCount>1</KeyCount>" in listed.body
    assert _both(upstreams, "GET", f"/{bucket}/missing").status == 404

    created = _both(upstreams, "POST", f"/{bucket}/multi?uploads")
    assert created.status == 200
    # an unknown upload id makes moto raise: both answer werkzeug's 500 (the simulator maps it to NoSuchUpload)
    unknown = _both(upstreams, "POST", f"/{bucket}/multi?uploadId=nope",
                    b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>"
                    b"</CompleteMultipartUpload>")
    assert unknown.status == 500

    assert _both(upstreams, "DELETE", key_path).status == 204
    assert _both(upstreams, "GET", key_path).status == 404
