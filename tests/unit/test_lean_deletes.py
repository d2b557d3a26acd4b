"""DeleteObjects through s3commit's lean path (``LeanCompletes.delete_objects``) over the in-process wire store: the
same keys deleted and kept as botocore's, each key's ETag condition honoured, the request botocore would sign (its
``Content-MD5`` included), errors as botocore's are translated, and botocore's where the store refuses the lean one."""

from __future__ import annotations

import base64
import datetime
import hashlib

import pytest
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.credentials import Credentials

from s3commit.errors import NotFoundError
from s3commit.store.lean_complete import deleted_of
from s3commit.testing.memory_wire import _Raw
from tests.unit.test_lean_complete import Recorder
from tests.unit.test_lean_reads import BUCKET, ODD, stores


def lean_posts(recorder):
    return [r for r in recorder.requests if r.method == "POST" and "delete" in r.url
            and "lean" in str(r.headers.get("User-Agent", ""))]


def test_lean_and_botocore_delete_alike_odd_keys_and_batches():
    keys = ODD + [f"t/many/{n:05d}" for n in range(2_345)]
    for lean in (True, False):
        wire, lean_store, plain = stores(keys)
        store = lean_store if lean else plain
        recorder = Recorder(wire)
        assert store.objects.delete_objects(BUCKET, keys[:-5]) == len(keys) - 5
        assert sorted(i.key for i in plain.objects.list_objects(BUCKET, "")) == sorted(keys[-5:])
        assert len(lean_posts(recorder)) == (3 if lean else 0)  # 1,000 a batch
        assert store.counters.snapshot()["requests"]["DeleteObjects"] == 3


def test_a_key_changed_since_its_listing_is_kept_and_named():
    wire, lean, plain = stores(["t/a", "t/b", "t/c&<'\""])
    listed = {i.key: i.etag for i in lean.objects.list_objects(BUCKET, "t/")}
    plain.objects.put_object(BUCKET, "t/b", b"another writer")
    recorder = Recorder(wire)
    deleted, changed = lean.conditional.delete_objects_if_match(BUCKET, sorted(listed.items()))
    assert (deleted, changed) == (2, ["t/b"])
    assert [i.key for i in plain.objects.list_objects(BUCKET, "t/")] == ["t/b"]
    assert len(lean_posts(recorder)) == 1


def test_the_delete_is_signed_as_botocore_signs_it(monkeypatch):
    import botocore.auth

    wire, lean, _ = stores(["t/a b"])
    recorder = Recorder(wire)
    lean.objects.delete_objects(BUCKET, ["t/a b"])
    request = lean_posts(recorder)[-1]
    body = bytes(request.body)
    assert request.headers["Content-MD5"] == base64.b64encode(hashlib.md5(body).digest()).decode()
    assert b"<Quiet>true</Quiet>" in body and b"<Key>t/a b</Key>" in body
    stamp = request.headers["X-Amz-Date"]
    stamp = stamp.decode() if isinstance(stamp, bytes) else stamp
    monkeypatch.setattr(botocore.auth, "get_current_datetime",
                        lambda: datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ"))
    signed = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
              if k.lower() in ("x-amz-content-sha256", "content-md5")}
    again = AWSRequest(method="POST", url=request.url, headers=signed, data=body)
    botocore.auth.S3SigV4Auth(Credentials("memory", "memory-secret"), "s3", "us-east-1").add_auth(again)
    assert request.headers["Authorization"] == again.headers["Authorization"]


def test_a_refused_delete_is_sent_by_botocore_and_so_are_the_buckets_later_ones(caplog):
    def refuse(request, response):
        if "lean" in str(request.headers.get("User-Agent", "")) and request.method == "POST":
            body = b"<Error><Code>MalformedXML</Code><Message>refused</Message></Error>"
            return AWSResponse(request.url, 400, {"content-type": "application/xml"}, _Raw(body))
        return response

    wire, lean, plain = stores(["t/1", "t/2", "t/3"])
    recorder = Recorder(wire, rewrite=refuse)
    assert lean.objects.delete_objects(BUCKET, ["t/1"]) == 1
    assert lean.objects.delete_objects(BUCKET, ["t/2"]) == 1
    assert [i.key for i in plain.objects.list_objects(BUCKET, "t/")] == ["t/3"]
    assert len(lean_posts(recorder)) == 1 and lean.objects.lean.was_refused(BUCKET)
    assert "refused a request built by s3commit's lean path" in caplog.text


def test_an_error_is_botocores_translated():
    _, lean, plain = stores([])
    for store in (lean, plain):
        with pytest.raises(NotFoundError) as raised:
            store.objects.delete_objects("no-such-bucket", ["t/1"])
        assert raised.value.code == "NoSuchBucket"


def test_an_answer_is_read_as_botocore_reads_it():
    ns = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
    body = (f'<?xml version="1.0"?><DeleteResult {ns}><Deleted><Key>a</Key></Deleted><Error><Key>b&amp;c</Key>'
            "<Code>PreconditionFailed</Code><Message>m</Message></Error></DeleteResult>").encode()
    answer = deleted_of(200, {}, body)
    assert answer["Errors"] == [{"Key": "b&c", "Code": "PreconditionFailed", "Message": "m"}]
    assert answer["Deleted"] == [{"Key": "a"}]
    assert "Errors" not in deleted_of(200, {}, f"<DeleteResult {ns}/>".encode())
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as raised:
        deleted_of(200, {}, b"<Error><Code>InternalError</Code><Message>m</Message></Error>")
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
