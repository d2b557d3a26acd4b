"""The store's boto3 client, built from :class:`~s3commit.config.options.StoreOptions`: S3A's credential providers onto
botocore's, an assumed role through STS, the proxy, TLS, pool and timeouts onto botocore's ``Config``.

Only :class:`s3commit.store.s3store.S3Store` calls :func:`build_s3_client`; nothing here sends an S3 request. A
credential chain (``fs.s3a.aws.credentials.provider``) is resolved as S3A resolves it: each provider in order, the first
that has credentials wins; ``anonymous`` ends the chain with unsigned requests; an assumed role calls STS with
the credentials of its own chain and refreshes before the session expires. botocore makes one attempt per
request, STS's included: retries belong to the store (:mod:`s3commit.store.retry`).
"""

from __future__ import annotations

import functools
import getpass
import logging
import os
import re
from datetime import datetime, timezone
from typing import Any, cast

from s3commit.config.connection import AssumedRole, CredentialChain
from s3commit.config.options import StoreOptions
from s3commit.store import redact, signing

log = logging.getLogger(__name__)

_RESOLVER_METHODS = {
    "environment": ("env",),
    "instance": ("container-role", "iam-role"),
    "ec2": ("iam-role",),
    "container": ("container-role",),
    "web-identity": ("assume-role-with-web-identity",),
    "sdk-profile": ("assume-role", "sso", "shared-credentials-file", "login", "custom-process", "config-file"),
}
"""A provider kind -> the providers of botocore's default chain (by ``METHOD``) that do its work."""


def build_s3_client(options: StoreOptions) -> Any:
    """A boto3 S3 client for ``options`` (one attempt per request: the store retries)."""
    import boto3
    import botocore
    import botocore.exceptions
    import botocore.session

    redact.install((options.access_key, options.secret_key, options.session_token,
                    options.proxy.password if options.proxy else None))
    unsigned = False
    core = botocore.session.Session()
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
    if options.credentials is None:
        session = boto3.session.Session(aws_access_key_id=options.access_key,
                                        aws_secret_access_key=options.secret_key,
                                        aws_session_token=options.session_token, region_name=options.region,
                                        botocore_session=core)
    else:
        if options.region:
            core.set_config_variable("region", options.region)
        core.set_default_client_config(client_config(options))  # STS clients too: proxy, timeouts, one attempt
        credentials = _resolve(options.credentials, options, core)
        unsigned = credentials is None and "anonymous" in options.credentials.providers
        if credentials is None and not unsigned:
            raise botocore.exceptions.CredentialRetrievalError(
                provider="fs.s3a.aws.credentials.provider", error_msg="none of its providers ("
                + ", ".join(options.credentials.providers) + ") found credentials")
        core.register_component("credential_provider", _Resolved(credentials))  # the chain's answer, or none
        session = boto3.session.Session(botocore_session=core)
    config = client_config(options, s3={"addressing_style": "path" if options.path_style else "auto"},
                           # botocore adds no checksum of its own (some S3-compatible stores reject them)
                           request_checksum_calculation="when_required",
                           response_checksum_validation="when_required",
                           **signing.config_options())  # botocore's SigV4 signer, not the CRT's (see the module)
    if unsigned:
        config = config.merge(botocore.config.Config(signature_version=botocore.UNSIGNED))
    return session.client("s3", endpoint_url=options.endpoint_url, use_ssl=options.use_ssl, config=config)


def parse_timestamp(value: str) -> datetime:
    """A timestamp of an S3 answer, for botocore's parsers: S3's ISO 8601 form (``2026-11-29T08:56:01.000Z``, every
    key of a listing) by ``datetime.fromisoformat``, 1/250th of the CPU of botocore's own parser (dateutil's), which
    was half the client's CPU when an overwrite listed 100,000 old files; any other form (an HTTP date, epoch
    seconds) by botocore's. Aware, in UTC, either way."""
    if isinstance(value, str) and len(value) >= 19 and value[10] == "T":
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)
    from botocore.utils import parse_timestamp as botocore_parse

    return cast(datetime, botocore_parse(value))


def client_config(options: StoreOptions, **extra: Any) -> Any:
    """botocore's ``Config`` for ``options``: one attempt, the pool, the timeouts, the proxy."""
    from botocore.config import Config

    proxy = options.proxy.url() if options.proxy else None
    return Config(retries={"total_max_attempts": 1, "mode": "standard"},  # tenacity is the one retry owner
                  max_pool_connections=connections(options), connect_timeout=options.connect_timeout,
                  read_timeout=options.read_timeout, proxies={"http": proxy, "https": proxy} if proxy else None,
                  **extra)


def connections(options: StoreOptions) -> int:
    """The client's connection pool: ``fs.s3a.connection.maximum``, or as many connections as the adaptive limit lets
    requests be in flight to a prefix (:mod:`s3commit.store.concurrency`) if that is more, so that a job commit's
    Completes in flight each keep a connection (urllib3 would open and discard the ones past the pool)."""
    if options.concurrency_adaptive:
        return max(options.max_pool_connections, options.concurrency_max)
    return options.max_pool_connections


class _Resolved:
    """A botocore credential resolver answering credentials already resolved."""

    def __init__(self, credentials: Any) -> None:
        self._credentials = credentials

    def load_credentials(self) -> Any:
        return self._credentials


def _resolve(chain: CredentialChain, options: StoreOptions, core: Any, kinds: tuple[str, ...] | None = None) -> Any:
    """The credentials of the first provider of ``kinds`` (``chain.providers``) that has some, or None (none did,
    or the chain reached ``anonymous``)."""
    from botocore.credentials import create_credential_resolver

    default = create_credential_resolver(core)
    for kind in chain.providers if kinds is None else kinds:
        if kind == "anonymous":
            return None
        found = _from_provider(kind, chain, options, core, default)
        if found is not None:
            log.debug("s3commit: credentials from the %s provider", kind)
            return found
    return None


def _from_provider(kind: str, chain: CredentialChain, options: StoreOptions, core: Any, default: Any) -> Any:
    from botocore.credentials import Credentials, SharedCredentialProvider

    if kind in ("simple", "temporary"):
        token_needed = kind == "temporary"
        if options.access_key and options.secret_key and (options.session_token or not token_needed):
            return Credentials(options.access_key, options.secret_key,
                               options.session_token if token_needed else None, method=kind)
        return None
    if kind == "default":
        return default.load_credentials()
    if kind == "profile":  # Hadoop's ProfileAWSCredentialsProvider: a credentials file's profile
        path = chain.profile_file or os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
        name = chain.profile or os.environ.get("AWS_PROFILE") or "default"
        return SharedCredentialProvider(os.path.expanduser(path), name).load()
    if kind == "assumed-role":
        assert chain.role is not None  # connection.connection_fields sets it with the kind
        return _assumed_role(chain.role, chain, options, core)
    for provider in default.providers:
        if provider.METHOD in _RESOLVER_METHODS[kind]:
            found = provider.load()
            if found is not None:
                return found
    return None


def _assumed_role(role: AssumedRole, chain: CredentialChain, options: StoreOptions, core: Any) -> Any:
    """Refreshable credentials of ``role``, from STS AssumeRole called with the role's own provider chain."""
    from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials
    from botocore.exceptions import ClientError, CredentialRetrievalError, ParamValidationError

    source = _resolve(chain, options, core, role.providers)
    if source is None:
        raise CredentialRetrievalError(
            provider="assume-role", error_msg=f"no credentials to call STS AssumeRole for {role.arn} with "
            "(fs.s3a.assumed.role.credentials.provider found none)")
    extra: dict[str, Any] = {"RoleSessionName": role.session_name or session_name(),
                             "DurationSeconds": role.duration}
    if role.external_id:
        extra["ExternalId"] = role.external_id
    if role.policy:
        extra["Policy"] = role.policy
    sts = functools.partial(core.create_client, region_name=role.sts_region or options.region,
                            endpoint_url=role.sts_endpoint, config=client_config(options))
    fetcher = AssumeRoleCredentialFetcher(sts, source, role.arn, extra_args=extra)

    def fetch() -> Any:
        try:
            return fetcher.fetch_credentials()
        except (ClientError, ParamValidationError) as err:  # STS (or botocore) refused: a bad role or caller
            raise CredentialRetrievalError(provider="assume-role", error_msg=(
                f"STS AssumeRole of {role.arn} (fs.s3a.assumed.role.arn) failed: {err}")) from err

    return DeferredRefreshableCredentials(refresh_using=fetch, method="assume-role")


def session_name() -> str:
    """S3A's default role session name: the user's name, with what STS refuses replaced by ``-``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container user with no passwd entry
        user = "s3commit"
    return re.sub(r"[^\w+=,.@-]", "-", user)[:64].ljust(2, "-")
