"""Many Completes from one event loop (``UploadRequests.complete_many``, ``s3commit.store.lean-requests``) on each
test server's own sockets, moto (through the simulator), SeaweedFS and rclone: every object as a single Complete makes
it, each with its part checksums, and, where the store honours ``If-None-Match`` on a Complete, a key that appeared
refused and not replaced."""

from __future__ import annotations

import dataclasses

import pytest

from s3commit import S3Store
from s3commit.errors import NotFoundError, PreconditionFailedError
from s3commit.store.uploads import CompleteCall
from testbed.fixtures import ALL_SERVERS, every_server_fixture
from tests.conftest import store_options_for

s3_server = every_server_fixture(ALL_SERVERS)
MIB = 1024 * 1024


@pytest.mark.parametrize("algorithm", ["CRC32", "none"])
def test_many_completes_from_one_loop_on_the_servers_sockets(s3_server, s3_bucket, algorithm):
    store = S3Store(dataclasses.replace(store_options_for(s3_server), lean_requests=True,
                                       checksum_algorithm=algorithm))
    assert store.uploads.can_complete_many(s3_bucket)
    store.requests.client.complete_multipart_upload = None  # none may go through botocore's call
    calls = []
    for n in range(6):
        key = f"many-{algorithm}/day={n % 2}/part-{n} +.bin"
        upload_id = store.uploads.create_multipart_upload(s3_bucket, key)
        sent = [store.uploads.upload_part(s3_bucket, key, upload_id, 1, bytes([1]) * 5 * MIB),
                store.uploads.upload_part(s3_bucket, key, upload_id, 2, bytes([2]) * (10 + n))]
        calls.append((key, CompleteCall(s3_bucket, key, upload_id, tuple(p.etag for p in sent), if_none_match=True,
                                        checksum_algorithm=store.uploads.checksum_algorithm(s3_bucket),
                                        part_checksums=tuple(p.checksum for p in sent if p.checksum))))
    store.objects.put_object(s3_bucket, calls[5][0], b"there first")
    done: dict[str, str] = {}
    failures = store.uploads.complete_many(calls, done=done.__setitem__, stop_on_failure=False)
    rclone = type(s3_server).__name__ == "RcloneServer"
    for n, (key, _) in enumerate(calls[:5]):
        assert done[key].endswith('-2"')  # the Complete's answer: a multipart ETag of two parts
        if not rclone:  # (rclone's HEAD names the whole object's MD5 instead: docs/test-servers.md)
            assert store.objects.head_object(s3_bucket, key).etag == done[key]
        assert store.objects.read_object(s3_bucket, key)[0] == bytes([1]) * 5 * MIB + bytes([2]) * (10 + n)
    if failures:  # a store that honours If-None-Match on a Complete refused the key that appeared, and kept it
        assert [(key, type(err)) for key, err in failures] == [(calls[5][0], PreconditionFailedError)]
        assert store.objects.read_object(s3_bucket, calls[5][0])[0] == b"there first"
    else:
        assert rclone and calls[5][0] in done  # rclone ignores conditions


def test_lean_listings_are_botocores_on_each_server(s3_server, s3_bucket):
    """ListObjectsV2 pages sent by the lean path (``LeanCompletes.list_page``): odd keys, a delimiter, pages past
    the first and ``start-after``, each server's listing as botocore reads it, none refused."""
    lean = S3Store(dataclasses.replace(store_options_for(s3_server), lean_requests=True))
    plain = S3Store(dataclasses.replace(store_options_for(s3_server), lean_requests=False))
    keys = ["odd/a b+c.csv", "odd/ü~é/x", "odd/100%/y", "odd/&<q>'", "odd/p=1/z", "odd/p=2/z"]
    keys += [f"odd/many/{n:04d}" for n in range(1_005)]
    for key in keys:
        plain.objects.put_object(s3_bucket, key, b"x")
    for prefix, delimiter, after in (("odd/", None, None), ("odd/", "/", None), ("odd/ü~é/", None, None),
                                     ("odd/many/", None, "odd/many/0500")):
        found = list(lean.objects.list_objects(s3_bucket, prefix, delimiter=delimiter, start_after=after))
        assert found == list(plain.objects.list_objects(s3_bucket, prefix, delimiter=delimiter, start_after=after))
    assert len(list(lean.objects.list_objects(s3_bucket, "odd/"))) == len(keys)
    assert not lean.objects.lean.was_refused(s3_bucket)


def test_lean_gets_are_botocores_on_each_server(s3_server, s3_bucket):
    """Whole-object GETs sent by the lean path (``LeanCompletes.get_object``): the same bytes, a missing key the
    same error, none refused."""
    lean = S3Store(dataclasses.replace(store_options_for(s3_server), lean_requests=True))
    plain = S3Store(dataclasses.replace(store_options_for(s3_server), lean_requests=False))
    for n, key in enumerate(["get/a b+c.json", "get/ü~é/%x", "get/empty"]):
        plain.objects.put_object(s3_bucket, key, bytes(range(256)) * n)
        assert lean.objects.get_object(s3_bucket, key) == plain.objects.get_object(s3_bucket, key)
    for store in (lean, plain):
        with pytest.raises(NotFoundError):
            store.objects.get_object(s3_bucket, "get/none")
    assert lean.counters.snapshot()["requests"]["GetObject"] == 4 and not lean.objects.lean.was_refused(s3_bucket)
