"""How the store reaches S3 beyond the endpoint and the keys: S3A's credential providers and assumed role, TLS,
proxy, connection pool and timeouts, read from S3A's own keys so that an S3A configuration works unchanged.

Pure: no I/O. :func:`connection_fields` turns Hadoop-style keys into :class:`~s3commit.config.options.StoreOptions`
fields; :mod:`s3commit.store.client` builds boto3's client from them (credential providers onto botocore's, an assumed
role through STS, the proxy, pool and timeouts onto botocore's ``Config``). :data:`CONNECTION_KEYS` defines the
keys (their defaults and risks), which :data:`s3commit.config.KEYS` lists with every other key.

Keys whose value only Hadoop's ``core-default.xml`` gave are not S3A settings a user made: the JVM does not
forward them (``BridgeConf``), and s3commit's defaults here apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from s3commit.errors import ConfigError

CONNECTION_KEYS: tuple[tuple[str, str, str], ...] = (
    ("fs.s3a.aws.credentials.provider", "",
     "Credential providers tried in order (S3A's class names, comma-separated): simple/temporary keys, environment, "
     "instance or container role, web identity (IRSA), profile, anonymous, assumed role, the SDK's default chain. "
     "Empty: fs.s3a.access.key/secret.key if set, else boto3's chain. An unknown class fails at start."),
    ("fs.s3a.assumed.role.arn", "",
     "The role AssumedRoleCredentialProvider assumes through STS (refreshed before it expires)."),
    ("fs.s3a.assumed.role.session.name", "", "The role session's name; empty: the user's name, as S3A does."),
    ("fs.s3a.assumed.role.session.duration", "30m",
     "How long each assumed-role session lasts (15m to 12h; seconds without a unit)."),
    ("fs.s3a.assumed.role.external.id", "", "The external id the role's trust policy asks for."),
    ("fs.s3a.assumed.role.policy", "", "A JSON policy narrowing the assumed role's permissions."),
    ("fs.s3a.assumed.role.sts.endpoint", "", "STS endpoint for AssumeRole; empty: boto3's (regional) STS."),
    ("fs.s3a.assumed.role.sts.endpoint.region", "", "Region of the STS endpoint; empty: fs.s3a.endpoint.region."),
    ("fs.s3a.assumed.role.credentials.provider",
     "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,"
     "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
     "Credentials to call STS with (the same class names; an assumed role inside is refused)."),
    ("fs.s3a.auth.profile.name", "", "ProfileAWSCredentialsProvider's profile; empty: AWS_PROFILE, else default."),
    ("fs.s3a.auth.profile.file", "",
     "ProfileAWSCredentialsProvider's credentials file; empty: AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials."),
    ("fs.s3a.connection.ssl.enabled", "true",
     "HTTPS to S3. false: a bare host:port endpoint (the MinIO recipe) is reached over plain HTTP."),
    ("fs.s3a.proxy.host", "", "HTTP proxy for every S3 and STS request; empty: none (botocore's HTTPS_PROXY...)."),
    ("fs.s3a.proxy.port", "", "The proxy's port; empty: 443 with fs.s3a.proxy.ssl.enabled, else 80."),
    ("fs.s3a.proxy.username", "", "Proxy user (basic authentication); needs fs.s3a.proxy.password."),
    ("fs.s3a.proxy.password", "", "Proxy password; never logged or printed."),
    ("fs.s3a.proxy.ssl.enabled", "false", "Talk to the proxy itself over HTTPS."),
    ("fs.s3a.connection.maximum", "64",
     "HTTP connections to S3 per sidecar, and its part-upload threads. More: more parallel parts and Completes, "
     "more memory and sockets."),
    ("fs.s3a.connection.establish.timeout", "10s",
     "Time to open a connection (milliseconds without a unit); a slow one fails over to a retry."),
    ("fs.s3a.connection.timeout", "60s",
     "Time to wait for any bytes of an answer (milliseconds without a unit); too short fails large uploads."),
    ("fs.s3a.connection.request.timeout", "0",
     "S3A's whole-request limit (0: none). botocore has none: it caps fs.s3a.connection.timeout instead."),
    ("fs.s3a.server-side-encryption-algorithm", "",
     "S3A's older name of fs.s3a.encryption.algorithm, used when that one is not set."),
    ("fs.s3a.server-side-encryption.key", "",
     "S3A's older name of fs.s3a.encryption.key, used when that one is not set."),
)
"""The keys this module reads: ``(name, default, why)``."""

_DEFAULTS = {name: default for name, default, _ in CONNECTION_KEYS}

LEGACY_NAMES = {"fs.s3a.server-side-encryption-algorithm": "fs.s3a.encryption.algorithm",
                "fs.s3a.server-side-encryption.key": "fs.s3a.encryption.key"}
"""S3A's deprecated key -> its current name: the old one applies where the new one is not set (S3A's rule)."""

_HADOOP = "org.apache.hadoop.fs.s3a."
_SDK2 = "software.amazon.awssdk.auth.credentials."
_SDK1 = "com.amazonaws.auth."
PROVIDERS: dict[str, str] = {
    _HADOOP + "SimpleAWSCredentialsProvider": "simple",
    _HADOOP + "TemporaryAWSCredentialsProvider": "temporary",
    _HADOOP + "AnonymousAWSCredentialsProvider": "anonymous",
    _SDK2 + "AnonymousCredentialsProvider": "anonymous",
    _SDK1 + "AnonymousAWSCredentials": "anonymous",
    _SDK2 + "EnvironmentVariableCredentialsProvider": "environment",
    _SDK1 + "EnvironmentVariableCredentialsProvider": "environment",
    _HADOOP + "auth.IAMInstanceCredentialsProvider": "instance",
    _HADOOP + "SharedInstanceProfileCredentialsProvider": "instance",
    _SDK1 + "EC2ContainerCredentialsProviderWrapper": "instance",
    _SDK2 + "InstanceProfileCredentialsProvider": "ec2",
    _SDK1 + "InstanceProfileCredentialsProvider": "ec2",
    _SDK2 + "ContainerCredentialsProvider": "container",
    _SDK1 + "ContainerCredentialsProvider": "container",
    _SDK2 + "WebIdentityTokenFileCredentialsProvider": "web-identity",
    _SDK1 + "WebIdentityTokenCredentialsProvider": "web-identity",
    _HADOOP + "auth.ProfileAWSCredentialsProvider": "profile",
    _SDK2 + "ProfileCredentialsProvider": "sdk-profile",
    _SDK1 + "profile.ProfileCredentialsProvider": "sdk-profile",
    _SDK2 + "DefaultCredentialsProvider": "default",
    _SDK1 + "DefaultAWSCredentialsProviderChain": "default",
    _HADOOP + "auth.AssumedRoleCredentialProvider": "assumed-role",
}
"""S3A's credential provider classes (Hadoop's, the AWS SDK v2's and v1's) -> what the sidecar does for each:
``simple``/``temporary`` (fs.s3a.access.key, secret.key, session.token), ``environment`` (AWS_* variables),
``instance`` (container credentials if the environment names them, else EC2's instance role), ``ec2``,
``container``, ``web-identity`` (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN: EKS's IRSA), ``profile`` (a
credentials file's profile), ``sdk-profile`` (a profile of the config and credentials files, role and SSO profiles
included), ``default`` (boto3's whole chain), ``anonymous`` (unsigned requests), ``assumed-role`` (STS)."""


def duration_seconds(text: str, *, unit: str, what: str) -> float:
    """Hadoop's time durations (``30s``, ``5m``, ``1h``, ``200ms``...; ``unit`` for a bare number) in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s|m|h|d)?\s*", str(text).lower())
    if not match:
        raise ConfigError(f"{what}: {text!r} is not a duration (examples: 30s, 5m, 1h, 200ms, 60000)")
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    return float(match.group(1)) * scale[match.group(2) or unit]


@dataclass(frozen=True)
class AssumedRole:
    """S3A's AssumedRoleCredentialProvider: STS AssumeRole with these arguments, refreshed before expiry."""

    arn: str
    duration: int
    session_name: str | None = None
    external_id: str | None = None
    policy: str | None = None
    sts_endpoint: str | None = None
    sts_region: str | None = None
    providers: tuple[str, ...] = ("simple", "environment")
    """The credentials STS is called with (kinds of :data:`PROVIDERS`)."""


@dataclass(frozen=True)
class CredentialChain:
    """The providers of ``fs.s3a.aws.credentials.provider``, in order: the first that has credentials wins."""

    providers: tuple[str, ...]
    profile: str | None = None
    profile_file: str | None = None
    role: AssumedRole | None = None


@dataclass(frozen=True)
class Proxy:
    """The HTTP(S) proxy every request goes through."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    secure: bool = False

    def url(self) -> str:
        """The proxy as botocore takes it (credentials in the URL; botocore masks them in its errors)."""
        auth = f"{quote(self.username, safe='')}:{quote(self.password or '', safe='')}@" if self.username else ""
        return f"{'https' if self.secure else 'http'}://{auth}{self.host}:{self.port}"


def resolve_bucket(conf: Mapping[str, str], bucket: str | None) -> dict[str, str]:
    """``conf`` as S3A reads it for ``bucket``: each ``fs.s3a.bucket.<bucket>.<key>`` overrides ``fs.s3a.<key>``."""
    resolved = {str(k): str(v) for k, v in conf.items()}
    if bucket:
        prefix = f"fs.s3a.bucket.{bucket}."
        resolved.update({f"fs.s3a.{k[len(prefix):]}": v for k, v in conf.items() if str(k).startswith(prefix)})
    return resolved


def current_names(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with S3A's deprecated key names (:data:`LEGACY_NAMES`) applied where the current name is unset."""
    resolved = dict(conf)
    for old, new in LEGACY_NAMES.items():
        if str(resolved.get(old, "")).strip() and not str(resolved.get(new, "")).strip():
            resolved[new] = resolved[old]
    return resolved


def _get(conf: Mapping[str, str], name: str) -> str:
    return str(conf.get(name, _DEFAULTS[name])).strip()


def _bool(conf: Mapping[str, str], name: str) -> bool:
    value = _get(conf, name).lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{name}: {value!r} is not a boolean. Valid values are: true, false")
    return value == "true"


def _providers(conf: Mapping[str, str], name: str) -> tuple[str, ...]:
    kinds = []
    for item in filter(None, (c.strip() for c in re.split(r"[,\s]+", _get(conf, name)))):
        if item not in PROVIDERS:
            supported = ", ".join(sorted(c.rsplit(".", 1)[1] for c in PROVIDERS))
            raise ConfigError(f"{name} names {item}, which s3commit's sidecar cannot run (it is Python, not the "
                              f"JVM: custom and delegation-token providers are not supported). Supported: {supported}")
        kinds.append(PROVIDERS[item])
    return tuple(kinds)


def _role(conf: Mapping[str, str]) -> AssumedRole:
    arn = _get(conf, "fs.s3a.assumed.role.arn")
    if not arn:
        raise ConfigError("fs.s3a.aws.credentials.provider names AssumedRoleCredentialProvider but "
                          "fs.s3a.assumed.role.arn is not set")
    duration = duration_seconds(_get(conf, "fs.s3a.assumed.role.session.duration"), unit="s",
                              what="fs.s3a.assumed.role.session.duration")
    if not 900 <= duration <= 43200:
        raise ConfigError(f"fs.s3a.assumed.role.session.duration: {int(duration)} s is outside STS's 15m..12h")
    inner = _providers(conf, "fs.s3a.assumed.role.credentials.provider")
    if "assumed-role" in inner:
        raise ConfigError("fs.s3a.assumed.role.credentials.provider may not name AssumedRoleCredentialProvider")
    return AssumedRole(arn=arn, duration=int(duration),
                       session_name=_get(conf, "fs.s3a.assumed.role.session.name") or None,
                       external_id=_get(conf, "fs.s3a.assumed.role.external.id") or None,
                       policy=_get(conf, "fs.s3a.assumed.role.policy") or None,
                       sts_endpoint=endpoint_url(_get(conf, "fs.s3a.assumed.role.sts.endpoint"),
                                                 secure=_bool(conf, "fs.s3a.connection.ssl.enabled")),
                       sts_region=_get(conf, "fs.s3a.assumed.role.sts.endpoint.region") or None,
                       providers=inner)


def _proxy(conf: Mapping[str, str]) -> Proxy | None:
    host, port = _get(conf, "fs.s3a.proxy.host"), _get(conf, "fs.s3a.proxy.port")
    user, password = _get(conf, "fs.s3a.proxy.username"), _get(conf, "fs.s3a.proxy.password")
    if not host:
        if port:
            raise ConfigError("fs.s3a.proxy.port is set without fs.s3a.proxy.host")
        return None
    if bool(user) != bool(password):
        raise ConfigError("fs.s3a.proxy.username and fs.s3a.proxy.password must be set together")
    secure = _bool(conf, "fs.s3a.proxy.ssl.enabled")
    if port and not port.isdigit():
        raise ConfigError(f"fs.s3a.proxy.port: {port!r} is not a port number")
    return Proxy(host=host, port=int(port) if port else (443 if secure else 80), username=user or None,
                 password=password or None, secure=secure)


def endpoint_url(endpoint: str, *, secure: bool) -> str | None:
    """An endpoint as botocore takes it: a URL as given; a bare ``host[:port]`` over HTTPS, or HTTP where
    ``fs.s3a.connection.ssl.enabled`` is false (S3A's rule)."""
    if not endpoint:
        return None
    return endpoint if "://" in endpoint else f"{'https' if secure else 'http'}://{endpoint}"


def connection_fields(conf: Mapping[str, str]) -> dict[str, Any]:
    """The :class:`~s3commit.config.options.StoreOptions` fields these keys set: ``endpoint_url`` (with
    ``fs.s3a.endpoint``), ``use_ssl``, ``proxy``, ``max_pool_connections``, ``connect_timeout``,
    ``read_timeout`` and ``credentials`` (None: S3A's keys if set, else boto3's chain)."""
    secure = _bool(conf, "fs.s3a.connection.ssl.enabled")
    maximum = _get(conf, "fs.s3a.connection.maximum")
    if not maximum.isdigit() or int(maximum) < 1:
        raise ConfigError(f"fs.s3a.connection.maximum: {maximum!r} is not a positive number")
    connect, read, request = (duration_seconds(_get(conf, f"fs.s3a.connection.{name}"), unit="ms",
                                             what=f"fs.s3a.connection.{name}")
                              for name in ("establish.timeout", "timeout", "request.timeout"))
    if connect <= 0 or read <= 0:
        raise ConfigError("fs.s3a.connection.establish.timeout and fs.s3a.connection.timeout must be above 0")
    kinds = _providers(conf, "fs.s3a.aws.credentials.provider")
    credentials = None
    if kinds:
        credentials = CredentialChain(providers=kinds, profile=_get(conf, "fs.s3a.auth.profile.name") or None,
                                      profile_file=_get(conf, "fs.s3a.auth.profile.file") or None,
                                      role=_role(conf) if "assumed-role" in kinds else None)
    return {"endpoint_url": endpoint_url(str(conf.get("fs.s3a.endpoint", "")).strip(), secure=secure),
            "use_ssl": secure, "proxy": _proxy(conf), "max_pool_connections": int(maximum),
            "connect_timeout": connect, "read_timeout": min(read, request) if request > 0 else read,
            "credentials": credentials}
