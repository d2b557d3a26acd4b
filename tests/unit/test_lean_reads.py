"""ListObjectsV2 pages and whole-object GETs through s3commit's lean path (``LeanCompletes.list_page``,
``get_object``) over the in-process wire store: the same objects, prefixes, pages and bytes as botocore's, the requests
botocore would sign, errors as botocore's are translated (a short body retried), and botocore's where the store
refuses the lean ones."""

from __future__ import annotations

import datetime

import pytest
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from s3commit.errors import NotFoundError
from s3commit.store.lean_complete import key_page_from, key_page_of, listing_of
from s3commit.testing import MemoryS3, S3Wire
from s3commit.testing.memory_wire import _Raw
from tests.unit.test_lean_complete import Recorder

BUCKET = "lean"
ODD = ["t/a b+c.parquet", "t/ü~é/x.csv", "t/100%/y", "t/&<q>'\"", "t/p=1/z", "t/p=2/z", "t/sub/"]


def stores(keys):
    """A wire store holding ``keys``, seen by a lean store and by a botocore one."""
    s3 = MemoryS3()
    s3.create_bucket(BUCKET)
    wire = S3Wire(s3)
    lean, plain = wire.store(lean_requests=True), wire.store(lean_requests=False)
    for key in keys:
        plain.objects.put_object(BUCKET, key, key.encode())
    return wire, lean, plain


def assert_signed_as_botocore(request, monkeypatch):
    """``request`` (a GET sent by the lean path) carries the Authorization botocore's signer gives it."""
    import botocore.auth

    stamp = request.headers["X-Amz-Date"]
    stamp = stamp.decode() if isinstance(stamp, bytes) else stamp
    monkeypatch.setattr(botocore.auth, "get_current_datetime",
                        lambda: datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ"))
    headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
               if k.lower() == "x-amz-content-sha256"}
    again = AWSRequest(method="GET", url=request.url, headers=headers)
    botocore.auth.S3SigV4Auth(Credentials("memory", "memory-secret"), "s3", "us-east-1").add_auth(again)
    assert request.headers["Authorization"] == again.headers["Authorization"]


def test_lean_and_botocore_list_alike_odd_keys_prefixes_and_pages():
    keys = ODD + [f"t/many/{n:05d}" for n in range(2_345)]
    wire, lean, plain = stores(keys)
    recorder = Recorder(wire)
    for prefix, delimiter in (("t/", None), ("t/", "/"), ("t/ü~é/", None), ("t/100%/", "/"), ("none/", None)):
        by_lean = list(lean.objects.list_objects(BUCKET, prefix, delimiter=delimiter))
        by_botocore = list(plain.objects.list_objects(BUCKET, prefix, delimiter=delimiter))
        assert by_lean == by_botocore
    sent = [r for r in recorder.requests if "list-type=2" in r.url]
    lean_sent = [r for r in sent if "lean" in str(r.headers.get("User-Agent", ""))]
    assert lean_sent and len(lean_sent) * 2 == len(sent)  # as many pages each way, the lean ones by s3commit
    assert lean.counters.snapshot()["requests"]["ListObjectsV2"] == plain.counters.snapshot()["requests"][
        "ListObjectsV2"]
    assert len(list(lean.objects.list_objects(BUCKET, "t/"))) == len(keys)
    info = next(i for i in lean.objects.list_objects(BUCKET, "t/a"))
    assert (info.key, info.size) == ("t/a b+c.parquet", len(b"t/a b+c.parquet"))
    assert info.etag.startswith('"') and isinstance(info.last_modified, datetime.datetime)
    assert info.last_modified.tzinfo is not None


def test_pages_of_keys_and_etags_are_what_list_objects_lists():
    keys = ODD + [f"t/many/{n:05d}" for n in range(2_345)]
    wire, lean, plain = stores(keys)
    recorder = Recorder(wire)
    for prefix in ("t/", "t/ü~é/", "t/100%/", "none/"):
        listed = list(plain.objects.list_objects(BUCKET, prefix))
        for store in (lean, plain):
            pages = list(store.objects.list_key_pages(BUCKET, prefix))
            assert [k for p in pages for k in p.keys] == [i.key for i in listed]
            assert [e for p in pages for e in p.etags] == [i.etag for i in listed]
            assert all(p.token for p in pages[:-1]) and pages[-1].token is None
    for store in (lean, plain):  # from a key on, as list_objects' start_after
        after = [k for p in store.objects.list_key_pages(BUCKET, "t/", start_after="t/many/01000") for k in p.keys]
        assert after == [i.key for i in plain.objects.list_objects(BUCKET, "t/", start_after="t/many/01000")]
        assert after[0] == "t/many/01001"
    assert lean_sent(recorder)  # (the lean store's pages by the lean path)


def test_the_listing_is_signed_as_botocore_signs_it(monkeypatch):
    wire, lean, _ = stores(["t/a b"])
    recorder = Recorder(wire)
    list(lean.objects.list_objects(BUCKET, "t/a b", delimiter="/"))
    request = recorder.requests[-1]
    assert "encoding-type=url" in request.url and "prefix=t%2Fa%20b" in request.url
    assert_signed_as_botocore(request, monkeypatch)


def test_a_refused_listing_is_sent_by_botocore_and_so_are_the_buckets_later_ones(caplog):
    def refuse(request, response):
        if "lean" in str(request.headers.get("User-Agent", "")):
            body = b"<Error><Code>SignatureDoesNotMatch</Code><Message>refused</Message></Error>"
            return AWSResponse(request.url, 403, {"content-type": "application/xml"}, _Raw(body))
        return response

    wire, lean, _ = stores(["t/1", "t/2"])
    recorder = Recorder(wire, rewrite=refuse)
    assert [i.key for i in lean.objects.list_objects(BUCKET, "t/")] == ["t/1", "t/2"]
    assert [i.key for i in lean.objects.list_objects(BUCKET, "t/")] == ["t/1", "t/2"]
    by_lean = [r for r in recorder.requests if "lean" in str(r.headers.get("User-Agent", ""))]
    assert len(by_lean) == 1 and lean.objects.lean.was_refused(BUCKET)
    assert "refused a request built by s3commit's lean path" in caplog.text


def test_an_error_is_botocores_translated():
    _, lean, plain = stores([])
    for store in (lean, plain):
        with pytest.raises(NotFoundError) as raised:
            list(store.objects.list_objects("no-such-bucket", "t/"))
        assert raised.value.code == "NoSuchBucket"


def test_a_page_is_read_as_botocores_handlers_leave_it():
    ns = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
    body = (f'<?xml version="1.0"?><ListBucketResult {ns}><Name>b</Name><EncodingType>url</EncodingType>'
            "<IsTruncated>true</IsTruncated><NextContinuationToken>a+b/c=</NextContinuationToken>"
            "<Contents><Key>a+b%2Bc%C3%BC</Key><LastModified>2026-11-29T08:56:01.000Z</LastModified>"
            "<ETag>&quot;e&quot;</ETag><Size>7</Size><StorageClass>STANDARD</StorageClass><Owner><ID>o</ID></Owner>"
            "</Contents><CommonPrefixes><Prefix>p%20q/</Prefix></CommonPrefixes></ListBucketResult>").encode()
    page = listing_of(200, {}, body)
    assert page["IsTruncated"] is True and page["NextContinuationToken"] == "a+b/c="
    entry = page["Contents"][0]
    assert entry["Key"] == "a b+cü" and entry["Size"] == 7 and entry["ETag"] == '"e"'
    assert entry["LastModified"] == datetime.datetime(2026, 11, 29, 8, 56, 1, tzinfo=datetime.timezone.utc)
    assert page["CommonPrefixes"] == [{"Prefix": "p q/"}]
    assert key_page_of(200, {}, body) == (["a b+cü"], ['"e"'], "a+b/c=")
    plain = listing_of(200, {}, body.replace(b"<EncodingType>url</EncodingType>", b""))
    assert plain["Contents"][0]["Key"] == "a+b%2Bc%C3%BC"  # not encoded: not decoded (botocore's rule)
    with pytest.raises(ClientError) as raised:
        listing_of(200, {}, b"<Error><Code>InternalError</Code><Message>m</Message></Error>")
    assert raised.value.response["Error"]["Code"] == "InternalError"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    with pytest.raises(ClientError) as raised:
        key_page_of(503, {}, b"<Error><Code>SlowDown</Code><Message>m</Message></Error>")
    assert raised.value.response["Error"]["Code"] == "SlowDown"
    with pytest.raises(ClientError) as raised:
        listing_of(200, {}, b"<Other/>")
    assert raised.value.response["Error"]["Code"] == "MalformedAnswer"


def lean_sent(recorder, method="GET"):
    return [r for r in recorder.requests if r.method == method and "lean" in str(r.headers.get("User-Agent", ""))]


def test_lean_and_botocore_get_alike():
    wire, lean, plain = stores(ODD)
    recorder = Recorder(wire)
    for key in ODD:
        assert lean.objects.get_object(BUCKET, key) == plain.objects.get_object(BUCKET, key) == key.encode()
    assert len(lean_sent(recorder)) == len(ODD)
    assert lean.counters.snapshot()["requests"]["GetObject"] == len(ODD)
    assert lean.objects.get_object(BUCKET, ODD[0], start=1, end=3) == ODD[0].encode()[1:3]  # a range: botocore's
    assert len(lean_sent(recorder)) == len(ODD)
    with pytest.raises(NotFoundError) as missing:
        lean.objects.get_object(BUCKET, "t/none")
    assert missing.value.code == "NoSuchKey"


def test_the_get_is_signed_as_botocore_signs_it(monkeypatch):
    wire, lean, _ = stores(["t/a b+ü"])
    recorder = Recorder(wire)
    lean.objects.get_object(BUCKET, "t/a b+ü")
    request = recorder.requests[-1]
    assert request.url.endswith("/lean/t/a%20b%2B%C3%BC")
    assert_signed_as_botocore(request, monkeypatch)


def test_a_short_body_is_retried_as_botocores_is():
    cut = []

    def shorten(request, response):
        if request.method == "GET" and not cut:
            cut.append(request)
            body = b"".join(response.raw.stream())
            return AWSResponse(request.url, 200, {"content-length": str(len(body))}, _Raw(body[:-1]))
        return response

    wire, lean, _ = stores(["t/k"])
    Recorder(wire, rewrite=shorten)
    assert lean.objects.get_object(BUCKET, "t/k") == b"t/k"
    assert cut and lean.counters.snapshot()["retries"]["GetObject"] == 1


def test_a_refused_get_is_sent_by_botocore():
    def refuse(request, response):
        if "lean" in str(request.headers.get("User-Agent", "")):
            body = b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>region</Message></Error>"
            return AWSResponse(request.url, 400, {"content-type": "application/xml"}, _Raw(body))
        return response

    wire, lean, _ = stores(["t/k"])
    recorder = Recorder(wire, rewrite=refuse)
    assert lean.objects.get_object(BUCKET, "t/k") == lean.objects.get_object(BUCKET, "t/k") == b"t/k"
    assert len(lean_sent(recorder)) == 1 and lean.objects.lean.was_refused(BUCKET)


def test_a_connection_broken_while_the_body_is_read_is_retried():
    from urllib3.exceptions import ProtocolError

    class Broken:
        def stream(self, **_):
            yield b"t/"
            raise ProtocolError("Connection broken: IncompleteRead")

    broken = []

    def cut(request, response):
        if request.method == "GET" and not broken:
            broken.append(request)
            return AWSResponse(request.url, 200, {"content-length": "3"}, Broken())
        return response

    wire, lean, _ = stores(["t/k"])
    Recorder(wire, rewrite=cut)
    assert lean.objects.get_object(BUCKET, "t/k") == b"t/k"
    assert broken and lean.counters.snapshot()["retries"]["GetObject"] == 1


PAGES = {
    "as S3 writes it": "{decl}<ListBucketResult {ns}><Name>b</Name>{enc}<IsTruncated>true</IsTruncated>"
                       "<NextContinuationToken>a+b/c=</NextContinuationToken>{entries}"
                       "<CommonPrefixes><Prefix>p%20q/</Prefix></CommonPrefixes></ListBucketResult>",
    "indented": "{decl}\n<ListBucketResult {ns}>\n  <IsTruncated>false</IsTruncated>{enc}\n  {entries}\n"
                "</ListBucketResult>",
}
ENTRIES = [
    "<Contents><Key>{key}</Key><LastModified>2026-11-29T08:56:01.000Z</LastModified><ETag>&quot;e{n}&quot;</ETag>"
    "<Size>{n}</Size><StorageClass>STANDARD</StorageClass></Contents>",
    "<Contents><Key>{key}</Key><LastModified>2026-11-29T08:56:01.123Z</LastModified><ETag>\"e{n}\"</ETag>"
    "<ChecksumAlgorithm>CRC64NVME</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType><Size>{n}</Size>"
    "<Owner><ID>o</ID></Owner></Contents>",
    "<Contents>\n <Key>{key}</Key>\n <LastModified>2026-11-29T08:56:01Z</LastModified><ETag>e{n}</ETag>"
    "<Size>{n}</Size></Contents>",  # (spaces: ElementTree's)
    "<Contents><Size>{n}</Size><Key>{key}</Key><ETag>e{n}</ETag><LastModified>2026-11-29T08:56:01.000Z"
    "</LastModified></Contents>",  # (another order: ElementTree's)
    '<Contents a="1"><Key>{key}</Key><LastModified>2026-11-29T08:56:01.000Z</LastModified><ETag>e{n}</ETag>'
    "<Size>{n}</Size></Contents>",
    "<Contents><Key><![CDATA[{key}]]></Key><LastModified>2026-11-29T08:56:01.000Z</LastModified><ETag>e{n}</ETag>"
    "<Size>{n}</Size></Contents>",
]
KEYS = ["a+b%2Bc%C3%BC", "x&amp;y&lt;z&#233;&amp;quot;", "plain/key.parquet"]


@pytest.mark.parametrize("layout", sorted(PAGES))
@pytest.mark.parametrize("encoded", [True, False], ids=["url-encoded", "not-encoded"])
@pytest.mark.parametrize("entry", range(len(ENTRIES)))
def test_a_page_read_by_patterns_is_what_elementtree_reads(layout, encoded, entry):
    from s3commit.store.lean_complete import _listing_as_s3_writes_it, _listing_read

    entries = "".join(ENTRIES[entry if n != 1 else 0].format(key=key, n=n) for n, key in enumerate(KEYS))
    body = PAGES[layout].format(decl='<?xml version="1.0" encoding="UTF-8"?>',
                                ns='xmlns="http://s3.amazonaws.com/doc/2006-03-01/"',
                                enc="<EncodingType>url</EncodingType>" if encoded else "",
                                entries=entries).encode()
    assert listing_of(200, {}, body) == _listing_read(200, {}, body)
    assert len(listing_of(200, {}, body)["Contents"]) == len(KEYS)
    assert key_page_of(200, {}, body) == key_page_from(_listing_read(200, {}, body))
    by_patterns = _listing_as_s3_writes_it(body)
    assert (by_patterns is not None) == (entry in (0, 1))  # the entries as S3 writes them; else ElementTree's
