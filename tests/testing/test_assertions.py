"""Listing and cost assertions: list_keys, assert_no_pending_uploads, count_requests."""

from __future__ import annotations

from typing import Any

import pytest

from s3commit.errors import short_upload_id
from s3commit.testing import S3Operation
from s3commit.testing.assertions import (
    assert_no_pending_uploads,
    count_requests,
    list_keys,
    list_pending_uploads,
)


def test_list_keys_follows_every_page_and_sorts(s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any) -> None:
    for key in ("b/2", "a/1", "b/1", "c", "a/2"):
        raw_client.put_object(Bucket=s3_bucket, Key=key, Body=b"")
    with count_requests(s3_sim) as counter:
        keys = list_keys(sim_client, s3_bucket, page_size=2)
        under_b = list_keys(sim_client, s3_bucket, "b/")
    assert keys == ["a/1", "a/2", "b/1", "b/2", "c"]
    assert under_b == ["b/1", "b/2"]
    assert counter.delta == {"ListObjectsV2": 3 + 1}  # three pages of two, then one page


def test_assert_no_pending_uploads_names_each_leftover_upload(s3_bucket: str, raw_client: Any, s3_client: Any) -> None:
    # Given: nothing pending, then two uploads under out/ and one elsewhere.
    assert_no_pending_uploads(s3_client, s3_bucket)
    ids = [raw_client.create_multipart_upload(Bucket=s3_bucket, Key=k)["UploadId"] for k in ("out/a", "out/b")]
    raw_client.create_multipart_upload(Bucket=s3_bucket, Key="elsewhere/c")

    # Then: the failure lists every pending key with its short upload id, within the prefix only.
    with pytest.raises(AssertionError) as failure:
        assert_no_pending_uploads(s3_client, s3_bucket, prefix="out/")
    message = str(failure.value)
    assert f"2 pending multipart upload(s) under s3://{s3_bucket}/out/" in message
    assert f"out/a (upload {short_upload_id(ids[0])})" in message
    assert f"out/b (upload {short_upload_id(ids[1])})" in message
    assert "elsewhere" not in message
    assert [u.key for u in list_pending_uploads(s3_client, s3_bucket)] == ["elsewhere/c", "out/a", "out/b"]

    # When: they are aborted, the assertion passes.
    for upload in list_pending_uploads(s3_client, s3_bucket):
        raw_client.abort_multipart_upload(Bucket=s3_bucket, Key=upload.key, UploadId=upload.upload_id)
    assert_no_pending_uploads(s3_client, s3_bucket)


def test_request_counter_reports_the_delta_of_its_block_only(s3_sim: Any, s3_bucket: str, sim_client: Any) -> None:
    sim_client.put_object(Bucket=s3_bucket, Key="before", Body=b"x")  # not counted: before the block
    with count_requests(s3_sim) as counter:
        sim_client.put_object(Bucket=s3_bucket, Key="k", Body=b"12345")
        sim_client.get_object(Bucket=s3_bucket, Key="k")["Body"].read()
        assert counter.total == 2  # readable live inside the block
    sim_client.head_object(Bucket=s3_bucket, Key="k")  # not counted: after the block

    assert counter.delta == {"GetObject": 1, "PutObject": 1}
    assert counter[S3Operation.PUT_OBJECT] == counter["PutObject"] == 1
    assert counter["DeleteObject"] == 0
    assert counter.stats.bytes_in == {"PutObject": 5}
    with pytest.raises(RuntimeError, match="context manager"):
        _ = count_requests(s3_sim).delta
