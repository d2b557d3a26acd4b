"""CompleteMultipartUpload through s3commit's lean path (s3commit.store.lean_complete) over the in-process wire store:
the same object and ETag as botocore's, the request botocore would sign, errors (a 200's <Error>, SlowDown, 412,
NoSuchUpload after a completion) as botocore's are translated, counters, refreshed credentials, and where botocore
still sends it."""

from __future__ import annotations

import datetime
import re
from types import SimpleNamespace

import pytest
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.credentials import Credentials, RefreshableCredentials
from botocore.exceptions import ClientError

from s3commit.config.options import StoreOptions
from s3commit.errors import PreconditionFailedError, ThrottledError, TransientError
from s3commit.store.client import build_s3_client
from s3commit.store.lean_complete import LeanCompletes, Target, answer_of, complete_body, target_of
from s3commit.testing import MemoryS3, S3Wire
from s3commit.testing.memory import s3_error

BUCKET = "lean"
KEY = "out/year=2026/part 0001+ü~.parquet"


class Recorder:
    """Records what reaches a wire's answer (the lean path sends through the client's session, botocore through
    ``before-send``: both end there)."""

    def __init__(self, wire: S3Wire, *, rewrite=None) -> None:
        self.requests: list = []
        self._answer = wire.answer
        self._rewrite = rewrite
        wire.answer = self  # type: ignore[method-assign]

    def __call__(self, request):
        self.requests.append(request)
        response = self._answer(request)
        return self._rewrite(request, response) if self._rewrite else response


def wire_store(*, lean: bool = True, fail=None, retry=None):
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    wire = S3Wire(s3, fail=fail)
    return wire, wire.store(lean_requests=lean, retry=retry)


def upload(store, key: str = KEY, parts: int = 2):
    upload_id = store.uploads.create_multipart_upload(BUCKET, key)
    sent = [store.uploads.upload_part(BUCKET, key, upload_id, n, bytes([n]) * (5 * 1024 * 1024 if n < parts else 10))
            for n in range(1, parts + 1)]
    return upload_id, sent


def complete(store, key, upload_id, sent, **kwargs):
    return store.uploads.complete_multipart_upload(
        BUCKET, key, upload_id, [p.etag for p in sent], checksum_algorithm=store.uploads.checksum_algorithm(BUCKET),
        part_checksums=[p.checksum for p in sent], **kwargs)


def test_the_setting_is_on_by_default_and_read_from_its_key():
    assert StoreOptions().lean_requests is True
    assert StoreOptions.from_hadoop_conf({"s3commit.store.lean-requests": "false"}).lean_requests is False
    assert StoreOptions.from_hadoop_conf({"s3commit.store.lean-requests": "true"}).lean_requests is True
    assert wire_store(lean=False)[1].uploads.lean is None


def test_lean_and_botocore_complete_alike():
    found = {}
    for lean in (False, True):
        wire, store = wire_store(lean=lean)
        del store.capabilities[BUCKET]  # a store not probed: auto's checksum rides with every part and the Complete
        upload_id, sent = upload(store)
        recorder = Recorder(wire)
        etag = complete(store, KEY, upload_id, sent, if_none_match=True)
        request = recorder.requests[-1]
        data, _, _ = store.objects.read_object(BUCKET, KEY)
        unsigned = {"user-agent", "amz-sdk-invocation-id", "amz-sdk-request"}
        found[lean] = (etag, data, request.url, request.body, {k.lower() for k in request.headers} - unsigned)
        assert store.counters.snapshot()["requests"]["CompleteMultipartUpload"] == 1
    assert found[True][0] == found[False][0] and found[True][0].endswith('-2"')
    assert found[True][1:] == found[False][1:]  # URL, body (checksums included), headers
    assert b"<ChecksumCRC32" in found[True][3]


def signed_by_botocore(request, credentials, region="us-east-1", monkeypatch=None):
    """The Authorization botocore's S3 signer gives ``request`` at its ``X-Amz-Date``."""
    import botocore.auth

    stamp = request.headers["X-Amz-Date"]
    stamp = stamp.decode() if isinstance(stamp, bytes) else stamp
    when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when)
    names = {"if-none-match", "x-amz-content-sha256"}
    headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items() if k.lower() in names}
    again = AWSRequest(method="POST", url=request.url, headers=headers, data=request.body)
    botocore.auth.S3SigV4Auth(credentials, "s3", region).add_auth(again)
    return again.headers["Authorization"]


def test_the_signature_is_botocores(monkeypatch):
    wire, store = wire_store()
    upload_id, sent = upload(store)
    recorder = Recorder(wire)
    complete(store, KEY, upload_id, sent, if_none_match=True)
    request = recorder.requests[-1]
    assert request.headers["Authorization"] == signed_by_botocore(
        request, Credentials("memory", "memory-secret"), monkeypatch=monkeypatch)


def test_a_session_token_virtual_hosted_addressing_and_a_port_are_signed_as_botocore_signs_them(monkeypatch):
    sent = []
    session = SimpleNamespace(send=lambda request: sent.append(request) or AWSResponse(
        request.url, 200, {}, _raw(b"")))
    credentials = Credentials("AKID", "secret", "token/with+chars=")
    client = SimpleNamespace(_request_signer=SimpleNamespace(_credentials=credentials),
                             _endpoint=SimpleNamespace(http_session=session))
    lean = LeanCompletes(clock=lambda: 1_800_000_000.0)
    lean._targets["b"] = Target("https://b.s3.example.com:8443", "b.s3.example.com:8443", "eu-west-1", "s3")
    parts = [{"PartNumber": 1, "ETag": '"a&b"', "ChecksumSHA256": "x+/="}]
    with pytest.raises(ClientError):  # the fake session's answer is empty: an error, after sending
        lean.complete(client, "b", "a//b/../c d", "id+/=", parts)
    request = sent[0]
    assert request.url == "https://b.s3.example.com:8443/a//b/../c%20d?uploadId=id%2B%2F%3D"
    assert request.headers["X-Amz-Security-Token"] == "token/with+chars="
    assert b"<ETag>\"a&amp;b\"</ETag><ChecksumSHA256>x+/=</ChecksumSHA256>" in request.body
    assert request.headers["Authorization"] == signed_by_botocore(request, credentials, "eu-west-1", monkeypatch)


class Sent(Exception):
    pass


def test_targets_are_where_botocores_own_call_goes():
    def stop(request, **_):
        raise Sent(request.url, request.headers["Authorization"])

    def target(**options):
        client = build_s3_client(StoreOptions(access_key="a", secret_key="s", **options))
        lean = LeanCompletes()
        assert lean.usable(client, "my-bucket")
        found = lean._targets["my-bucket"]
        client.meta.events.register("before-send.s3.CompleteMultipartUpload", stop)
        with pytest.raises(Sent) as sent:
            client.complete_multipart_upload(Bucket="my-bucket", Key="a b", UploadId="u",
                                             MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": "e"}]})
        url, authorization = sent.value.args
        assert url == f"{found.base}/a%20b?uploadId=u"
        assert f"/{found.region}/s3/aws4_request" in str(authorization)
        return found.base, found.host

    assert target(region="eu-west-1") == ("https://my-bucket.s3.eu-west-1.amazonaws.com",
                                          "my-bucket.s3.eu-west-1.amazonaws.com")
    assert target(endpoint_url="http://127.0.0.1:9000", region="us-east-1", path_style=True) == (
        "http://127.0.0.1:9000/my-bucket", "127.0.0.1:9000")
    assert target(endpoint_url="https://s3.example.com:443", region="x")[1] == "s3.example.com"


def test_what_is_not_plain_sigv4_falls_back_to_botocore():
    plain = {"authSchemes": [{"name": "sigv4", "signingName": "s3", "signingRegion": "us-west-2"}]}
    assert target_of("https://b.s3.us-west-2.amazonaws.com", {}, plain, None).region == "us-west-2"
    assert target_of("https://b.s3.amazonaws.com", {}, {}, "eu-west-1").region == "eu-west-1"
    express = {"backend": "S3Express", "authSchemes": [{"name": "sigv4-s3express", "signingName": "s3express"}]}
    assert target_of("https://b.s3express-usw2-az1.us-west-2.amazonaws.com", {}, express, "us-west-2") is None
    assert target_of("https://mrap.accesspoint.s3-global.amazonaws.com", {},
                     {"authSchemes": [{"name": "sigv4a", "signingName": "s3"}]}, "x") is None
    assert target_of("https://b.s3.amazonaws.com", {"x-amz-extra": "1"}, plain, None) is None
    anonymous = StoreOptions.from_hadoop_conf({
        "fs.s3a.endpoint": "http://127.0.0.1:1", "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"})
    assert not LeanCompletes().usable(build_s3_client(anonymous), "b")
    assert not LeanCompletes().usable(SimpleNamespace(meta=SimpleNamespace(config=SimpleNamespace())), "b")
    assert not LeanCompletes().usable(build_s3_client(StoreOptions(access_key="a", secret_key="s", region="us-west-2")),
                              "my-bucket--usw2-az1--x-s3")


def test_botocore_sends_it_where_lean_does_not_apply():
    wire, store = wire_store()
    upload_id, sent = upload(store)
    store.uploads.lean._client, store.uploads.lean._usable = store.requests.client, False
    recorder = Recorder(wire)
    assert complete(store, KEY, upload_id, sent)
    assert "amz-sdk-invocation-id" in {k.lower() for k in recorder.requests[-1].headers}


@pytest.mark.parametrize("code,status", [("SignatureDoesNotMatch", 403), ("AuthorizationHeaderMalformed", 400),
                                         ("PermanentRedirect", 301)])
def test_a_store_that_refuses_the_lean_request_gets_it_and_the_next_from_botocore(code, status, caplog):
    refused = []

    def refuse_lean(request, response):
        lean = "amz-sdk-invocation-id" not in {k.lower() for k in request.headers}
        if lean:  # (not acted on: the model is asked nothing)
            refused.append(request)
            body = f"<Error><Code>{code}</Code><Message>refused</Message></Error>".encode()
            return AWSResponse(request.url, status, {"content-type": "application/xml"}, _raw(body))
        return response

    wire, store = wire_store()
    recorder = Recorder(wire, rewrite=refuse_lean)
    upload_id, sent = upload(store)
    with caplog.at_level("WARNING", logger="s3commit.store.lean_complete"):
        assert complete(store, KEY, upload_id, sent).endswith('-2"')
        other = KEY + ".2"
        second_id, second = upload(store, other)
        assert complete(store, other, second_id, second).endswith('-2"')
    assert len(refused) == 1 and len(caplog.records) == 1 and code in caplog.records[0].getMessage()
    assert not store.uploads.lean.usable(store.requests.client, BUCKET)
    assert store.objects.read_object(BUCKET, other)[0][-10:] == bytes([2]) * 10
    assert len([r for r in recorder.requests if "uploadId=" in r.url and r.method == "POST"]) == 3


def test_an_error_that_is_not_a_refusal_keeps_the_lean_path():
    _, store = wire_store(fail=lambda request: s3_error("InvalidPart", 400, "bad part")
                             if request.operation == "complete_multipart_upload" else None)
    upload_id, sent = upload(store)
    with pytest.raises(Exception, match="bad part"):
        complete(store, KEY, upload_id, sent)
    assert store.uploads.lean.usable(store.requests.client, BUCKET)


def test_an_error_in_a_200_is_raised_and_retried():
    answered = []

    def error_once(request, response):
        if not answered:
            answered.append(request)
            body = (b'<?xml version="1.0" encoding="UTF-8"?>\n\n<Error><Code>InternalError</Code>'
                    b"<Message>We encountered an internal error. Please try again.</Message></Error>")
            return AWSResponse(request.url, 200, {"content-type": "application/xml"}, _raw(body))
        return response

    wire, store = wire_store()
    upload_id, sent = upload(store)
    Recorder(wire, rewrite=error_once)  # (the first Complete is lost: the model completed it, its answer says not)
    etag = complete(store, KEY, upload_id, sent)
    assert etag.endswith('-2"')
    counted = store.counters.snapshot()
    assert counted["requests"]["CompleteMultipartUpload"] == 2 and counted["retries"]["CompleteMultipartUpload"] == 1


def _raw(body: bytes):
    from s3commit.testing.memory_wire import _Raw

    return _Raw(body)


def test_answers_become_botocores_errors():
    with pytest.raises(ClientError) as raised:
        answer_of(200, {"x-amz-request-id": "R"}, b"  <Error><Code>SlowDown</Code><Message>m</Message></Error>")
    assert raised.value.response["Error"] == {"Code": "SlowDown", "Message": "m"}
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    with pytest.raises(ClientError) as raised:
        answer_of(200, {}, b"not xml")
    assert raised.value.response["Error"]["Code"] == "MalformedAnswer"
    with pytest.raises(ClientError) as raised:
        answer_of(404, {}, b"")
    assert raised.value.response["Error"]["Code"] == "404"
    ok = answer_of(200, {"X-Amz-Request-Id": "R"}, b'<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/'
                                                  b'doc/2006-03-01/"><ETag>"e-1"</ETag></CompleteMultipartUploadResult>')
    assert ok["ETag"] == '"e-1"' and ok["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert complete_body([{"PartNumber": 1, "ETag": '"e"'}]) == (
        b'<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><PartNumber>1</PartNumber>'
        b'<ETag>"e"</ETag></Part></CompleteMultipartUpload>')


def test_slowdown_is_a_throttle_the_limit_sees():
    from s3commit.config.options import RetryPolicy

    slowed = []

    def slow_down(request):
        if request.operation == "complete_multipart_upload" and len(slowed) < 3:
            slowed.append(request)
            return s3_error("SlowDown", 503, "Please reduce your request rate.")
        return None

    _, store = wire_store(fail=slow_down)
    upload_id, sent = upload(store)
    assert complete(store, KEY, upload_id, sent).endswith('-2"')
    counted = store.counters.snapshot()
    assert counted["throttles"]["CompleteMultipartUpload"] == 3
    assert counted["requests"]["CompleteMultipartUpload"] == 4
    slowed.clear()
    _, once = wire_store(fail=slow_down, retry=RetryPolicy(max_attempts=1, initial_delay=0, max_delay=0))
    upload_id, sent = upload(once)
    with pytest.raises(ThrottledError):
        complete(once, KEY, upload_id, sent)


def test_if_none_match_412_and_a_repeated_complete():
    _, store = wire_store()
    upload_id, sent = upload(store)
    first = complete(store, KEY, upload_id, sent, if_none_match=True)
    assert complete(store, KEY, upload_id, sent, if_none_match=True) == first  # NoSuchUpload: the object is ours
    other, parts = upload(store, parts=1)
    with pytest.raises(PreconditionFailedError):
        complete(store, KEY, other, parts, if_none_match=True)
    assert store.counters.snapshot()["failures"]["CompleteMultipartUpload"] == 1


def test_a_server_error_that_persists_is_transient_then_read_back():
    def broken(request):
        return s3_error("InternalError", 500) if request.operation == "complete_multipart_upload" else None

    _, store = wire_store(fail=broken)
    upload_id, sent = upload(store)
    with pytest.raises(TransientError):  # the object is not there: the Complete did not happen
        complete(store, KEY, upload_id, sent)


def test_refreshed_credentials_are_used():
    issued = []

    def refresh():
        issued.append(len(issued))
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)  # refreshed each use
        return {"access_key": f"key-{len(issued)}", "secret_key": "s", "token": f"t-{len(issued)}",
                "expiry_time": expiry.isoformat()}

    wire, store = wire_store()
    store.requests.client._request_signer._credentials = RefreshableCredentials.create_from_metadata(
        refresh(), refresh, "test")
    recorder = Recorder(wire)
    for n in range(2):
        key = f"{KEY}-{n}"
        upload_id, sent = upload(store, key, parts=1)
        complete(store, key, upload_id, sent)
    completes = [r for r in recorder.requests if r.method == "POST" and b"<CompleteMultipartUpload" in (r.body or b"")]
    keys = [re.search(r"Credential=([^/]+)/", str(r.headers["Authorization"])).group(1) for r in completes]
    tokens = [r.headers["X-Amz-Security-Token"] for r in completes]
    assert len(set(keys)) == 2 and len(set(tokens)) == 2 and all(k.startswith("key-") for k in keys)


@pytest.mark.parametrize("body", [
    b'<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/'
    b'2006-03-01/"><Location>http://h/b/k</Location><Bucket>b</Bucket><Key>a&amp;b &lt;c&gt;</Key>'
    b'<ETag>&quot;3858f62230ac3c915f300c664312c11f-9&quot;</ETag></CompleteMultipartUploadResult>',
    b'<CompleteMultipartUploadResult>\n  <Location>l</Location>\n  <ETag>"abc-2"</ETag>\n'
    b'  <ChecksumCRC32>AAAAAA==-2</ChecksumCRC32></CompleteMultipartUploadResult>',
    b'<CompleteMultipartUploadResult><ETag>&#34;abc-2&#34;</ETag></CompleteMultipartUploadResult>',
    b'<s3:CompleteMultipartUploadResult xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/"><s3:ETag>"e-1"</s3:ETag>'
    b'</s3:CompleteMultipartUploadResult>',
    b'<CompleteMultipartUploadResult><Location><![CDATA[x]]></Location><ETag>"e-3"</ETag>'
    b'</CompleteMultipartUploadResult>',
])
def test_the_answers_etag_is_the_one_elementtree_reads(body):
    from xml.etree import ElementTree

    root = ElementTree.fromstring(body)
    expected = next(e.text for e in root if e.tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1] == "ETag")
    assert answer_of(200, {}, body)["ETag"] == expected


def test_an_error_inside_a_200_is_never_read_as_a_result():
    body = b'<Error><Code>InternalError</Code><ETag>"not-this"</ETag></Error>'
    with pytest.raises(ClientError, match="InternalError"):
        answer_of(200, {}, body)


def test_a_complete_prepared_after_another_threads_refusal_is_handed_to_botocore_unsent():
    from s3commit.store.lean_complete import RefusedBefore

    _, store = wire_store()
    lean, client = store.uploads.lean, store.requests.client
    assert lean.usable(client, BUCKET)  # what the caller saw
    refusal = ClientError({"Error": {"Code": "SignatureDoesNotMatch", "Message": "no"}}, "CompleteMultipartUpload")
    assert lean.refused(BUCKET, refusal)  # another thread's answer
    with pytest.raises(RefusedBefore) as raised:
        lean.prepare(client, BUCKET, KEY, "u", [{"PartNumber": 1, "ETag": '"e"'}])
    assert lean.refused(BUCKET, raised.value) and not lean.usable(client, BUCKET)
