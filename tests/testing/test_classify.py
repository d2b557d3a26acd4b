"""Request classification: raw HTTP requests (no server), then every operation as boto3 sends it."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

from s3commit.testing._sim.classify import RequestTarget, S3Operation, classify_request, split_bucket_and_key
from s3commit.testing.assertions import count_requests

COPY = {"x-amz-copy-source": "/src/key"}

RAW_REQUESTS = [
    # (method, path, query, headers, expected operation)
    ("POST", "/b/k", "uploads", {}, "CreateMultipartUpload"),
    ("PUT", "/b/k", "partNumber=3&uploadId=U", {}, "UploadPart"),
    ("PUT", "/b/k", "partNumber=3&uploadId=U", COPY, "UploadPartCopy"),
    ("POST", "/b/k", "uploadId=U", {}, "CompleteMultipartUpload"),
    ("DELETE", "/b/k", "uploadId=U", {}, "AbortMultipartUpload"),
    ("GET", "/b", "uploads", {}, "ListMultipartUploads"),
    ("GET", "/b", "uploads&prefix=p%2F&key-marker=a&upload-id-marker=u&max-uploads=10", {}, "ListMultipartUploads"),
    ("GET", "/b/k", "uploadId=U", {}, "ListParts"),
    ("GET", "/b/k", "uploadId=U&max-parts=5&part-number-marker=2", {}, "ListParts"),
    ("PUT", "/b/k", "", {}, "PutObject"),
    ("PUT", "/b/k", "x-id=PutObject", {}, "PutObject"),
    ("PUT", "/b/k", "", COPY, "CopyObject"),
    ("GET", "/b/dir/k", "", {}, "GetObject"),
    ("GET", "/b/k", "versionId=v1&partNumber=1&response-content-type=text%2Fplain", {}, "GetObject"),
    ("GET", "/b/k", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2F2026&X-Amz-Date=20260101T000000Z"
     "&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Security-Token=t&X-Amz-Signature=ab", {}, "GetObject"),
    ("HEAD", "/b/k", "", {}, "HeadObject"),
    ("DELETE", "/b/k", "", {}, "DeleteObject"),
    ("POST", "/b", "delete", {}, "DeleteObjects"),
    ("GET", "/b", "list-type=2&prefix=a%2F&delimiter=%2F&continuation-token=t", {}, "ListObjectsV2"),
    ("GET", "/b", "prefix=a&marker=m&max-keys=5", {}, "ListObjects"),
    ("GET", "/", "", {}, "ListBuckets"),
    ("HEAD", "/b", "", {}, "HeadBucket"),
    ("PUT", "/b", "", {}, "CreateBucket"),
    ("DELETE", "/b", "", {}, "DeleteBucket"),
    # Sub-resources the committers never use are "other", not mistaken for the object or bucket call.
    ("PUT", "/b/k", "tagging", {}, "other"),
    ("GET", "/b/k", "acl", {}, "other"),
    ("GET", "/b", "location", {}, "other"),
    ("PUT", "/b", "versioning", {}, "other"),
    ("POST", "/b/k", "", {}, "other"),
    ("PATCH", "/b/k", "", {}, "other"),
]


@pytest.mark.parametrize(("method", "path", "query", "headers", "expected"), RAW_REQUESTS)
def test_classify_request_names_the_boto3_operation(
    method: str, path: str, query: str, headers: dict[str, str], expected: str
) -> None:
    target = classify_request(method, path, query, headers)
    assert target.operation.value == expected


def test_classify_request_decodes_bucket_and_key_path_style() -> None:
    target = classify_request("PUT", "/my-bucket/year%3D2026/part%20one.parquet", "", {"Host": "127.0.0.1:9"})
    assert target == RequestTarget(
        operation=S3Operation.PUT_OBJECT, bucket="my-bucket", key="year=2026/part one.parquet"
    )


@pytest.mark.parametrize(
    ("host", "path", "bucket", "key"),
    [
        ("data.s3.us-east-1.amazonaws.com", "/a/b", "data", "a/b"),
        ("data.s3.amazonaws.com", "/a", "data", "a"),
        ("my.dotted.bucket.s3-eu-west-1.amazonaws.com", "/k", "my.dotted.bucket", "k"),
        ("data.localhost:4566", "/k", "data", "k"),
        ("127.0.0.1:4566", "/data/k", "data", "k"),
        ("[::1]:4566", "/data/k", "data", "k"),
        ("s3.us-east-1.amazonaws.com", "/data/k", "data", "k"),
        ("localhost:4566", "/data/k", "data", "k"),
    ],
)
def test_virtual_hosted_style_takes_the_bucket_from_the_host(host: str, path: str, bucket: str, key: str) -> None:
    assert split_bucket_and_key(path, host) == (bucket, key)


def test_virtual_hosted_bucket_level_request_is_a_bucket_operation() -> None:
    target = classify_request("GET", "/", "list-type=2", {"host": "data.s3.amazonaws.com"})
    assert (target.operation, target.bucket, target.key) == (S3Operation.LIST_OBJECTS_V2, "data", "")


def test_operation_parse_lists_valid_values_for_unknown_names() -> None:
    assert S3Operation.parse("UploadPart") is S3Operation.UPLOAD_PART
    with pytest.raises(ValueError, match="valid values are CreateMultipartUpload, UploadPart"):
        S3Operation.parse("Upload")


# -- every operation as boto3 1.43 actually sends it, counted by the running simulator -------------


def _boto3_calls(bucket: str, raw: Any) -> dict[str, Callable[[Any], object]]:
    """One call per operation; state each call needs is prepared straight on moto (``raw``)."""
    raw.put_object(Bucket=bucket, Key="src", Body=b"source bytes")
    upload_id = raw.create_multipart_upload(Bucket=bucket, Key="mpu")["UploadId"]
    etag = raw.upload_part(Bucket=bucket, Key="mpu", UploadId=upload_id, PartNumber=1, Body=b"x")["ETag"]
    doomed = raw.create_multipart_upload(Bucket=bucket, Key="doomed")["UploadId"]
    copy_target = raw.create_multipart_upload(Bucket=bucket, Key="copied")["UploadId"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    return {
        "CreateBucket": lambda s3: s3.create_bucket(Bucket=bucket + "-new"),
        "HeadBucket": lambda s3: s3.head_bucket(Bucket=bucket),
        "ListBuckets": lambda s3: s3.list_buckets(),
        "PutObject": lambda s3: s3.put_object(Bucket=bucket, Key="a/b", Body=io.BytesIO(b"data")),
        "GetObject": lambda s3: s3.get_object(Bucket=bucket, Key="src")["Body"].read(),
        "HeadObject": lambda s3: s3.head_object(Bucket=bucket, Key="src"),
        "CopyObject": lambda s3: s3.copy_object(Bucket=bucket, Key="dst", CopySource=f"{bucket}/src"),
        "ListObjectsV2": lambda s3: s3.list_objects_v2(Bucket=bucket, Prefix="a/"),
        "ListObjects": lambda s3: s3.list_objects(Bucket=bucket),
        "CreateMultipartUpload": lambda s3: s3.create_multipart_upload(Bucket=bucket, Key="new-mpu"),
        "UploadPart": lambda s3: s3.upload_part(Bucket=bucket, Key="mpu", UploadId=upload_id, PartNumber=2,
                                                Body=b"y"),
        "UploadPartCopy": lambda s3: s3.upload_part_copy(Bucket=bucket, Key="copied", UploadId=copy_target,
                                                         PartNumber=1, CopySource=f"{bucket}/src"),
        "ListParts": lambda s3: s3.list_parts(Bucket=bucket, Key="mpu", UploadId=upload_id),
        "ListMultipartUploads": lambda s3: s3.list_multipart_uploads(Bucket=bucket),
        "CompleteMultipartUpload": lambda s3: s3.complete_multipart_upload(
            Bucket=bucket, Key="mpu", UploadId=upload_id, MultipartUpload=parts),
        "AbortMultipartUpload": lambda s3: s3.abort_multipart_upload(Bucket=bucket, Key="doomed", UploadId=doomed),
        "DeleteObject": lambda s3: s3.delete_object(Bucket=bucket, Key="src"),
        "DeleteObjects": lambda s3: s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a/b"}]}),
        "DeleteBucket": lambda s3: s3.delete_bucket(Bucket=bucket + "-new"),
        "other": lambda s3: s3.get_bucket_location(Bucket=bucket),
    }  # fmt: skip


def test_every_operation_boto3_sends_is_counted_under_its_name(
    s3_sim: Any, s3_bucket: str, raw_client: Any, sim_client: Any
) -> None:
    # Given: state for each call, prepared on moto directly so that only the calls below are counted.
    calls = _boto3_calls(s3_bucket, raw_client)
    assert set(calls) == {op.value for op in S3Operation}  # the test covers every operation we name

    # When / Then: each call, in an order where each one's state exists, counts exactly one request.
    for name, call in calls.items():
        with count_requests(s3_sim) as counter:
            call(sim_client)
        assert counter.delta == {name: 1}, name
