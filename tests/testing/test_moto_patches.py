"""The test server's changes to moto change what requests cost, never what they answer: ranged GETs read
their range only, a Complete copies each part once, and a host's service is looked up once. Checked through the
server (which applies them), or in a process of its own."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
from botocore.exceptions import ClientError

from tests.conftest import racing_conditional_puts

MIB = 1024 * 1024


def test_ranged_gets_answer_exactly_what_s3_answers(s3_client, s3_bucket):
    data = os.urandom(3 * MIB + 5)
    s3_client.put_object(Bucket=s3_bucket, Key="r", Body=data)

    def get(header):
        return s3_client.get_object(Bucket=s3_bucket, Key="r", Range=header)

    assert get("bytes=0-9")["Body"].read() == data[:10]
    answer = get(f"bytes={MIB}-{2 * MIB + 3}")
    assert answer["Body"].read() == data[MIB:2 * MIB + 4]
    assert answer["ContentRange"] == f"bytes {MIB}-{2 * MIB + 3}/{len(data)}"
    assert get(f"bytes={len(data) - 7}-")["Body"].read() == data[-7:]
    assert get("bytes=-5")["Body"].read() == data[-5:]
    assert get(f"bytes=10-{len(data) + 100}")["Body"].read() == data[10:]  # clipped at the end
    with pytest.raises(ClientError) as caught:
        get(f"bytes={len(data)}-{len(data) + 5}")
    assert caught.value.response["Error"]["Code"] == "InvalidRange"
    assert s3_client.get_object(Bucket=s3_bucket, Key="r")["Body"].read() == data  # no range: the whole


def test_a_completed_upload_holds_its_parts_in_order_with_s3s_etag(s3_client, s3_bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(123)]
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="m")["UploadId"]
    etags = [s3_client.upload_part(Bucket=s3_bucket, Key="m", UploadId=upload, PartNumber=n + 1,
                                   Body=p)["ETag"] for n, p in enumerate(parts)]
    done = s3_client.complete_multipart_upload(Bucket=s3_bucket, Key="m", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    expected = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts), usedforsecurity=False).hexdigest()
    assert done["ETag"] == f'"{expected}-3"'
    assert s3_client.get_object(Bucket=s3_bucket, Key="m")["Body"].read() == b"".join(parts)
    assert s3_client.head_object(Bucket=s3_bucket, Key="m")["ContentLength"] == 10 * MIB + 123


def test_a_complete_still_refuses_a_wrong_etag_and_a_small_inner_part(s3_client, s3_bucket):
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="bad")["UploadId"]
    small = s3_client.upload_part(Bucket=s3_bucket, Key="bad", UploadId=upload, PartNumber=1, Body=b"x")["ETag"]
    last = s3_client.upload_part(Bucket=s3_bucket, Key="bad", UploadId=upload, PartNumber=2, Body=b"y")["ETag"]
    for parts, code in (([{"PartNumber": 1, "ETag": '"0123"'}], "InvalidPart"),
                        ([{"PartNumber": 1, "ETag": small}, {"PartNumber": 2, "ETag": last}], "EntityTooSmall")):
        with pytest.raises(ClientError) as caught:
            s3_client.complete_multipart_upload(Bucket=s3_bucket, Key="bad", UploadId=upload,
                                                MultipartUpload={"Parts": parts})
        assert caught.value.response["Error"]["Code"] == code
    s3_client.abort_multipart_upload(Bucket=s3_bucket, Key="bad", UploadId=upload)


def test_a_completed_object_can_be_copied_overwritten_and_deleted(s3_client, s3_bucket):
    parts = [os.urandom(5 * MIB), os.urandom(77)]
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="c")["UploadId"]
    etags = [s3_client.upload_part(Bucket=s3_bucket, Key="c", UploadId=upload, PartNumber=n + 1,
                                   Body=p)["ETag"] for n, p in enumerate(parts)]
    s3_client.complete_multipart_upload(Bucket=s3_bucket, Key="c", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    s3_client.copy_object(Bucket=s3_bucket, Key="copy", CopySource={"Bucket": s3_bucket, "Key": "c"})
    assert s3_client.get_object(Bucket=s3_bucket, Key="copy")["Body"].read() == b"".join(parts)
    s3_client.put_object(Bucket=s3_bucket, Key="c", Body=b"new")
    assert s3_client.get_object(Bucket=s3_bucket, Key="c")["Body"].read() == b"new"
    assert s3_client.get_object(Bucket=s3_bucket, Key="copy")["Body"].read() == b"".join(parts)
    s3_client.delete_object(Bucket=s3_bucket, Key="copy")
    assert "Contents" not in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="copy")


def test_a_composite_checksum_is_built_from_the_digests_of_the_bytes_each_part_received(s3_client, s3_bucket):
    import base64
    import zlib

    parts = [os.urandom(5 * MIB), os.urandom(2 * MIB)]
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="c", ChecksumAlgorithm="CRC32")["UploadId"]

    def send(number, body):
        crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
        answer = s3_client.upload_part(Bucket=s3_bucket, Key="c", UploadId=upload, PartNumber=number, Body=body,
                                       ChecksumCRC32=crc)
        return {"PartNumber": number, "ETag": answer["ETag"], "ChecksumCRC32": crc}

    send(1, os.urandom(5 * MIB))  # replaced by the next upload of part 1: its digest must not count
    sent = [send(n + 1, p) for n, p in enumerate(parts)]
    s3_client.complete_multipart_upload(Bucket=s3_bucket, Key="c", UploadId=upload, MultipartUpload={"Parts": sent})
    digests = b"".join(zlib.crc32(p).to_bytes(4, "big") for p in parts)
    composite = base64.b64encode(zlib.crc32(digests).to_bytes(4, "big")).decode()
    head = s3_client.head_object(Bucket=s3_bucket, Key="c", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"].split("-")[0] == composite
    assert s3_client.get_object(Bucket=s3_bucket, Key="c")["Body"].read() == b"".join(parts)


def test_racing_conditional_puts_of_one_new_key_have_exactly_one_winner(s3_server, s3_bucket):
    client = s3_server.client(max_pool_connections=8)
    for round_ in range(10):
        wins = racing_conditional_puts(client, s3_bucket, f"race-{round_}")
        assert len(wins) == 1, (round_, wins)
        assert client.get_object(Bucket=s3_bucket, Key=f"race-{round_}")["Body"].read() == f"racer {wins[0]}".encode()


def test_crc32c_is_crc32c_not_motos_crc32_fallback(s3_client, s3_bucket):
    pytest.importorskip("awscrt", reason="the crt extra (in .[all]) computes CRC32C")
    from s3commit.model import checksums

    parts = [os.urandom(5 * MIB), os.urandom(MIB)]
    upload = s3_client.create_multipart_upload(Bucket=s3_bucket, Key="c32c", ChecksumAlgorithm="CRC32C")["UploadId"]
    sent = []
    for number, body in enumerate(parts, start=1):
        value = checksums.checksum("CRC32C", body)
        answer = s3_client.upload_part(Bucket=s3_bucket, Key="c32c", UploadId=upload, PartNumber=number, Body=body,
                                       ChecksumCRC32C=value)
        sent.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumCRC32C": value})
    s3_client.complete_multipart_upload(Bucket=s3_bucket, Key="c32c", UploadId=upload,
                                        MultipartUpload={"Parts": sent})
    head = s3_client.head_object(Bucket=s3_bucket, Key="c32c", ChecksumMode="ENABLED")
    expected = checksums.composite("CRC32C", [part["ChecksumCRC32C"] for part in sent])
    assert checksums.composite_matches(str(expected), head["ChecksumCRC32C"]) is True
    assert expected != checksums.composite("CRC32", [checksums.checksum("CRC32", p) for p in parts])


def test_moto_maps_each_host_to_the_service_it_mapped_it_to_before_and_lists_its_package_once():
    # Given: moto's dispatcher, in a process of its own (the patch is process-wide), asked about hosts of S3 and of
    # other services before and after dispatch_hosts_once.
    script = textwrap.dedent("""
        import json
        from unittest import mock
        from moto import backends
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication
        from s3commit.testing._sim.moto_patches import dispatch_hosts_once

        hosts = [None, "moto_api", "s3", "127.0.0.1:5000", "s3.us-east-1.amazonaws.com", "bkt.s3.amazonaws.com",
                 "bkt.s3.eu-west-1.amazonaws.com", "sqs.us-east-1.amazonaws.com", "localhost"]
        app = DomainDispatcherApplication(lambda service: None)
        before = [app.get_backend_for_host(host) for host in hosts]
        dispatch_hosts_once()
        dispatch_hosts_once()  # idempotent
        first = [app.get_backend_for_host(host) for host in hosts]
        with mock.patch.object(backends, "list_of_moto_modules", side_effect=AssertionError("listed again")):
            again = [app.get_backend_for_host(host) for host in hosts]
        print(json.dumps([before, first, again]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    before, first, again = json.loads(done.stdout.strip().splitlines()[-1])
    # Then: every host maps as unpatched moto maps it (S3's to s3), and the second time without listing moto.
    assert first == before and again == before
    assert before == [None, "moto_api", "s3", None, "s3", "s3", "s3", "sqs", None]


def test_moto_lists_and_iterates_a_bucket_as_before_with_its_keys_iterated_lightly():
    # Given: a moto bucket with versions, delete markers, a delimiter's folders and keys outside the prefix, listed
    # in a process of its own (the patch is process-wide) before and after iterate_keys_lightly.
    script = textwrap.dedent("""
        import json
        import boto3
        from moto import mock_aws
        from s3commit.testing._sim.moto_patches import iterate_keys_lightly

        def listings(s3, bucket):
            out = []
            for args in ({}, {"Prefix": "a/"}, {"Prefix": "a/", "Delimiter": "/"}, {"Prefix": "a/b", "MaxKeys": 2},
                         {"Prefix": "zz"}, {"Delimiter": "/"}):
                page = s3.list_objects_v2(Bucket=bucket, **args)
                out.append([[o["Key"], o["Size"], o["ETag"]] for o in page.get("Contents", [])]
                           + [p["Prefix"] for p in page.get("CommonPrefixes", [])] + [page["IsTruncated"]])
            versions = s3.list_object_versions(Bucket=bucket)
            out.append(sorted([v["Key"], v["IsLatest"], v["Size"]] for v in versions.get("Versions", [])))
            out.append(sorted(m["Key"] for m in versions.get("DeleteMarkers", [])))
            return out

        with mock_aws():
            s3 = boto3.client("s3", region_name="us-east-1")
            for bucket, versioned in (("plain-bkt", False), ("versioned-bkt", True)):
                s3.create_bucket(Bucket=bucket)
                if versioned:
                    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
                for key in ("a/b1", "a/b2", "a/b3", "a/c/d", "a/c/e", "b/x", "top"):
                    s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
                s3.put_object(Bucket=bucket, Key="a/b2", Body=b"second version, longer")
                s3.delete_object(Bucket=bucket, Key="a/b3")
            before = [listings(s3, b) for b in ("plain-bkt", "versioned-bkt")]
            iterate_keys_lightly()
            iterate_keys_lightly()  # idempotent
            after = [listings(s3, b) for b in ("plain-bkt", "versioned-bkt")]
        print(json.dumps([before, after]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    # Then: every listing is the one unpatched moto gave
    assert after == before
    plain = before[0]
    assert [entry[0] for entry in plain[1][:-1]] == ["a/b1", "a/b2", "a/c/d", "a/c/e"]  # a/b3 deleted
    assert [entry[0] for entry in plain[2][:2]] == ["a/b1", "a/b2"] and plain[2][2:] == ["a/c/", False]  # a folder
