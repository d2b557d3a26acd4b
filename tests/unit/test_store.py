"""The store against a stubbed botocore client: retries, translation, counters, idempotent completion."""

import pickle

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from s3commit.config.options import RetryPolicy, StoreOptions
from s3commit.errors import (
    AccessDeniedError,
    EndpointUnreachableError,
    NoSuchUploadError,
    NotFoundError,
    StoreError,
    ThrottledError,
    TransientError,
)
from s3commit.model.object_info import multipart_etag
from s3commit.store.s3store import S3Store


def client_error(code, status=400, message="boom", op="Op"):
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, op)


class ScriptedClient:
    """Answers each call with the next scripted outcome (an exception is raised)."""

    def __init__(self, **scripts):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.calls = []

    def __getattr__(self, name):
        def call(**kwargs):
            self.calls.append((name, kwargs))
            outcome = self.scripts[name].pop(0)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        return call


def store_with(client, attempts=4):
    sleeps = []
    store = S3Store(StoreOptions(retry=RetryPolicy(max_attempts=attempts, initial_delay=0.01)), client=client,
                    sleep=sleeps.append)
    return store, sleeps


def test_throttling_is_retried_with_backoff_and_counted():
    client = ScriptedClient(put_object=[client_error("SlowDown", 503), client_error("SlowDown", 503), {"ETag": '"x"'}])
    store, sleeps = store_with(client)
    assert store.objects.put_object("b", "k", b"data") == '"x"'
    counters = store.counters.snapshot()
    assert counters["requests"]["PutObject"] == 3
    assert counters["retries"]["PutObject"] == 2
    assert len(sleeps) == 2
    assert counters["bytes_uploaded"] == 4


def test_exhausted_retries_raise_translated_error_with_attempts_and_object():
    client = ScriptedClient(upload_part=[client_error("InternalError", 500)] * 3)
    store, _ = store_with(client, attempts=3)
    with pytest.raises(TransientError) as err:
        store.uploads.upload_part("b", "dir/k", "UPLOADID1234567890", 1, b"x")
    text = str(err.value)
    assert "UploadPart failed for s3://b/dir/k" in text
    assert "after 3 attempts" in text and "InternalError" in text
    assert "UPLOADID12" in text and "UPLOADID1234567890" not in text  # short upload id
    assert isinstance(err.value.__cause__, ClientError)
    assert store.counters.snapshot()["failures"]["UploadPart"] == 1


@pytest.mark.parametrize(("error", "cls"), [
    (client_error("NoSuchKey", 404), NotFoundError),
    (client_error("AccessDenied", 403), AccessDeniedError),
    (client_error("InvalidAccessKeyId", 403), AccessDeniedError),
    (client_error("NoSuchUpload", 404), NoSuchUploadError),
    (client_error("WeirdNewCode", 400), StoreError),
])
def test_non_retryable_errors_fail_at_once_as_their_type(error, cls):
    client = ScriptedClient(get_object=[error])
    store, sleeps = store_with(client)
    with pytest.raises(cls):
        store.objects.get_object("b", "k")
    assert sleeps == []


def test_timeouts_and_refused_connections_are_retried():
    client = ScriptedClient(head_object=[ReadTimeoutError(endpoint_url="http://x"),
                                         EndpointConnectionError(endpoint_url="http://x"),
                                         {"ContentLength": 5, "ETag": '"e"'}])
    store, sleeps = store_with(client)
    assert store.objects.head_object("b", "k").size == 5
    assert len(sleeps) == 2


def test_unreachable_endpoint_is_reported_as_such():
    client = ScriptedClient(head_bucket=[EndpointConnectionError(endpoint_url="http://127.0.0.1:1")] * 2)
    store, _ = store_with(client, attempts=2)
    with pytest.raises(EndpointUnreachableError, match="HeadBucket failed for s3://b"):
        store.head_bucket("b")


def test_abort_of_unknown_upload_counts_as_done():
    client = ScriptedClient(abort_multipart_upload=[client_error("NoSuchUpload", 404)])
    store, _ = store_with(client)
    store.uploads.abort_multipart_upload("b", "k", "u")  # no exception


def test_complete_after_lost_response_counts_as_done_when_object_matches():
    etags = ['"0cc175b9c0f1b6a831c399e269772661"', '"92eb5ffee6ae2fec3ad71c777531578f"']
    client = ScriptedClient(
        complete_multipart_upload=[client_error("NoSuchUpload", 404)],
        head_object=[{"ContentLength": 6, "ETag": multipart_etag(etags)}],
    )
    store, _ = store_with(client)
    assert store.uploads.complete_multipart_upload("b", "k", "u", etags) == multipart_etag(etags)


def test_complete_of_unknown_upload_fails_when_object_differs():
    client = ScriptedClient(
        complete_multipart_upload=[client_error("NoSuchUpload", 404)],
        head_object=[{"ContentLength": 6, "ETag": '"other-1"'}],
    )
    store, _ = store_with(client)
    with pytest.raises(NoSuchUploadError):
        store.uploads.complete_multipart_upload("b", "k", "u", ['"0cc175b9c0f1b6a831c399e269772661"'])


def test_complete_sends_parts_in_order():
    client = ScriptedClient(complete_multipart_upload=[{"ETag": '"z-2"'}])
    store, _ = store_with(client)
    store.uploads.complete_multipart_upload("b", "k", "u", ['"a"', '"b"'])
    parts = client.calls[0][1]["MultipartUpload"]["Parts"]
    assert parts == [{"PartNumber": 1, "ETag": '"a"'}, {"PartNumber": 2, "ETag": '"b"'}]


def test_list_multipart_uploads_follows_every_page():
    client = ScriptedClient(list_multipart_uploads=[
        {"Uploads": [{"Key": "a", "UploadId": "1"}], "IsTruncated": True, "NextKeyMarker": "a",
         "NextUploadIdMarker": "1"},
        {"Uploads": [{"Key": "b", "UploadId": "2"}], "IsTruncated": False},
    ])
    store, _ = store_with(client)
    assert [(u.key, u.upload_id) for u in store.uploads.list_multipart_uploads("b", "p/")] == [("a", "1"), ("b", "2")]
    assert client.calls[1][1]["KeyMarker"] == "a" and client.calls[1][1]["UploadIdMarker"] == "1"


def test_delete_objects_batches_by_one_thousand():
    client = ScriptedClient(delete_objects=[{}, {}, {}])
    store, _ = store_with(client)
    assert store.objects.delete_objects("b", (f"k{i}" for i in range(2500))) == 2500
    assert [len(c[1]["Delete"]["Objects"]) for c in client.calls] == [1000, 1000, 500]


def test_delete_objects_reports_per_key_errors():
    client = ScriptedClient(delete_objects=[{"Errors": [{"Key": "k1", "Code": "AccessDenied", "Message": "no"}]}])
    store, _ = store_with(client)
    with pytest.raises(AccessDeniedError, match="1 of 2 deletes failed"):
        store.objects.delete_objects("b", ["k1", "k2"])


def test_copy_counts_bytes_copied():
    client = ScriptedClient(copy_object=[{"CopyObjectResult": {"ETag": '"c"'}}])
    store, _ = store_with(client)
    store.objects.copy_object("b", "src", "dst", size=1234)
    assert store.counters.snapshot()["bytes_copied"] == 1234


def test_store_pickles_without_its_client_or_credentials_in_clear_repr():
    store = S3Store(StoreOptions(endpoint_url="http://127.0.0.1:1", access_key="AK", secret_key="SK"))
    clone = pickle.loads(pickle.dumps(store))
    assert clone.options == store.options
    assert clone.requests._client is None


def test_encryption_and_storage_class_reach_create_and_put():
    client = ScriptedClient(create_multipart_upload=[{"UploadId": "u"}], put_object=[{"ETag": '"e"'}])
    store = S3Store(StoreOptions(sse_algorithm="aws:kms", sse_kms_key_id="key-1", storage_class="STANDARD_IA",
                                 acl="bucket-owner-full-control"), client=client)
    store.uploads.create_multipart_upload("b", "k")
    store.objects.put_object("b", "k2", b"x")
    for _, kwargs in client.calls:
        assert kwargs["ServerSideEncryption"] == "aws:kms" and kwargs["SSEKMSKeyId"] == "key-1"
        assert kwargs["StorageClass"] == "STANDARD_IA" and kwargs["ACL"] == "bucket-owner-full-control"


def test_multipart_etag_is_md5_of_part_md5s():
    # md5(bytes.fromhex("0cc1...") + bytes.fromhex("92eb...")) for the parts "a" and "b".
    assert multipart_etag(['"0cc175b9c0f1b6a831c399e269772661"', '"92eb5ffee6ae2fec3ad71c777531578f"']) \
        .endswith('-2"')
    assert multipart_etag(['"not-hex"']) is None


def test_throttled_error_is_retryable_type():
    client = ScriptedClient(put_object=[client_error("SlowDown", 503)] * 2)
    store, _ = store_with(client, attempts=2)
    with pytest.raises(ThrottledError):
        store.objects.put_object("b", "k", b"")


class BrokenBody:
    """A GET body that returns ``data`` in 4-byte reads, then fails with ``error`` (or ends) after ``fail_at``."""

    def __init__(self, data, fail_at=None, error=None):
        self.data, self.fail_at, self.error, self.position, self.closed = data, fail_at, error, 0, False

    def read(self, n):
        if self.fail_at is not None and self.position >= self.fail_at:
            if self.error is not None:
                raise self.error
            return b""
        chunk = self.data[self.position:self.position + min(n, 4)]
        self.position += len(chunk)
        return chunk

    def close(self):
        self.closed = True


def test_a_stream_broken_mid_body_resumes_from_the_next_byte_through_the_retry_policy():
    data = b"0123456789abcdef"
    first = BrokenBody(data, fail_at=8, error=ReadTimeoutError(endpoint_url="http://s3"))
    second = BrokenBody(data[8:], fail_at=4)  # a short body: ends early without an error
    third = BrokenBody(data[12:])
    client = ScriptedClient(get_object=[{"Body": first}, {"Body": second}, {"Body": third}])
    store, sleeps = store_with(client)
    assert b"".join(store.objects.stream_object("b", "k", start=0, end=16, chunk_size=4)) == data
    assert [kwargs["Range"] for _, kwargs in client.calls] == ["bytes=0-15", "bytes=8-15", "bytes=12-15"]
    assert first.closed and second.closed and third.closed
    counters = store.counters.snapshot()
    assert counters["requests"]["GetObject"] == 3 and counters["retries"]["GetObject"] == 2
    assert len(sleeps) == 2


def test_a_stream_that_keeps_breaking_fails_after_the_policys_attempts_naming_the_object():
    client = ScriptedClient(get_object=[{"Body": BrokenBody(b"abcdefgh", fail_at=0, error=ReadTimeoutError(
        endpoint_url="http://s3"))} for _ in range(3)])
    store, _ = store_with(client, attempts=3)
    with pytest.raises(StoreError) as failure:
        list(store.objects.stream_object("b", "k", start=0, end=8))
    assert failure.value.attempts == 3 and "k" in str(failure.value)
    assert store.counters.snapshot()["failures"]["GetObject"] == 1


def test_a_stream_whose_gets_always_fail_makes_at_most_the_policys_attempts_in_all():
    # GETs that fail outright (503) and GETs whose body breaks at once, alternately: one retry loop owns them
    # all, so the policy's attempts bound the GETs in total (nested loops would make attempts x attempts).
    broken = [{"Body": BrokenBody(b"abcdefgh", fail_at=0, error=ReadTimeoutError(endpoint_url="http://s3"))},
              client_error("SlowDown", 503)]
    client = ScriptedClient(get_object=broken * 10)
    store, sleeps = store_with(client, attempts=4)
    with pytest.raises(StoreError) as failure:
        list(store.objects.stream_object("b", "k", start=0, end=8))
    assert len(client.calls) == 4 and failure.value.attempts == 4
    counters = store.counters.snapshot()
    assert counters["requests"]["GetObject"] == 4 and counters["retries"]["GetObject"] == 3
    assert counters["failures"]["GetObject"] == 1 and len(sleeps) == 3


def test_a_stream_resumed_part_way_shares_the_budget_of_its_first_get():
    # Each GET delivers 4 bytes and breaks: with 3 attempts the stream reads 12 of 16 bytes and gives up.
    data = b"0123456789abcdef"
    client = ScriptedClient(get_object=[
        {"Body": BrokenBody(data[n:], fail_at=4, error=ReadTimeoutError(endpoint_url="http://s3"))}
        for n in (0, 4, 8)])
    store, sleeps = store_with(client, attempts=3)
    read = []
    with pytest.raises(TransientError) as failure:
        for chunk in store.objects.stream_object("b", "k", start=0, end=16, chunk_size=4):
            read.append(chunk)
    assert b"".join(read) == data[:12] and failure.value.attempts == 3
    assert [kwargs["Range"] for _, kwargs in client.calls] == ["bytes=0-15", "bytes=4-15", "bytes=8-15"]
    assert store.counters.snapshot()["retries"]["GetObject"] == 2 and len(sleeps) == 2


def test_a_stream_refused_outright_is_not_resumed():
    client = ScriptedClient(get_object=[client_error("AccessDenied", 403)])
    store, sleeps = store_with(client)
    with pytest.raises(AccessDeniedError):
        list(store.objects.stream_object("b", "k", start=0, end=8))
    assert len(client.calls) == 1 and sleeps == []


def test_a_stream_closed_by_its_reader_closes_the_body_without_a_retry():
    body = BrokenBody(b"abcdefgh")
    client = ScriptedClient(get_object=[{"Body": body}])
    store, sleeps = store_with(client)
    stream = store.objects.stream_object("b", "k", start=0, end=8, chunk_size=4)
    assert next(stream) == b"abcd"
    stream.close()
    assert body.closed and sleeps == [] and len(client.calls) == 1
    assert "failures" not in store.counters.snapshot() or not store.counters.snapshot()["failures"]
