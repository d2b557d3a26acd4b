"""Everything under a prefix: its keys, and deleting them in batches (keeping what the caller names).

``delete_prefix`` is how job directories and attempt directories go: one LIST, then DeleteObjects in batches of
1,000 (the store's); ``delete_listed`` is how overwritten data goes, each key conditional on the ETag listed where
the store honours it. A prefix ends with ``/`` (or is the bucket root), so that
``a/b`` never takes ``a/bc`` with it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from s3commit.errors import NotFoundError, PreconditionFailedError
from s3commit.model.object_info import ObjectInfo
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import run_each, window_for


def keys_under(store: S3Store, bucket: str, prefix: str) -> Iterator[str]:
    """Every key under ``prefix`` (paginated LIST), in S3's order."""
    for info in store.objects.list_objects(bucket, prefix):
        yield info.key


def list_ahead(store: S3Store, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
    """The objects under ``prefix`` with the first page's LIST sent now (a listing started beside another request,
    so that its round trip is not added to the caller's); later pages as the caller iterates."""
    listing = iter(store.objects.list_objects(bucket, prefix))
    first = next(listing, None)
    return listing if first is None else itertools.chain([first], listing)


def delete_prefix(store: S3Store, bucket: str, prefix: str, *, keep: Collection[str] = (),
                  skip: Callable[[str], bool] | None = None, listed: Iterable[ObjectInfo] | None = None) -> int:
    """Delete every object under ``prefix`` except ``keep`` (and keys ``skip`` selects), in batches; returns how
    many. ``prefix`` must end with ``/`` or be ``""`` (the bucket root) so that ``a/b`` never matches ``a/bc``.
    ``listed``: the listing of ``prefix`` the caller started already (:func:`list_ahead`)."""
    return delete_listed(store, bucket, prefix, keep=keep, skip=skip, listed=listed)[0]


def delete_listed(store: S3Store, bucket: str, prefix: str, *, keep: Collection[str] = (),
                  skip: Callable[[str], bool] | None = None, conditional: str = "",
                  pool: ThreadPoolExecutor | None = None,
                  listed: Iterable[ObjectInfo] | None = None) -> tuple[int, list[str]]:
    """Delete every object under ``prefix`` except ``keep`` (and keys ``skip`` selects) as listed; returns how many
    were deleted, and the keys kept because they changed since the listing.

    ``conditional``: ``""`` deletes in batches of 1,000 whatever each key holds now; ``"batch"`` sends each key of a
    batch with the ETag listed (DeleteObjects), ``"single"`` one conditional DELETE per key on ``pool`` (a store
    that honours ``If-Match`` on DELETE only): a key replaced since the listing is kept. ``prefix`` must end with
    ``/`` or be ``""`` (the bucket root) so that ``a/b`` never matches ``a/bc``. ``listed``: the listing of
    ``prefix`` the caller started already (:func:`list_ahead`).
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError(f"prefix {prefix!r} must end with '/'")
    listing = store.objects.list_objects(bucket, prefix) if listed is None else listed
    doomed = (info for info in listing
                      if info.key not in keep and not (skip is not None and skip(info.key)))
    if conditional == "batch":
        return store.conditional.delete_objects_if_match(bucket, ((info.key, info.etag) for info in doomed))
    if conditional == "single":
        changed: list[str] = []
        lock = threading.Lock()

        def delete(info: ObjectInfo) -> None:
            try:
                store.conditional.delete_if_match(bucket, info.key, info.etag)
            except PreconditionFailedError:
                with lock:
                    changed.append(info.key)
            except NotFoundError:
                pass

        work = list(doomed)
        if pool is None:
            for info in work:
                delete(info)
        else:
            failures = run_each(pool, work, delete, window=window_for(getattr(pool, "_max_workers", 8)))
            if failures:
                raise failures[0].error
        return len(work) - len(changed), changed
    return store.objects.delete_objects(bucket, (info.key for info in doomed)), []
