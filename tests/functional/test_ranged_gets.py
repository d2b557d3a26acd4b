"""The data path's ranged GETs (s3commit.store.ranged_gets): one presigned URL per object, each range sent through the
client's HTTP session, the bytes exact, errors translated as botocore's would be, a stale URL signed afresh, and an
answer that is not the range asked for never read as if it were."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from s3commit import S3Store
from s3commit.errors import NotFoundError, TransientError
from s3commit.store.ranged_gets import URL_SECONDS, RangedGets, _answer
from tests.conftest import store_options_for

MIB = 1024 * 1024


@pytest.fixture
def counted(s3_server, monkeypatch):
    """A store whose client counts presigned URLs and refuses botocore's own GetObject."""
    store = S3Store(store_options_for(s3_server))
    presigned = []
    real = store.requests.client.generate_presigned_url

    def presign(*args, **kwargs):
        presigned.append(kwargs["Params"]["Key"])
        return real(*args, **kwargs)

    def no_get_object(**_):
        raise AssertionError("a ranged GET went through botocore's get_object")

    monkeypatch.setattr(store.requests.client, "generate_presigned_url", presign)
    monkeypatch.setattr(store.requests.client, "get_object", no_get_object)
    return store, presigned


def read(store, bucket, key, start, end, chunk=MIB):
    return b"".join(store.objects.stream_object(bucket, key, start=start, end=end, chunk_size=chunk))


def test_ranges_are_exact_and_an_object_is_presigned_once(counted, s3_bucket, s3_client):
    store, presigned = counted
    data = os.urandom(3 * MIB + 123)
    s3_client.put_object(Bucket=s3_bucket, Key="obj", Body=data)
    for start, end in [(0, len(data)), (1, 2), (MIB - 7, 2 * MIB + 9), (len(data) - 1, len(data))]:
        assert read(store, s3_bucket, "obj", start, end, chunk=MIB // 3) == data[start:end], (start, end)
    assert presigned == ["obj"]
    assert store.counters.snapshot()["requests"]["GetObject"] == 4


def test_a_missing_object_is_not_found_with_s3s_code(counted, s3_bucket):
    store, _ = counted
    with pytest.raises(NotFoundError) as caught:
        read(store, s3_bucket, "missing", 0, 10)
    assert caught.value.code == "NoSuchKey" and caught.value.operation == "GetObject"
    assert caught.value.key == "missing"


class FakeSession:
    """An HTTP session answering with scripted statuses (the URLs it was asked for kept)."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.urls: list[str] = []

    def send(self, request):
        self.urls.append(request.url)
        status = self.statuses.pop(0)
        first, last = request.headers["Range"].split("=")[1].split("-")
        headers = {"content-length": str(int(last) - int(first) + 1), "content-range": f"bytes {first}-{last}/99"}
        body = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
        raw = SimpleNamespace(read=lambda *_: body, release_conn=lambda: None)
        return SimpleNamespace(status_code=status, headers=headers if status == 206 else {}, raw=raw)


class FakeClient:
    def __init__(self, session: FakeSession) -> None:
        self._endpoint = SimpleNamespace(http_session=session)
        self.meta = SimpleNamespace(endpoint_url="http://127.0.0.1:9")
        self.signed = 0

    def generate_presigned_url(self, *_, **__):
        self.signed += 1
        return f"http://127.0.0.1:9/b/k?signed={self.signed}"


def test_a_kept_url_refused_is_signed_afresh_once():
    now = [0.0]
    gets = RangedGets(clock=lambda: now[0])
    session = FakeSession(206, 403, 206)
    client = FakeClient(session)
    gets.get(client, "b", "k", 0, 9)
    now[0] = URL_SECONDS / 2
    answer = gets.get(client, "b", "k", 10, 19)  # the kept URL is refused: a new one is signed and used
    assert answer["ContentLength"] == 10
    assert client.signed == 2 and session.urls[-2].endswith("signed=1") and session.urls[-1].endswith("signed=2")
    now[0] = URL_SECONDS * 3
    session.statuses = [403]
    with pytest.raises(ClientError) as caught:  # a URL just signed and refused: the refusal stands
        gets.get(client, "b", "k", 0, 9)
    assert caught.value.response["Error"]["Code"] == "AccessDenied" and client.signed == 3


@pytest.mark.parametrize("status, content_range", [(200, None), (206, "bytes 0-9/99")],
                         ids=["range-ignored", "wrong-range"])
def test_an_answer_that_is_not_the_range_asked_for_is_refused_and_retried(status, content_range):
    headers = {"content-length": "99"}
    if content_range:
        headers["content-range"] = content_range
    released = []
    response = SimpleNamespace(status_code=status, headers=headers, raw=SimpleNamespace(
        release_conn=lambda: released.append(True)))
    with pytest.raises(ClientError) as caught:
        _answer(response, "b", "k", 10, 19)
    assert caught.value.response["Error"]["Code"] == "InvalidRangeAnswer" and released
    from s3commit.errors import translate_client_error

    assert isinstance(translate_client_error(caught.value, operation="GetObject", bucket="b"), TransientError)


def test_a_whole_object_answer_from_its_first_byte_is_read():
    response = SimpleNamespace(status_code=200, headers={"content-length": "99"}, raw=SimpleNamespace())
    assert _answer(response, "b", "k", 0, 9)["ContentLength"] == 99
