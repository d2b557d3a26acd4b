"""Configuration: what users set, every knob defined once with its default and what it risks.

:mod:`.options` holds the keys (:data:`KEYS`), :class:`StoreOptions` and :class:`CommitterOptions`;
:mod:`.connection` how the store reaches S3 beyond endpoint and keys (credential providers, TLS, proxies,
timeouts); :mod:`.s3a_keys` what s3commit does with each of S3A's keys; :mod:`.jvm_streams` how the JVM's
``s3a://`` streams read and buffer; :mod:`.local_cache` where s3commit's cache directory is on this host. Pure:
parsing and validation, no I/O.

May import: :mod:`s3commit.model`, :mod:`s3commit.errors`.
"""

from s3commit.config.options import (
    KEYS,
    MIB,
    CommitterName,
    CommitterOptions,
    ConflictMode,
    Key,
    LeaseMode,
    RetryPolicy,
    StoreOptions,
    TrackUploads,
)

__all__ = ["KEYS", "MIB", "CommitterName", "CommitterOptions", "ConflictMode", "Key", "LeaseMode", "RetryPolicy",
           "StoreOptions", "TrackUploads"]
