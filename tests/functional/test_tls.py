"""Checksums over https: every part still carries its checksum as a header (no trailer is needed), and a job
commits and validates the same as over http. moto in this process, served by werkzeug with a self-signed
certificate for 127.0.0.1 that the client trusts through ``AWS_CA_BUNDLE``."""

from __future__ import annotations

import datetime
import ipaddress
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from s3commit import S3Store, create_committer
from s3commit.config.options import RetryPolicy, StoreOptions

MIB = 1024 * 1024


def self_signed(directory: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture
def https_moto(tmp_path, monkeypatch) -> Iterator[str]:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    cert, key = self_signed(tmp_path)
    server = make_server("127.0.0.1", 0, DomainDispatcherApplication(create_backend_app), threaded=True,
                         ssl_context=(cert, key))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("AWS_CA_BUNDLE", cert)
    try:
        yield f"https://127.0.0.1:{server.port}"
    finally:
        server.shutdown()


def test_checksummed_multipart_job_over_https(https_moto, staging_dir):
    store = S3Store(StoreOptions(endpoint_url=https_moto, region="us-east-1", path_style=True,
                                 access_key="testing", secret_key="testing", checksum_algorithm="CRC32",
                                 retry=RetryPolicy(max_attempts=3, initial_delay=0.01)))
    # CRC32, not the default CRC32C: this moto is not the test server, and computes CRC32C as CRC32 without the
    # crc32c package (docs/test-servers.md), so its composite CRC32C could not be compared.
    store.requests.client.create_bucket(Bucket="tls")
    data = bytes(range(256)) * (11 * MIB // 256)  # three parts of 5 MiB
    for name in ("magic", "directory"):
        committer = create_committer(name, f"s3://tls/{name}", store=store, staging_dir=staging_dir,
                                     part_size=5 * MIB, validate_output=True)
        committer.setup_job()
        attempt = committer.setup_task(committer.new_task_attempt_id(0))
        with attempt.open("part-00000.bin") as out:
            out.write(data)
        success = committer.commit_job([committer.commit_task(attempt)])
        assert success.metrics["committer_checksums_verified"] == 1, name  # the composite CRC32 of 3 parts
        listed = store.requests.client.list_objects_v2(Bucket="tls", Prefix=f"{name}/part-")["Contents"]
        (key,) = [o["Key"] for o in listed]
        assert store.requests.client.get_object(Bucket="tls", Key=key)["Body"].read() == data
    assert store.requests.client.list_multipart_uploads(Bucket="tls").get("Uploads", []) == []
