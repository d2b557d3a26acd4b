"""What is known of each store: its capabilities probed at most once per endpoint and bucket per process, kept in
memory and in a small file on local disk for a bounded age (``s3commit.capabilities.cache``, a day by default),
and handed to the store that asks (:attr:`S3Store.capabilities <s3commit.store.s3store.S3Store.capabilities>`).

The endpoint is the one the store's client resolved, as boto3 resolves it (an explicit option or
``fs.s3a.endpoint``, ``AWS_ENDPOINT_URL``, a profile's ``endpoint_url``, AWS's default), never only the option.
A job adds no request when the cache is warm. Processes on one host probing one store at once wait for the first
(a file lock), then read what it found. The directory is ``$S3COMMIT_CAPABILITIES_DIR``, else
``$XDG_CACHE_HOME/s3commit/capabilities`` (``~/.cache/...``); files older than their age are pruned when another
is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from s3commit.config.local_cache import user_cache_dir
from s3commit.errors import ManifestError, S3CommitError
from s3commit.store import moto_inprocess
from s3commit.store.capabilities import Capabilities, Outcome
from s3commit.store.probe import endpoint_of, probe
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

DIR_ENV = "S3COMMIT_CAPABILITIES_DIR"
"""Where capability files are kept (default: the user's cache directory)."""

IN_PROCESS_MOCK = "moto-in-process+"
"""Prefix of the endpoint under which what moto's in-process mock honours is known (memory only)."""
UNSURE_FOR = 300.0
"""Seconds a probe in which some check could not tell is trusted (in memory only): the next job asks again."""

_memory: dict[tuple[str, str], Capabilities] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_guard = threading.Lock()


def cache_dir() -> Path:
    """``$S3COMMIT_CAPABILITIES_DIR``, else ``capabilities/`` in s3commit's cache directory
    (:func:`~s3commit.config.local_cache.user_cache_dir`)."""
    configured = os.environ.get(DIR_ENV)
    if configured:
        return Path(configured)
    return user_cache_dir() / "capabilities"


def cache_file(endpoint: str, bucket: str) -> Path:
    """The file holding what is known of ``bucket`` at ``endpoint``."""
    digest = hashlib.sha256(f"{endpoint}|{bucket}".encode()).hexdigest()[:24]
    return cache_dir() / f"{digest}.json"


def _unsure(found: Capabilities) -> bool:
    """Some check could not tell (a 500, a timeout): kept in memory for a few minutes only, never on disk."""
    return any(finding.outcome is Outcome.FAILED for finding in found.findings.values())


def _fresh(found: Capabilities | None, max_age: float, *, disk: bool = False) -> Capabilities | None:
    if found is None:
        return None
    unsure = _unsure(found)
    if disk and (max_age <= 0 or unsure):
        return None
    limit = UNSURE_FOR if unsure else max_age
    if limit <= 0:  # nothing kept on disk; in memory for the life of the process
        return found
    return found if time.time() - found.probed_at <= limit else None


def _read(endpoint: str, bucket: str, max_age: float) -> Capabilities | None:
    path = cache_file(endpoint, bucket)
    try:
        found = Capabilities.from_json(path.read_bytes(), source=str(path))
    except FileNotFoundError:
        return None
    except (OSError, ManifestError) as err:
        log.warning("ignoring the capabilities cached in %s: %s", path, err)
        return None
    if (found.endpoint, found.bucket) != (endpoint, bucket):
        return None
    return _fresh(found, max_age, disk=True)


def _write(found: Capabilities, max_age: float) -> None:
    if max_age <= 0 or _unsure(found):
        return
    path = cache_file(found.endpoint, found.bucket)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(found.to_json())
        os.replace(partial, path)
        _prune(path.parent, max_age)
    except OSError as err:  # a read-only home: the process still knows, in memory
        log.warning("could not keep the store's capabilities in %s: %s", path, err)


def _prune(directory: Path, max_age: float) -> None:
    cutoff = time.time() - max(max_age, 86400.0)
    for old in directory.glob("*.json"):
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff:
                old.unlink()


@contextlib.contextmanager
def _host_lock(endpoint: str, bucket: str) -> Iterator[None]:
    """Held while one process on this host probes a store: the others wait and then read its file."""
    path = cache_file(endpoint, bucket).with_suffix(".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _lock_for(key: tuple[str, str]) -> threading.Lock:
    with _guard:
        return _locks.setdefault(key, threading.Lock())


def known(store: S3Store, bucket: str, *, prefix: str = "", refresh: bool = False) -> Capabilities | None:
    """What the store behind ``store`` honours for ``bucket``: from memory, from the disk cache while younger than
    ``store.options.capabilities_max_age``, else probed (in ``prefix``, a key prefix the caller may write) and
    kept. ``refresh`` always probes anew. Sets ``store.capabilities[bucket]``.

    Returns None when the store could not be probed at all (unreachable, no such bucket: the caller's own requests
    will say so); the store then decides as for an unknown store (the safe way).
    """
    max_age = store.options.capabilities_max_age
    have = store.capabilities.get(bucket)
    if not refresh and _fresh(have, max_age) is not None:
        return have
    endpoint = endpoint_of(store)
    if moto_inprocess.answered_here(store.requests.client):
        # moto's in-process mock answers for AWS's endpoint: what it honours must never be taken for AWS's, so it is
        # known in memory only, apart from the real endpoint's.
        endpoint, max_age = f"{IN_PROCESS_MOCK}{endpoint}", 0.0
    key = (endpoint, bucket)
    with _lock_for(key):
        found = None if refresh else _fresh(_memory.get(key), max_age) or _read(endpoint, bucket, max_age)
        if found is None:
            with _host_lock(endpoint, bucket):
                found = None if refresh else _read(endpoint, bucket, max_age)
                if found is None:
                    try:
                        found = probe(store, bucket, prefix)
                    except S3CommitError as err:
                        log.warning("could not probe what s3://%s at %s honours (s3commit acts as for an unknown "
                                    "store): %s", bucket, endpoint, err)
                        return None
                    _write(found, max_age)
        _memory[key] = found
    store.capabilities[bucket] = found
    return found


def remember(found: Capabilities, *, max_age: float = 86400.0) -> None:
    """Keep ``found`` as what is known of its endpoint and bucket (in memory and on disk), as a probe would."""
    with _lock_for((found.endpoint, found.bucket)):
        _memory[(found.endpoint, found.bucket)] = found
        _write(found, max_age)


def forget() -> None:
    """Drop what this process knows in memory (the disk cache stays)."""
    with _guard:
        _memory.clear()
