"""CompleteMultipartUpload through s3commit's lean path (``s3commit.store.lean-requests``) over a real socket, on the
moto server: the object and ETag botocore's Complete gives, each checksum algorithm's part checksums sent and
accepted, a repeated Complete resolved by the read-back, If-None-Match's 412, and botocore's Complete inside moto's
in-process mock."""

from __future__ import annotations

import dataclasses

import pytest

from s3commit import S3Store
from s3commit.errors import PreconditionFailedError
from tests.conftest import store_options_for

MIB = 1024 * 1024


def lean_store(server, **options) -> S3Store:
    store = S3Store(dataclasses.replace(store_options_for(server), lean_requests=True, **options))

    def refuse(**_):
        raise AssertionError("a Complete went through botocore's complete_multipart_upload")

    store.requests.client.complete_multipart_upload = refuse  # the lean path must send it
    return store


def upload(store, bucket, key, sizes=(5 * MIB, 1000)):
    upload_id = store.uploads.create_multipart_upload(bucket, key)
    sent = [store.uploads.upload_part(bucket, key, upload_id, n, bytes([n]) * size)
            for n, size in enumerate(sizes, start=1)]
    return upload_id, sent


def complete(store, bucket, key, upload_id, sent, **kwargs):
    return store.uploads.complete_multipart_upload(
        bucket, key, upload_id, [p.etag for p in sent], checksum_algorithm=store.uploads.checksum_algorithm(bucket),
        part_checksums=[p.checksum for p in sent], **kwargs)


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA256", "none"])
def test_lean_completes_as_botocore_does(s3_server, s3_bucket, algorithm):
    lean = lean_store(s3_server, checksum_algorithm=algorithm)
    plain = S3Store(dataclasses.replace(store_options_for(s3_server), checksum_algorithm=algorithm))
    etags = []
    for store, key in ((plain, "plain/part-0.bin"), (lean, "lean/part-0.bin")):
        upload_id, sent = upload(store, s3_bucket, key)
        etags.append(complete(store, s3_bucket, key, upload_id, sent))
        assert store.counters.snapshot()["requests"]["CompleteMultipartUpload"] == 1
    assert etags[0] == etags[1] and etags[1].endswith('-2"')
    data = [lean.objects.read_object(s3_bucket, key)[0] for key in ("plain/part-0.bin", "lean/part-0.bin")]
    assert data[0] == data[1] == bytes([1]) * 5 * MIB + bytes([2]) * 1000


def test_a_repeated_complete_and_if_none_match(s3_server, s3_bucket):
    store = lean_store(s3_server)
    key = "out/file.bin"
    upload_id, sent = upload(store, s3_bucket, key)
    first = complete(store, s3_bucket, key, upload_id, sent, if_none_match=True)
    assert complete(store, s3_bucket, key, upload_id, sent, if_none_match=True) == first  # NoSuchUpload: ours
    other, parts = upload(store, s3_bucket, key, sizes=(100,))
    with pytest.raises(PreconditionFailedError):
        complete(store, s3_bucket, key, other, parts, if_none_match=True)


def test_inside_mock_aws_botocore_sends_it():
    moto = pytest.importorskip("moto")
    import boto3

    from s3commit import StoreOptions

    with moto.mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bkt")
        store = S3Store(StoreOptions(region="us-east-1", lean_requests=True))
        upload_id, sent = upload(store, "bkt", "k", sizes=(10,))
        assert not store.uploads.lean.usable(store.requests.client, "bkt")
        assert complete(store, "bkt", "k", upload_id, sent).endswith('-1"')


def test_a_job_commit_through_lean_completes(s3_server, s3_bucket):
    from s3commit import create_committer

    store = lean_store(s3_server)
    committer = create_committer("magic", f"s3://{s3_bucket}/table", job_id="lean-job", store=store)
    committer.setup_job()
    messages = []
    for task in range(3):
        attempt = committer.setup_task(f"attempt_20261128_0000_m_{task:06d}_0")
        for n in range(4):
            with attempt.open(f"year={n}/part-{task:05d}.bin") as f:
                f.write(bytes([task, n]) * 1000)
        messages.append(committer.commit_task(attempt))
    committer.commit_job(messages)
    assert store.counters.snapshot()["requests"]["CompleteMultipartUpload"] == 12
    assert store.objects.read_object(s3_bucket, "table/year=2/part-00001.bin")[0] == bytes([1, 2]) * 1000

