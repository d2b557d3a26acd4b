"""Everything under a prefix: its keys, and deleting them in batches (keeping what the caller names).

``delete_prefix`` is how job directories and attempt directories go: one LIST, then DeleteObjects in batches of
1,000 (the store's); ``delete_listed`` deletes as listed, each key conditional on the ETag listed where the store
honours it (an overwrite's: :class:`~s3commit.commit.overwrite.OldObjects`, which lists in key ranges ahead of its
deletes). A prefix ends with ``/`` (or is the bucket root), so that ``a/b`` never takes ``a/bc`` with it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from s3commit.errors import NotFoundError, PreconditionFailedError
from s3commit.model.object_info import ObjectInfo
from s3commit.store.objects import DELETE_BATCH
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import Item, map_ordered, run_each, window_for

DELETES_IN_FLIGHT = 8
"""DeleteObjects (1,000 keys each) sent at once beside the listing that finds their keys (one at a time, 100,000
old files took 100 round trips after 100 pages of listing, each waiting for the other)."""


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
                  pool: ThreadPoolExecutor | None = None, listed: Iterable[ObjectInfo] | None = None
                  ) -> tuple[int, list[str]]:
    """Delete every object under ``prefix`` except ``keep`` (and keys ``skip`` selects) as listed; returns how many
    were deleted, and the keys kept because they changed since the listing.

    ``conditional``: ``""`` deletes in batches of 1,000 whatever each key holds now; ``"batch"`` sends each key of a
    batch with the ETag listed (DeleteObjects), ``"single"`` one conditional DELETE per key on ``pool`` (a store
    that honours ``If-Match`` on DELETE only): a key replaced since the listing is kept. ``prefix`` must end with
    ``/`` or be ``""`` (the bucket root) so that ``a/b`` never matches ``a/bc``. ``listed``: the listing of
    ``prefix`` the caller started already (:func:`list_ahead`). ``pool``: with ``"single"`` the DELETEs go there;
    otherwise :data:`DELETES_IN_FLIGHT` batches go there at once while the listing goes on. (An overwrite's
    listing in key ranges, ahead of its deletes: :class:`~s3commit.commit.overwrite.OldObjects`.)
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError(f"prefix {prefix!r} must end with '/'")

    def doomed(listing: Iterable[ObjectInfo]) -> Iterator[ObjectInfo]:
        return (info for info in listing if info.key not in keep and not (skip is not None and skip(info.key)))

    if conditional == "single":
        return delete_singly(store, bucket, ((info.key, info.etag) for info in doomed(
            store.objects.list_objects(bucket, prefix) if listed is None else listed)), pool)
    if conditional == "batch":
        def delete(batch: list[ObjectInfo]) -> tuple[int, list[str]]:
            return store.conditional.delete_objects_if_match(bucket, ((info.key, info.etag) for info in batch))
    else:
        def delete(batch: list[ObjectInfo]) -> tuple[int, list[str]]:
            return store.objects.delete_objects(bucket, (info.key for info in batch)), []
    batches = batched(doomed(store.objects.list_objects(bucket, prefix) if listed is None else listed), DELETE_BATCH)
    # With a pool, DELETES_IN_FLIGHT batches at once while the listing goes on; the first failure is raised,
    # batches already sent finish.
    return summed((delete(batch) for batch in batches) if pool is None
                  else (future.result() for _, future in map_ordered(pool, batches, delete, window=DELETES_IN_FLIGHT)))


def summed(results: Iterable[tuple[int, list[str]]]) -> tuple[int, list[str]]:
    """Deletes' ``(deleted, keys kept because they changed)`` added up."""
    deleted, changed = 0, []
    for gone, kept in results:
        deleted += gone
        changed.extend(kept)
    return deleted, changed


def delete_singly(store: S3Store, bucket: str, doomed: Iterable[tuple[str, str]],
                  pool: ThreadPoolExecutor | None) -> tuple[int, list[str]]:
    """One conditional DELETE per ``(key, etag)`` (a store that honours ``If-Match`` on DELETE only), on ``pool``
    where given; returns how many were deleted and the keys kept because they changed."""
    changed: list[str] = []
    lock = threading.Lock()

    def delete(item: tuple[str, str]) -> None:
        key, etag = item
        try:
            store.conditional.delete_if_match(bucket, key, etag)
        except PreconditionFailedError:
            with lock:
                changed.append(key)
        except NotFoundError:
            pass

    work = list(doomed)
    if pool is None:
        for item in work:
            delete(item)
    else:
        failures = run_each(pool, work, delete, window=window_for(getattr(pool, "_max_workers", 8)))
        if failures:
            raise failures[0].error
    return len(work) - len(changed), changed


def batched(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    """``items`` in lists of ``size`` (the last shorter)."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch
