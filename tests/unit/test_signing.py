"""The store's client signs with botocore's own SigV4 signer (s3commit.store.signing), with or without AWS's CRT."""

import hashlib
import os

import botocore.auth
import pytest
from botocore.compat import HAS_CRT

from s3commit.config.options import StoreOptions
from s3commit.store import signing
from s3commit.store.s3store import S3Store


class Sent(Exception):
    """Stops a request before it leaves the process."""


def signed_request(store, body):
    """The headers of an UploadPart the store's client signed (never sent)."""
    seen = {}

    def capture(request, **_):
        seen.update(request.headers.items())
        raise Sent

    store.requests.client.meta.events.register("before-send.s3.UploadPart", capture)
    with pytest.raises(Sent):
        store.requests.client.upload_part(Bucket="bucket", Key="k", UploadId="u", PartNumber=1, Body=body)
    return {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in seen.items()}


def test_the_client_signs_the_payload_hash_of_the_body_over_http():
    store = S3Store(StoreOptions(endpoint_url="http://127.0.0.1:9", region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing"))
    body = bytearray(os.urandom(1 << 20))
    headers = signed_request(store, body)
    assert headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "x-amz-content-sha256" in headers["authorization"]  # the hash is part of what is signed


def test_the_client_names_botocores_own_signer_with_or_without_the_crt():
    store = S3Store(StoreOptions(endpoint_url="http://127.0.0.1:9", region="us-east-1", access_key="a",
                                 secret_key="b"))
    assert store.requests.client.meta.config.signature_version == signing.SIGNATURE_VERSION
    signer = botocore.auth.AUTH_TYPE_MAPS[signing.SIGNATURE_VERSION]
    assert issubclass(signer, botocore.auth.S3SigV4Auth)  # botocore's Python signer, told by each body what to sign
    if HAS_CRT:  # only added to botocore's table: other clients keep the CRT's signer
        assert not issubclass(botocore.auth.AUTH_TYPE_MAPS["s3v4"], botocore.auth.S3SigV4Auth)
