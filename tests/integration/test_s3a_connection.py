"""S3A's connection keys reach the store's requests: which credentials sign them (every provider of
``fs.s3a.aws.credentials.provider``, an assumed role through STS), TLS with a bare endpoint, a proxy, the pool and
timeouts, S3A's older encryption key names. Against moto (its STS included) and small local servers standing in
for the instance metadata service, a container credentials endpoint and a forward proxy."""

from __future__ import annotations

import datetime
import http.client
import http.server
import json
import logging
import re
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from botocore.client import BaseClient

from s3commit import S3Store, StoreOptions
from s3commit.errors import StoreError

pytestmark = pytest.mark.integration

H = "org.apache.hadoop.fs.s3a."
SDK = "software.amazon.awssdk.auth.credentials."
ROLE = "arn:aws:iam::123456789012:role/s3commit-writer"
EXPIRES = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")


def creds(key: str) -> dict[str, str]:
    return {"AccessKeyId": key, "SecretAccessKey": "secret-" + key, "Token": "token-" + key, "Expiration": EXPIRES}


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers as EC2's instance metadata service (IMDSv2) and as an ECS/EKS container credentials endpoint."""

    def _send(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        self._send("imds-token")

    def do_GET(self) -> None:
        if self.path == "/container":
            self._send(json.dumps(creds("AKIACONTAINER0000001")))
        elif self.path.rstrip("/") == "/latest/meta-data/iam/security-credentials":
            self._send("instance-role")
        elif self.path == "/latest/meta-data/iam/security-credentials/instance-role":
            self._send(json.dumps({"Code": "Success", **creds("AKIAINSTANCE00000001")}))
        else:
            self.send_error(404)

    def log_message(self, *args) -> None:
        pass


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A forward proxy for plain-HTTP targets: records each request's Proxy-Authorization, forwards it."""

    seen: list[str | None]

    def _forward(self) -> None:
        self.seen.append(self.headers.get("Proxy-Authorization"))
        target = urllib.parse.urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")}
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        upstream.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body, headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serve(handler) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """No AWS_* variable of the test's environment leaks into the chains under test."""
    import os

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def store_for(server, **keys: str) -> S3Store:
    conf = {"fs.s3a.endpoint": server.endpoint_url, "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.path.style.access": "true", "fs.s3a.attempts.maximum": "1", **keys}
    return S3Store(StoreOptions.from_hadoop_conf(conf))


def signer_of(store: S3Store, bucket: str) -> str | None:
    """The access key id that signed a request of ``store`` (None: the request was not signed)."""
    seen: list[str | None] = []

    def record(request, **_):
        header = request.headers.get("Authorization") or b""
        found = re.search(r"Credential=([^/]+)/", header.decode() if isinstance(header, bytes) else header)
        seen.append(found.group(1) if found else None)

    store.requests.client.meta.events.register("before-send.s3", record)
    store.objects.put_object(bucket, "signed", b"x")
    return seen[-1]


@pytest.mark.parametrize(("providers", "expected"), [
    (H + "SimpleAWSCredentialsProvider", "AKIACONFKEY000000001"),
    (f"{H}TemporaryAWSCredentialsProvider, {SDK}EnvironmentVariableCredentialsProvider", "AKIAENVIRONMENT00001"),
    (f"{SDK}EnvironmentVariableCredentialsProvider,{H}SimpleAWSCredentialsProvider", "AKIAENVIRONMENT00001"),
    ("com.amazonaws.auth.EnvironmentVariableCredentialsProvider", "AKIAENVIRONMENT00001"),
    (SDK + "DefaultCredentialsProvider", "AKIAENVIRONMENT00001"),
    (H + "auth.ProfileAWSCredentialsProvider", "AKIAPROFILE000000001"),
    (H + "auth.IAMInstanceCredentialsProvider", "AKIAINSTANCE00000001"),
    (SDK + "ContainerCredentialsProvider", "AKIACONTAINER0000001"),
    (f"{SDK}ContainerCredentialsProvider,{H}SimpleAWSCredentialsProvider", "AKIACONFKEY000000001"),
    (H + "AnonymousAWSCredentialsProvider", None),
    (f"{H}TemporaryAWSCredentialsProvider,{H}AnonymousAWSCredentialsProvider", None),
], ids=["simple", "temporary-needs-a-token", "environment-first", "sdk-v1-name", "sdk-default-chain", "profile",
        "instance-role", "container-role", "container-absent", "anonymous", "anonymous-after-none"])
def test_each_credentials_provider_signs_with_its_own_credentials(aws_env, s3_server, s3_bucket, tmp_path,
                                                                  providers, expected):
    # Given: credentials in every place a provider can look, each distinct.
    aws_env.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT00001")
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", "environment-secret")
    (tmp_path / "credentials").write_text("[etl]\naws_access_key_id = AKIAPROFILE000000001\n"
                                          "aws_secret_access_key = profile-secret\n")
    with serve(_Handler) as metadata:
        aws_env.delenv("AWS_EC2_METADATA_DISABLED")
        aws_env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://{metadata}/")
        if expected == "AKIACONTAINER0000001":  # elsewhere the container endpoint is absent, as on EC2
            aws_env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://{metadata}/container")
        store = store_for(s3_server, **{
            "fs.s3a.aws.credentials.provider": providers, "fs.s3a.access.key": "AKIACONFKEY000000001",
            "fs.s3a.secret.key": "conf-secret", "fs.s3a.auth.profile.name": "etl",
            "fs.s3a.auth.profile.file": str(tmp_path / "credentials")})
        # Then: the first provider in the list that has credentials signed the request (none: unsigned).
        assert signer_of(store, s3_bucket) == expected


def test_a_chain_that_finds_no_credentials_says_which_providers_it_tried(aws_env, s3_server, s3_bucket):
    store = store_for(s3_server, **{"fs.s3a.aws.credentials.provider":
                                    f"{H}TemporaryAWSCredentialsProvider,{SDK}EnvironmentVariableCredentialsProvider"})
    with pytest.raises(StoreError, match=r"fs\.s3a\.aws\.credentials\.provider.*none of its providers "
                                         r"\(temporary, environment\) found credentials"):
        store.objects.put_object(s3_bucket, "k", b"x")


def test_web_identity_irsa_assumes_the_role_of_the_token_file(aws_env, s3_server, s3_bucket, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # botocore logs STS's requests and answers at DEBUG
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.irsa.token")
    aws_env.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    aws_env.setenv("AWS_ROLE_ARN", ROLE)
    aws_env.setenv("AWS_ROLE_SESSION_NAME", "irsa-pod")
    aws_env.setenv("AWS_ENDPOINT_URL_STS", s3_server.raw_endpoint_url)
    store = store_for(s3_server, **{"fs.s3a.aws.credentials.provider": SDK + "WebIdentityTokenFileCredentialsProvider"})
    signer = signer_of(store, s3_bucket)
    assert signer and signer.startswith("ASIA")  # STS's temporary credentials, not any key of the environment
    assert "AssumeRoleWithWebIdentity" in caplog.text and "irsa.token" not in caplog.text


def test_assumed_role_calls_sts_with_every_s3a_setting_and_signs_with_the_roles_credentials(
        aws_env, s3_server, s3_bucket, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    calls: list[tuple[str, dict, dict]] = []
    original = BaseClient._make_api_call

    def recording(self, operation, params):
        answer = original(self, operation, params)
        calls.append((operation, dict(params), answer))
        return answer

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    store = store_for(s3_server, **{
        "fs.s3a.aws.credentials.provider": H + "auth.AssumedRoleCredentialProvider",
        "fs.s3a.assumed.role.arn": ROLE, "fs.s3a.assumed.role.session.name": "nightly-etl",
        "fs.s3a.assumed.role.session.duration": "45m", "fs.s3a.assumed.role.external.id": "partner-7",
        "fs.s3a.assumed.role.sts.endpoint": s3_server.raw_endpoint_url,
        "fs.s3a.assumed.role.sts.endpoint.region": "us-east-1",
        # the credentials STS is called with (S3A's default inner provider: the simple keys)
        "fs.s3a.access.key": "AKIABASEKEY000000001", "fs.s3a.secret.key": "base-secret"})
    signer = signer_of(store, s3_bucket)
    [(params, answer)] = [(params, answer) for operation, params, answer in calls if operation == "AssumeRole"]
    assert params == {"RoleArn": ROLE, "RoleSessionName": "nightly-etl", "DurationSeconds": 2700,
                      "ExternalId": "partner-7"}
    # The S3 request ran as the role: signed with the key STS handed out, not the base key.
    assert signer == answer["Credentials"]["AccessKeyId"] != "AKIABASEKEY000000001"
    # STS's answer is in botocore's DEBUG log, its secrets are not.
    assert "AssumeRoleResponse" in caplog.text
    for secret in (answer["Credentials"]["SecretAccessKey"], answer["Credentials"]["SessionToken"], "base-secret"):
        assert secret not in caplog.text


def test_an_assumed_role_sts_refuses_is_named_in_the_error(aws_env, s3_server, s3_bucket):
    store = store_for(s3_server, **{
        "fs.s3a.aws.credentials.provider": H + "auth.AssumedRoleCredentialProvider",
        "fs.s3a.assumed.role.arn": "not-an-arn", "fs.s3a.assumed.role.sts.endpoint": s3_server.raw_endpoint_url,
        "fs.s3a.access.key": "AKIABASEKEY000000001", "fs.s3a.secret.key": "base-secret"})
    with pytest.raises(StoreError, match=r"AssumeRole of not-an-arn \(fs\.s3a\.assumed\.role\.arn\) failed"):
        store.objects.put_object(s3_bucket, "k", b"x")


def test_ssl_disabled_reaches_a_bare_host_port_endpoint_over_http(aws_env, s3_server, s3_bucket):
    bare = s3_server.endpoint_url.removeprefix("http://")
    store = store_for(s3_server, **{"fs.s3a.endpoint": bare, "fs.s3a.connection.ssl.enabled": "false",
                                    "fs.s3a.access.key": "AKIACONFKEY000000001", "fs.s3a.secret.key": "s"})
    store.objects.put_object(s3_bucket, "plain-http", b"minio recipe")
    assert store.objects.get_object(s3_bucket, "plain-http") == b"minio recipe"
    # With TLS (S3A's default) the same bare endpoint is https://: the plain-HTTP server cannot answer it.
    with pytest.raises(StoreError):
        store_for(s3_server, **{"fs.s3a.endpoint": bare, "fs.s3a.access.key": "AKIACONFKEY000000001",
                                "fs.s3a.secret.key": "s"}).head_bucket(s3_bucket)


def test_every_request_goes_through_the_proxy_with_its_credentials(aws_env, s3_server, s3_bucket):
    _Proxy.seen = []
    with serve(_Proxy) as proxy:
        host, port = proxy.split(":")
        store = store_for(s3_server, **{"fs.s3a.proxy.host": host, "fs.s3a.proxy.port": port,
                                        "fs.s3a.proxy.username": "etl", "fs.s3a.proxy.password": "proxy-pass-1234",
                                        "fs.s3a.access.key": "AKIACONFKEY000000001", "fs.s3a.secret.key": "s"})
        store.objects.put_object(s3_bucket, "via-proxy", b"through")
        assert store.objects.get_object(s3_bucket, "via-proxy") == b"through"
    import base64

    assert _Proxy.seen == [f"Basic {base64.b64encode(b'etl:proxy-pass-1234').decode()}"] * 2
    assert "proxy-pass-1234" not in repr(store.options)


def test_the_proxy_password_stays_out_of_errors_and_logs(aws_env, s3_server, s3_bucket, caplog):
    import traceback

    caplog.set_level(logging.DEBUG)
    store = store_for(s3_server, **{"fs.s3a.proxy.host": "127.0.0.1", "fs.s3a.proxy.port": "9",  # nothing there
                                    "fs.s3a.proxy.username": "etl", "fs.s3a.proxy.password": "Pr0xy-Secret-0451",
                                    "fs.s3a.access.key": "AKIACONFKEY000000001", "fs.s3a.secret.key": "s"})
    with pytest.raises(StoreError) as failed:
        store.objects.put_object(s3_bucket, "k", b"x")
    shown = "\n".join([str(failed.value), repr(failed.value), "".join(traceback.format_exception(failed.value)),
                       caplog.text, repr(store.options)])
    assert "proxy" in shown.lower() and "Pr0xy-Secret-0451" not in shown


def test_pool_and_timeouts_are_botocores(aws_env, s3_server):
    config = store_for(s3_server, **{"fs.s3a.connection.maximum": "300", "fs.s3a.connection.establish.timeout": "5000",
                                     "fs.s3a.connection.timeout": "2m",
                                     "fs.s3a.connection.request.timeout": "90s"}).requests.client.meta.config
    assert (config.max_pool_connections, config.connect_timeout, config.read_timeout) == (300, 5.0, 90.0)


def test_s3as_older_encryption_key_names_encrypt_every_object(aws_env, s3_server, s3_bucket, s3_client):
    store = store_for(s3_server, **{"fs.s3a.server-side-encryption-algorithm": "AES256",
                                    "fs.s3a.access.key": "AKIACONFKEY000000001", "fs.s3a.secret.key": "s"})
    store.objects.put_object(s3_bucket, "encrypted", b"x")
    assert s3_client.head_object(Bucket=s3_bucket, Key="encrypted")["ServerSideEncryption"] == "AES256"
