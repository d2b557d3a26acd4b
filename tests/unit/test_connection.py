"""S3A's connection keys parsed into the store's options: providers, assumed role, TLS, proxy, pool, timeouts,
per-bucket keys and S3A's older key names; bad values refused by name."""

from __future__ import annotations

import pytest

from s3commit.config.connection import AssumedRole, CredentialChain, Proxy, duration_seconds
from s3commit.config.options import KEYS, StoreOptions
from s3commit.errors import ConfigError

H = "org.apache.hadoop.fs.s3a."


def options(**keys: str) -> StoreOptions:
    return StoreOptions.from_hadoop_conf({k.replace("_", "."): v for k, v in keys.items()})


def test_every_connection_key_is_a_documented_key():
    for name in ("fs.s3a.aws.credentials.provider", "fs.s3a.assumed.role.arn", "fs.s3a.proxy.password",
                 "fs.s3a.connection.maximum", "fs.s3a.connection.ssl.enabled", "fs.s3a.server-side-encryption.key"):
        assert KEYS[name].why


def test_defaults_keep_s3commits_pool_timeouts_and_boto3s_credentials():
    o = StoreOptions.from_hadoop_conf({})
    assert (o.max_pool_connections, o.connect_timeout, o.read_timeout, o.use_ssl) == (64, 10.0, 60.0, True)
    assert o.credentials is None and o.proxy is None and o.endpoint_url is None


@pytest.mark.parametrize(("text", "unit", "seconds"), [("30s", "ms", 30.0), ("200", "ms", 0.2), ("5m", "s", 300.0),
                                                       ("1h", "s", 3600.0), ("1500ms", "s", 1.5), ("900", "s", 900.0)])
def test_durations_parse_like_hadoop(text, unit, seconds):
    assert duration_seconds(text, unit=unit, what="x") == seconds


def test_a_bad_duration_names_its_key():
    with pytest.raises(ConfigError, match=r"fs\.s3a\.connection\.timeout: 'soon' is not a duration"):
        StoreOptions.from_hadoop_conf({"fs.s3a.connection.timeout": "soon"})


@pytest.mark.parametrize(("endpoint", "ssl", "url"), [
    ("minio:9000", "false", "http://minio:9000"), ("minio:9000", "true", "https://minio:9000"),
    ("http://minio:9000", "true", "http://minio:9000"), ("s3.eu-west-1.amazonaws.com", "true",
                                                         "https://s3.eu-west-1.amazonaws.com")])
def test_a_bare_endpoint_takes_its_scheme_from_ssl_enabled(endpoint, ssl, url):
    o = StoreOptions.from_hadoop_conf({"fs.s3a.endpoint": endpoint, "fs.s3a.connection.ssl.enabled": ssl})
    assert o.endpoint_url == url and o.use_ssl is (ssl == "true")


def test_pool_and_timeouts_map_onto_botocores_with_the_request_timeout_as_a_cap():
    o = StoreOptions.from_hadoop_conf({"fs.s3a.connection.maximum": "256", "fs.s3a.connection.establish.timeout": "30s",
                                       "fs.s3a.connection.timeout": "200000",
                                       "fs.s3a.connection.request.timeout": "60s"})
    assert (o.max_pool_connections, o.connect_timeout, o.read_timeout) == (256, 30.0, 60.0)
    assert StoreOptions.from_hadoop_conf({"fs.s3a.connection.timeout": "200s"}).read_timeout == 200.0


@pytest.mark.parametrize(("keys", "message"), [
    ({"fs.s3a.proxy.port": "3128"}, "fs.s3a.proxy.port is set without fs.s3a.proxy.host"),
    ({"fs.s3a.proxy.host": "proxy", "fs.s3a.proxy.username": "u"}, "must be set together"),
    ({"fs.s3a.proxy.host": "proxy", "fs.s3a.proxy.port": "x"}, "not a port number"),
    ({"fs.s3a.connection.maximum": "0"}, "fs.s3a.connection.maximum: '0' is not a positive number"),
    ({"fs.s3a.connection.ssl.enabled": "maybe"}, "fs.s3a.connection.ssl.enabled: 'maybe' is not a boolean"),
])
def test_bad_connection_keys_are_refused_by_name(keys, message):
    with pytest.raises(ConfigError, match=message):
        StoreOptions.from_hadoop_conf(keys)


def test_proxy_ports_default_as_s3as_and_the_password_stays_out_of_repr():
    o = StoreOptions.from_hadoop_conf({"fs.s3a.proxy.host": "proxy", "fs.s3a.proxy.username": "etl",
                                       "fs.s3a.proxy.password": "p@ss:word!"})
    assert o.proxy == Proxy(host="proxy", port=80, username="etl", password="p@ss:word!")
    assert o.proxy.url() == "http://etl:p%40ss%3Aword%21@proxy:80"
    assert "p@ss" not in repr(o) and "p@ss" not in repr(o.proxy)
    secure = StoreOptions.from_hadoop_conf({"fs.s3a.proxy.host": "proxy", "fs.s3a.proxy.ssl.enabled": "true"})
    assert secure.proxy.url() == "https://proxy:443"


def test_providers_by_every_name_s3a_accepts_in_order():
    o = StoreOptions.from_hadoop_conf({"fs.s3a.aws.credentials.provider": f"""
        {H}TemporaryAWSCredentialsProvider,
        software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider,
        com.amazonaws.auth.InstanceProfileCredentialsProvider, {H}auth.ProfileAWSCredentialsProvider,
        {H}AnonymousAWSCredentialsProvider"""})
    assert o.credentials == CredentialChain(providers=("temporary", "web-identity", "ec2", "profile", "anonymous"))


def test_an_unknown_provider_is_refused_with_the_supported_ones():
    with pytest.raises(ConfigError, match=r"names com\.example\.VaultProvider, which s3commit's sidecar cannot run.*"
                                          r"Supported: .*AssumedRoleCredentialProvider"):
        StoreOptions.from_hadoop_conf({"fs.s3a.aws.credentials.provider": "com.example.VaultProvider"})


def test_assumed_role_settings():
    o = StoreOptions.from_hadoop_conf({
        "fs.s3a.aws.credentials.provider": f"{H}auth.AssumedRoleCredentialProvider",
        "fs.s3a.assumed.role.arn": "arn:aws:iam::1:role/r", "fs.s3a.assumed.role.session.duration": "2h",
        "fs.s3a.assumed.role.external.id": "x-1", "fs.s3a.assumed.role.sts.endpoint": "sts.eu-west-1.amazonaws.com",
        "fs.s3a.assumed.role.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"})
    assert o.credentials.role == AssumedRole(arn="arn:aws:iam::1:role/r", duration=7200, external_id="x-1",
                                             sts_endpoint="https://sts.eu-west-1.amazonaws.com",
                                             providers=("environment",))
    default = StoreOptions.from_hadoop_conf({
        "fs.s3a.aws.credentials.provider": f"{H}auth.AssumedRoleCredentialProvider",
        "fs.s3a.assumed.role.arn": "arn:aws:iam::1:role/r"}).credentials.role
    assert (default.duration, default.providers) == (1800, ("simple", "environment"))


@pytest.mark.parametrize(("keys", "message"), [
    ({}, "fs.s3a.assumed.role.arn is not set"),
    ({"fs.s3a.assumed.role.arn": "a", "fs.s3a.assumed.role.session.duration": "5m"}, "outside STS's 15m..12h"),
    ({"fs.s3a.assumed.role.arn": "a", "fs.s3a.assumed.role.credentials.provider":
      f"{H}auth.AssumedRoleCredentialProvider"}, "may not name AssumedRoleCredentialProvider"),
])
def test_bad_assumed_role_settings_are_refused(keys, message):
    with pytest.raises(ConfigError, match=message):
        StoreOptions.from_hadoop_conf({"fs.s3a.aws.credentials.provider": f"{H}auth.AssumedRoleCredentialProvider",
                                       **keys})


def test_per_bucket_keys_win_for_their_bucket_only():
    conf = {"fs.s3a.connection.maximum": "10", "fs.s3a.bucket.logs.connection.maximum": "99",
            "fs.s3a.bucket.logs.aws.credentials.provider": f"{H}AnonymousAWSCredentialsProvider"}
    logs = StoreOptions.from_hadoop_conf(conf, bucket="logs")
    other = StoreOptions.from_hadoop_conf(conf, bucket="data")
    assert (logs.max_pool_connections, logs.credentials.providers) == (99, ("anonymous",))
    assert (other.max_pool_connections, other.credentials) == (10, None)


def test_s3as_older_encryption_names_apply_unless_the_current_ones_are_set():
    old = {"fs.s3a.server-side-encryption-algorithm": "SSE-KMS", "fs.s3a.server-side-encryption.key": "kms-1"}
    assert (StoreOptions.from_hadoop_conf(old).sse_algorithm, StoreOptions.from_hadoop_conf(old).sse_kms_key_id) \
        == ("aws:kms", "kms-1")
    both = StoreOptions.from_hadoop_conf({**old, "fs.s3a.encryption.key": "kms-2"})
    assert (both.sse_algorithm, both.sse_kms_key_id) == ("aws:kms", "kms-2")
    with pytest.raises(ConfigError, match="'SSE-C' is not valid"):
        StoreOptions.from_hadoop_conf({"fs.s3a.server-side-encryption-algorithm": "SSE-C"})
