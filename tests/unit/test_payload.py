"""A part's body on its way to S3 (s3commit.store.body_policy, s3commit.transfer.parts, s3commit.store.signing): mapped
from its file, never copied in Python, and its SHA-256 signed only where nothing else catches damage in transit."""

from __future__ import annotations

import base64
import hashlib
import mmap
import os

import botocore.auth
import pytest

from s3commit.config.options import StoreOptions
from s3commit.errors import ConfigError
from s3commit.model import checksums
from s3commit.store import body_policy
from s3commit.store.capabilities import Capabilities, Finding, Outcome
from s3commit.store.s3store import S3Store
from s3commit.transfer.parts import BufferPart, FilePart, memory_buffer

UNSIGNED = "UNSIGNED-PAYLOAD"


class Sent(Exception):
    """Stops a request before it leaves the process."""


def store_for(*, capabilities: Capabilities | None = None, **options) -> S3Store:
    store = S3Store(StoreOptions(endpoint_url="http://127.0.0.1:9", region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing", **options))
    if capabilities is not None:
        store.capabilities["bucket"] = capabilities
    return store


def capabilities(**findings: Outcome) -> Capabilities:
    return Capabilities("http://127.0.0.1:9", "bucket", 0.0,
                        {name.replace("_", "-"): Finding(outcome) for name, outcome in findings.items()})


VALIDATES = capabilities(checksum_crc32=Outcome.HONOURED, checksum_sha256=Outcome.HONOURED,
                         part_etag_md5=Outcome.YES)
"""A store seen to refuse a wrong checksum (AWS S3, SeaweedFS)."""
MD5_ETAGS = capabilities(checksum_crc32=Outcome.IGNORED, checksum_crc32c=Outcome.IGNORED,
                         checksum_sha256=Outcome.IGNORED, part_etag_md5=Outcome.YES)
"""A store that validates nothing but gives MD5 part ETags (moto)."""
NEITHER = capabilities(checksum_crc32=Outcome.IGNORED, checksum_sha256=Outcome.IGNORED, part_etag_md5=Outcome.NO)
"""A store that validates nothing and whose ETags are no MD5s: only the signature protects a body."""


def sent(store: S3Store, body, *, operation: str = "upload_part") -> dict:
    """What the store's client would send for one part (or object): its body object and its headers."""
    seen: dict = {}

    def capture(request, **_):
        seen["body"] = request.body
        seen["headers"] = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        raise Sent

    store.requests.client.meta.events.register("before-send.s3", capture)
    with pytest.raises(Exception) as caught:
        if operation == "upload_part":
            store.uploads.upload_part("bucket", "k", "upload", 1, body)
        else:
            store.objects.put_object("bucket", "k", body)
    assert isinstance(caught.value.__cause__, Sent) or isinstance(caught.value, Sent), caught.value
    return seen


@pytest.fixture
def block_file(tmp_path):
    data = os.urandom(3 * 4096 + 77)
    path = tmp_path / "h1-p1.block"
    path.write_bytes(data)
    return str(path), data


# --- parts: mapped, not read -------------------------------------------------------------------------------------


def test_a_file_part_is_mapped_from_its_file_not_read_into_a_new_buffer(block_file):
    path, data = block_file
    part = FilePart(path, owned=True)
    view = part.load()
    assert isinstance(view, memoryview) and isinstance(view.obj, mmap.mmap)
    assert bytes(view) == data
    del view
    part.release()
    assert not os.path.exists(path)  # an owned block file goes with its part


def test_a_part_at_an_offset_off_the_page_boundary_is_exact(block_file):
    path, data = block_file
    part = FilePart(path, offset=4097, length=5000)
    assert bytes(part.load()) == data[4097:9097]
    part.release()
    assert os.path.exists(path)  # not owned: only read


def test_a_file_shorter_than_its_part_is_refused_naming_it(block_file):
    path, data = block_file
    part = FilePart(path, offset=0, length=len(data) + 1)
    with pytest.raises(OSError, match="shorter than expected"):
        part.load()


def test_an_empty_part_and_a_release_while_a_view_is_held(block_file):
    path, _ = block_file
    assert bytes(FilePart(path, offset=0, length=0).load()) == b""
    part = FilePart(path, owned=True)
    held = part.load()
    part.release()  # the view outlives the release: the mapping goes with it, nothing fails
    assert len(bytes(held)) == part.size and not os.path.exists(path)


def test_a_received_part_lives_in_an_anonymous_mapping_until_released():
    buffer = memory_buffer(1000)
    assert isinstance(buffer, mmap.mmap)
    buffer[:5] = b"hello"
    part = BufferPart(buffer, 5)
    assert bytes(part.load()) == b"hello"
    part.release()
    assert buffer.closed
    assert memory_buffer(0) == bytearray()


# --- the body botocore sends is the part's own buffer ------------------------------------------------------------


def test_botocore_sends_the_parts_own_buffer_without_a_copy(block_file):
    path, data = block_file
    view = FilePart(path).load()
    seen = sent(store_for(capabilities=MD5_ETAGS, checksum_algorithm=checksums.automatic()), view)
    assert seen["body"] is view  # the mapping itself: no bytes() of it, no file object read in 16 KiB pieces
    assert seen["headers"]["content-length"] == str(len(data))
    assert seen["headers"][f"x-amz-checksum-{checksums.automatic().lower()}"]


def test_a_client_without_the_handler_still_sends_the_exact_bytes():
    data = os.urandom(100_000)
    body = body_policy.Payload(memoryview(data), signed=None)
    assert body.read() == data and body.read() == b""
    body.seek(10)
    assert body.read(5) == data[10:15]


# --- payload signing ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("known, verify_etag, unsigned", [
    (VALIDATES, None, True),   # the store refuses a damaged body itself
    (MD5_ETAGS, None, True),   # the ETag check compares MD5s
    (MD5_ETAGS, False, False),  # ... unless turned off: then the signature is all there is
    (NEITHER, None, False),    # nothing else would catch damage
    (None, None, False),       # a store never probed
], ids=["validates", "md5-etags", "md5-etags-unchecked", "neither", "unknown"])
def test_a_body_is_sent_unsigned_only_where_damage_is_caught_otherwise(known, verify_etag, unsigned):
    data = bytearray(os.urandom(1 << 20))
    store = store_for(capabilities=known, verify_etag=verify_etag)
    headers = sent(store, data)["headers"]
    expected = UNSIGNED if unsigned else hashlib.sha256(data).hexdigest()
    assert headers["x-amz-content-sha256"] == expected
    algorithm = store.uploads.checksum_algorithm("bucket")
    assert (algorithm is None) == (known is MD5_ETAGS and verify_etag is None)  # auto sends none to moto's like
    if algorithm:  # the checksum header itself is always signed
        assert f"x-amz-checksum-{algorithm.lower()}" in headers["authorization"]


@pytest.mark.parametrize("known, options, header", [
    (MD5_ETAGS, {}, False),  # ignored by the store: the MD5 ETag check is the check, a CRC would be CPU for nothing
    (MD5_ETAGS, {"checksum_algorithm": "CRC32"}, True),  # named: always sent
    (MD5_ETAGS, {"verify_etag": False}, True),  # no ETag check: the checksum stays
    (MD5_ETAGS, {"sse_algorithm": "aws:kms"}, True),  # SSE-KMS ETags are no MD5s
    (VALIDATES, {}, True),  # validated by the store
    (NEITHER, {}, True),  # no MD5 ETags to check
    (None, {}, True),  # never probed
], ids=["md5-etags", "named", "etag-check-off", "sse-kms", "validates", "neither", "unknown"])
def test_auto_sends_no_checksum_only_where_the_store_ignores_it_and_the_md5_etags_are_checked(known, options, header):
    data = bytearray(os.urandom(1 << 16))
    for operation in ("upload_part", "put_object"):
        headers = sent(store_for(capabilities=known, **options), data, operation=operation)["headers"]
        assert any(name.startswith("x-amz-checksum-") for name in headers) == header, (operation, headers)


def test_auto_is_kept_by_a_copy_of_the_options_and_not_by_a_named_algorithm():
    from dataclasses import replace

    auto = StoreOptions()
    assert auto.checksum_auto and auto.checksum_algorithm == checksums.automatic()
    assert replace(auto, region="eu-west-1").checksum_auto  # a copy (the sidecar's registry makes one)
    assert not replace(auto, checksum_algorithm="SHA256").checksum_auto
    assert not StoreOptions(checksum_algorithm=checksums.automatic()).checksum_auto  # named by the user
    assert StoreOptions.from_hadoop_conf({}).checksum_auto
    assert not StoreOptions.from_hadoop_conf({"fs.s3a.create.checksum.algorithm": "crc32"}).checksum_auto


def test_a_client_that_computes_its_own_checksums_is_given_the_stores():
    """A client the user made (``request_checksum_calculation`` ``when_supported``) would compute a CRC32 of its own
    for a body sent without one: the store's is kept for it, computed once."""
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing",
                          config=Config(request_checksum_calculation="when_supported"))
    store = S3Store(StoreOptions(region="us-east-1"), client=client)
    store.capabilities["bucket"] = MD5_ETAGS
    assert store.uploads.checksum_algorithm("bucket") == checksums.automatic()
    assert store_for(capabilities=MD5_ETAGS).uploads.checksum_algorithm("bucket") is None


def test_a_single_put_object_follows_the_same_rule():
    headers = sent(store_for(capabilities=MD5_ETAGS), bytearray(b"x" * 1000), operation="put_object")["headers"]
    assert headers["x-amz-content-sha256"] == UNSIGNED


def test_signed_signs_every_body_and_a_sha256_checksum_is_not_hashed_twice(monkeypatch):
    data = bytearray(os.urandom(1 << 20))
    calls = []
    real = botocore.auth.sha256
    monkeypatch.setattr(botocore.auth, "sha256", lambda *a: calls.append(len(a[0]) if a else 0) or real(*a))
    headers = sent(store_for(capabilities=VALIDATES, payload_signing="signed", checksum_algorithm="SHA256"),
                   data)["headers"]
    digest = hashlib.sha256(data).digest()
    assert headers["x-amz-content-sha256"] == digest.hex()
    assert headers["x-amz-checksum-sha256"] == base64.b64encode(digest).decode()
    assert not [n for n in calls if n == len(data)]  # botocore did not hash the body again


def test_signed_signs_where_auto_would_not():
    data = bytearray(os.urandom(1 << 16))
    headers = sent(store_for(capabilities=VALIDATES, payload_signing="signed"), data)["headers"]
    assert headers["x-amz-content-sha256"] == hashlib.sha256(data).hexdigest()


def test_payload_signing_is_parsed_from_its_key_and_a_bad_value_is_refused():
    assert StoreOptions.from_hadoop_conf({"s3commit.signing.payload": " Signed "}).payload_signing == "signed"
    assert StoreOptions.from_hadoop_conf({}).payload_signing == "auto"
    with pytest.raises(ConfigError, match=r"s3commit\.signing\.payload .*Valid values are: auto, signed"):
        StoreOptions.from_hadoop_conf({"s3commit.signing.payload": "never"})
