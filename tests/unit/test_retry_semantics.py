"""Retry semantics declared per store method (``retry.Retry``), the ambiguity of failures, Create windows and
the one "already complete?" rule, against a scripted botocore client (no S3)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

from s3commit.errors import (
    EndpointUnreachableError,
    PreconditionFailedError,
    ThrottledError,
    TransientError,
)
from s3commit.model.object_info import CreateWindow, ObjectInfo, is_completed_upload, multipart_etag
from s3commit.store.retry import Retry, is_ambiguous
from tests.unit.test_store import ScriptedClient, client_error, store_with

PART_ETAGS = ['"0cc175b9c0f1b6a831c399e269772661"', '"92eb5ffee6ae2fec3ad71c777531578f"']
DATE = "Tue, 03 Mar 2026 10:00:00 GMT"
ANSWERED = datetime(2026, 3, 3, 10, 0, 0, tzinfo=timezone.utc)


def created(upload_id="u2"):
    return {"UploadId": upload_id, "ResponseMetadata": {"HTTPHeaders": {"date": DATE}}}


# --- which failures may have taken effect ------------------------------------------------------------


@pytest.mark.parametrize(("error", "ambiguous"), [
    (TransientError("x", code="InternalError"), True),
    (TransientError("x", code="ReadTimeoutError"), True),
    (TransientError("x", code="ConnectionClosedError"), True),
    (TransientError("x", code="504"), True),
    (TransientError("x", code="ServiceUnavailable"), False),
    (TransientError("x", code="RequestTimeout"), False),
    (ThrottledError("x", code="SlowDown"), False),
    (EndpointUnreachableError("x", code="EndpointConnectionError"), False),
    (PreconditionFailedError("x", code="PreconditionFailed"), False),
])
def test_a_failure_is_ambiguous_only_if_the_request_may_have_taken_effect(error, ambiguous):
    assert is_ambiguous(error) is ambiguous


def test_each_semantics_says_when_it_may_be_retried():
    lost = TransientError("x", code="InternalError")
    refused = ThrottledError("x", code="SlowDown")
    final = PreconditionFailedError("x", code="PreconditionFailed")
    assert Retry.IDEMPOTENT.may_retry(lost) and Retry.VERIFIED.may_retry(lost)
    assert Retry.RECORDED.may_retry(refused) and not Retry.RECORDED.may_retry(lost)
    assert Retry.RECORDED.may_retry(lost, recorded=True)
    assert not any(r.may_retry(final, recorded=True) for r in Retry)


# --- RECORDED: CreateMultipartUpload --------------------------------------------------------------------


def test_create_is_retried_after_throttling_and_refused_connections_without_a_record():
    client = ScriptedClient(create_multipart_upload=[
        client_error("SlowDown", 503), EndpointConnectionError(endpoint_url="http://x"), created("u1")])
    store, sleeps = store_with(client)
    windows = []
    assert store.uploads.create_multipart_upload("b", "k", on_possible_orphan=windows.append) == "u1"
    assert len(sleeps) == 2 and windows == []  # neither attempt can have started an upload


def test_create_is_not_retried_after_a_lost_answer_when_nobody_records_it():
    client = ScriptedClient(create_multipart_upload=[client_error("InternalError", 500), created()])
    store, sleeps = store_with(client)
    with pytest.raises(TransientError, match="CreateMultipartUpload failed for s3://b/k"):
        store.uploads.create_multipart_upload("b", "k")
    assert sleeps == [] and len(client.calls) == 1


@pytest.mark.parametrize("lost", [client_error("InternalError", 500), ReadTimeoutError(endpoint_url="http://x"),
                                  ConnectionClosedError(endpoint_url="http://x")], ids=["500", "timeout", "reset"])
def test_create_retried_after_a_lost_answer_reports_the_window_of_its_orphan(lost):
    client = ScriptedClient(create_multipart_upload=[lost, created("u2")])
    store, _ = store_with(client)
    windows: list[CreateWindow] = []
    assert store.uploads.create_multipart_upload("b", "k", on_possible_orphan=windows.append) == "u2"
    [window] = windows
    # S3's clock: the answer's Date; the orphan was initiated before it, after the first attempt went out.
    assert window.contains(ANSWERED - timedelta(milliseconds=500)) and window.contains(ANSWERED)
    assert not window.contains(ANSWERED - timedelta(seconds=5)) and not window.contains(None)


def test_create_windows_survive_their_text_form_and_foreign_values_are_ignored():
    window = CreateWindow.around(ANSWERED, 0.25)
    assert CreateWindow.decode(window.encode()) == window
    assert [CreateWindow.decode(v) for v in (None, "", "x,y", "5", 12, "9,3")] == [None] * 6


# --- VERIFIED: conditional PUT and Complete -------------------------------------------------------------


def test_conditional_put_refused_with_no_ambiguous_attempt_is_someone_elses_without_reading_back():
    client = ScriptedClient(put_object=[client_error("SlowDown", 503), client_error("PreconditionFailed", 412)])
    store, _ = store_with(client)
    with pytest.raises(PreconditionFailedError):
        store.objects.put_object("b", "k", b"mine", if_none_match=True)
    assert [name for name, _ in client.calls] == ["put_object", "put_object"]  # no GetObject


def test_conditional_put_refused_after_a_lost_answer_is_read_back_and_ours_when_the_bytes_match():
    class Body:
        def read(self):
            return b"mine"

    client = ScriptedClient(put_object=[client_error("InternalError", 500), client_error("PreconditionFailed", 412)],
                            get_object=[{"Body": Body(), "ETag": '"e"'}])
    store, _ = store_with(client)
    assert store.objects.put_object("b", "k", b"mine", if_none_match=True) == '"e"'  # the GET that read it back says
    assert [name for name, _ in client.calls] == ["put_object", "put_object", "get_object"]


def test_conditional_complete_refused_at_once_is_not_read_back():
    client = ScriptedClient(complete_multipart_upload=[client_error("PreconditionFailed", 412)])
    store, _ = store_with(client)
    with pytest.raises(PreconditionFailedError):
        store.uploads.complete_multipart_upload("b", "k", "u", PART_ETAGS, if_none_match=True)
    assert [name for name, _ in client.calls] == ["complete_multipart_upload"]


def test_conditional_complete_refused_after_a_lost_answer_is_ours_if_the_object_is_this_upload():
    client = ScriptedClient(
        complete_multipart_upload=[ReadTimeoutError(endpoint_url="http://x"), client_error("PreconditionFailed", 412)],
        head_object=[{"ContentLength": 2, "ETag": multipart_etag(PART_ETAGS)}])
    store, _ = store_with(client)
    completed = store.uploads.complete_multipart_upload("b", "k", "u", PART_ETAGS, if_none_match=True)
    assert completed == multipart_etag(PART_ETAGS)


def test_a_request_declared_verified_cannot_be_made_without_counting_its_attempts():
    store, _ = store_with(ScriptedClient())
    with pytest.raises(TypeError, match="needs an Attempts record"):
        store.requests.call("PutObject", lambda: None, retry=Retry.VERIFIED, bucket="b")


# --- the one "already complete?" rule -------------------------------------------------------------------


NOW = datetime(2026, 3, 3, 10, 0, tzinfo=timezone.utc)
CREATED = int((NOW - timedelta(hours=1)).timestamp() * 1000)


def test_a_predictable_multipart_etag_decides_alone():
    ours = ObjectInfo("k", 999, multipart_etag(PART_ETAGS), NOW - timedelta(days=9))
    other = ObjectInfo("k", 2, '"feedface-2"', NOW)
    assert is_completed_upload(ours, PART_ETAGS, length=2, created_ms=CREATED)
    assert not is_completed_upload(other, PART_ETAGS, length=2, created_ms=CREATED)


def test_an_unpredictable_etag_falls_back_to_the_length_of_an_object_not_older_than_the_upload():
    kms = ['"kms-part-1"', '"kms-part-2"']
    assert is_completed_upload(ObjectInfo("k", 10, '"x-2"', NOW), kms, length=10, created_ms=CREATED)
    assert not is_completed_upload(ObjectInfo("k", 11, '"x-2"', NOW), kms, length=10, created_ms=CREATED)
    # An older object of the same length (the previous version of the file) is not ours.
    old = ObjectInfo("k", 10, '"x-2"', NOW - timedelta(days=2))
    assert not is_completed_upload(old, kms, length=10, created_ms=CREATED)
    assert is_completed_upload(old, kms, length=10)  # the upload's age unknown: the length decides
    assert not is_completed_upload(ObjectInfo("k", 10, '"x-2"', NOW), kms)  # neither ETag nor length


def test_a_store_whose_objects_carry_another_etag_is_judged_by_length_and_date_even_with_md5_parts():
    # rclone's `serve s3`: part ETags are MD5s, the completed object's is the MD5 of its bytes (multipart-etag: no).
    whole = ObjectInfo("k", 10, '"d28e3829a0d0936fa451c3e19c3be7c2"', NOW)
    assert not is_completed_upload(whole, PART_ETAGS, length=10, created_ms=CREATED)  # (as on S3: not ours)
    assert is_completed_upload(whole, PART_ETAGS, length=10, created_ms=CREATED, multipart_etags=False)
    assert not is_completed_upload(whole, PART_ETAGS, length=11, created_ms=CREATED, multipart_etags=False)
    older = ObjectInfo("k", 10, '"d28e3829a0d0936fa451c3e19c3be7c2"', NOW - timedelta(days=2))
    assert not is_completed_upload(older, PART_ETAGS, length=10, created_ms=CREATED, multipart_etags=False)
