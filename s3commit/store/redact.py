"""Keep credentials out of logs: a filter on the botocore loggers that print requests.

At DEBUG level botocore logs every request it sends (``botocore.endpoint``: headers, including the access
key id in ``Authorization: ... Credential=AKIA.../``, and the session token) and every string it signs
(``botocore.auth``: the canonical request, with ``x-amz-security-token``). A user who turns on DEBUG logging
to debug a job would copy them into log files, and STS's answers (an assumed role's, a web identity's) carry a
secret key and a session token in their bodies. :func:`install` adds :class:`CredentialRedactor` to those
loggers; it replaces access key ids, session tokens, web identity tokens and secret keys with ``***`` (by
pattern, and every credential value a store was built with), and leaves the rest of the message alone.

Filters run only for records that pass the logger's level, so this costs nothing unless DEBUG is on.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

REDACTED = "***"

LOGGERS = (
    "botocore.endpoint", "botocore.auth", "botocore.parsers", "botocore.hooks", "botocore.httpsession",
    "botocore.awsrequest", "botocore.retryhandler", "botocore.credentials", "botocore.client",
    "urllib3.connectionpool",
)
"""Loggers that can print request headers, signed strings, URLs or credential sources."""

_PATTERNS = (
    # Authorization: AWS4-HMAC-SHA256 Credential=<access key id>/<date>/<region>/s3/aws4_request
    (re.compile(r"(Credential=)[^/\s'\",&]+"), r"\1" + REDACTED),
    # presigned URLs: X-Amz-Credential=<key>%2F..., X-Amz-Security-Token=<token>
    (re.compile(r"(?i)(X-Amz-Credential=)[^%/&\s'\"]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(X-Amz-Security-Token=)[^&\s'\"]+"), r"\1" + REDACTED),
    # header dicts ('X-Amz-Security-Token': b'...') and canonical requests (x-amz-security-token:...)
    (re.compile(r"(?i)(x-amz-security-token['\"]?\s*[:=]\s*b?['\"]?)[^'\"\s,}]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)((?:aws_)?(?:secret_access_key|secret_key|session_token|SecretAccessKey|SessionToken"
                r"|WebIdentityToken)['\"]?\s*[:=]\s*b?['\"]?)[^'\"\s,}&]+"), r"\1" + REDACTED),
    # STS's answers (AssumeRole, AssumeRoleWithWebIdentity) as botocore logs their bodies, and its form requests
    (re.compile(r"(<(SecretAccessKey|SessionToken)>)[^<]+"), r"\1" + REDACTED),
    (re.compile(r"(WebIdentityToken=)[^&\s'\"]+"), r"\1" + REDACTED),
)

_MIN_SECRET_LENGTH = 12
"""Registered values shorter than this are not replaced verbatim (they would match ordinary words)."""

_lock = threading.Lock()
_secrets: set[str] = set()


def redact(text: str) -> str:
    """``text`` with credentials replaced by ``***``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


class CredentialRedactor(logging.Filter):
    """Rewrites a record's message with :func:`redact` (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's business, not ours
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_FILTER = CredentialRedactor("s3commit.store.redact")


def install(secrets: Iterable[str | None] = ()) -> None:
    """Add the redactor to :data:`LOGGERS` (once) and remember ``secrets`` to replace verbatim."""
    with _lock:
        _secrets.update(s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
