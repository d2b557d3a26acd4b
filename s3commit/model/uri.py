"""S3 URIs: parsing ``s3://`` / ``s3a://`` destinations into bucket and key.

Pure: no I/O. Keys never start with ``/``; a destination at the bucket root has key ``""``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from s3commit.errors import ConfigError

SCHEMES = ("s3", "s3a")
"""URI schemes accepted for destinations; ``s3a`` is Hadoop's name for the same store."""


@dataclass(frozen=True)
class S3Uri:
    """A bucket and a key (without leading or trailing slash)."""

    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, uri: str) -> S3Uri:
        """Parse ``s3://bucket/key`` or ``s3a://bucket/key``.

        Raises:
            ConfigError: the scheme is not s3/s3a, or the bucket is missing.
        """
        if not isinstance(uri, str) or not uri:
            raise ConfigError(f"destination must be an s3:// or s3a:// URI, got {uri!r}")
        parts = urlsplit(uri)
        if parts.scheme not in SCHEMES:
            raise ConfigError(
                f"destination {uri!r} has scheme {parts.scheme or '(none)'!r}; valid schemes are: s3, s3a"
            )
        if not parts.netloc:
            raise ConfigError(f"destination {uri!r} names no bucket")
        key = parts.path.strip("/")
        if parts.query:
            raise ConfigError(f"destination {uri!r} must not carry a query string")
        return cls(parts.netloc, key)

    @classmethod
    def from_location(cls, location: str) -> S3Uri:
        """Split ``scheme://bucket/key`` literally: the key may hold ``#``, ``?`` or ``%`` (Hadoop paths
        arrive decoded from the JVM, so no URL parsing applies)."""
        scheme, sep, rest = location.partition("://")
        if not sep or scheme not in SCHEMES:
            raise ConfigError(f"{location!r} is not an s3:// or s3a:// location")
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise ConfigError(f"{location!r} names no bucket")
        return cls(bucket, key.strip("/"))

    @property
    def prefix(self) -> str:
        """The key with a trailing ``/``: everything under the destination starts with it."""
        return f"{self.key}/" if self.key else ""

    def child(self, relative: str) -> S3Uri:
        """The URI of ``relative`` (a ``/``-separated path) under this one."""
        relative = relative.strip("/")
        if not relative:
            return self
        return S3Uri(self.bucket, f"{self.prefix}{relative}")

    def contains_key(self, key: str) -> bool:
        """True if ``key`` lies strictly under this URI's key."""
        return key.startswith(self.prefix) and len(key) > len(self.prefix)

    def relative(self, key: str) -> str:
        """The part of ``key`` under this URI (``key`` must lie under it)."""
        if not self.contains_key(key):
            raise ValueError(f"key {key!r} is not under {self}")
        return key[len(self.prefix):]

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"
