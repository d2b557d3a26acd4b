"""Everything under a prefix: its keys, and deleting them in batches (keeping what the caller names).

``delete_prefix`` is how job directories and attempt directories go: one LIST, then DeleteObjects in batches of
1,000 (the store's); ``delete_listed`` is how overwritten data goes, each key conditional on the ETag listed where
the store honours it, the prefix listed in key ranges at once where the caller gives the keys it keeps (the job's
files: :data:`RANGES`). A prefix ends with ``/`` (or is the bucket root), so that
``a/b`` never takes ``a/bc`` with it.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from s3commit.errors import NotFoundError, PreconditionFailedError
from s3commit.model.object_info import ObjectInfo
from s3commit.store.objects import DELETE_BATCH
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import map_ordered, run_each, window_for

RANGES = 16
"""Key ranges of one prefix an overwrite lists, and deletes from, at once, split at the keys it keeps: the listing of
a table's 100,000 old and 100,000 new files is otherwise 200 pages one after another (13 s of an overwrite that
completed its files in 21 s)."""

DELETES_IN_FLIGHT = 8
"""An overwrite's DeleteObjects (1,000 keys each) sent at once, beside the listing that finds their keys: one at a
time, 100,000 old files took 100 round trips after 100 pages of listing, each waiting for the other."""


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
                  pool: ThreadPoolExecutor | None = None, listed: Iterable[ObjectInfo] | None = None,
                  kept_in_order: Sequence[str] = ()) -> tuple[int, list[str]]:
    """Delete every object under ``prefix`` except ``keep`` (and keys ``skip`` selects) as listed; returns how many
    were deleted, and the keys kept because they changed since the listing.

    ``conditional``: ``""`` deletes in batches of 1,000 whatever each key holds now; ``"batch"`` sends each key of a
    batch with the ETag listed (DeleteObjects), ``"single"`` one conditional DELETE per key on ``pool`` (a store
    that honours ``If-Match`` on DELETE only): a key replaced since the listing is kept. ``prefix`` must end with
    ``/`` or be ``""`` (the bucket root) so that ``a/b`` never matches ``a/bc``. ``listed``: the listing of
    ``prefix`` the caller started already (:func:`list_ahead`). ``kept_in_order``: ``keep`` sorted, where the caller
    has it so: with a ``pool``, the prefix is then listed in :data:`RANGES` ranges split at them, at once.
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError(f"prefix {prefix!r} must end with '/'")

    def doomed(listing: Iterable[ObjectInfo]) -> Iterator[ObjectInfo]:
        return (info for info in listing if info.key not in keep and not (skip is not None and skip(info.key)))

    if conditional == "single":
        return _delete_singly(store, bucket, doomed(
            store.objects.list_objects(bucket, prefix) if listed is None else listed), pool)
    gate = DeleteGate(store, bucket, prefix)
    if conditional == "batch":
        def delete(batch: list[ObjectInfo]) -> tuple[int, list[str]]:
            with gate:
                return store.conditional.delete_objects_if_match(bucket, ((info.key, info.etag) for info in batch))
    else:
        def delete(batch: list[ObjectInfo]) -> tuple[int, list[str]]:
            with gate:
                return store.objects.delete_objects(bucket, (info.key for info in batch)), []
    ranges = _ranges(prefix, kept_in_order, RANGES) if pool is not None and listed is None else [(None, None)]
    if len(ranges) > 1:
        # Each range listed from the kept key that starts it to the one that ends it (both kept: neither is
        # deleted), its batches deleted as it goes; RANGES at once, the first failure raised.
        def one(bounds: tuple[str | None, str | None]) -> tuple[int, list[str]]:
            return _summed(delete(batch) for batch in _batched(doomed(_listed_range(store, bucket, prefix, *bounds)),
                                                                DELETE_BATCH))
        assert pool is not None
        return _summed(future.result() for _, future in map_ordered(pool, ranges, one, window=RANGES))
    batches = _batched(doomed(store.objects.list_objects(bucket, prefix) if listed is None else listed), DELETE_BATCH)
    # With a pool, DELETES_IN_FLIGHT batches at once while the listing goes on (the store's adaptive limit of the
    # prefix has the last word under throttling); the first failure is raised, batches already sent finish.
    return _summed((delete(batch) for batch in batches) if pool is None
                   else (future.result() for _, future in map_ordered(pool, batches, delete, window=DELETES_IN_FLIGHT)))


class DeleteGate:
    """How many of an overwrite's DeleteObjects go at once: :data:`DELETES_IN_FLIGHT`, and one at a time from the
    first throttling answer the store gives (to anything) after the gate was made, or from the start where the
    prefix's adaptive limit is below its ceiling (throttled lately).

    A DeleteObjects of 1,000 keys is 1,000 of S3's 3,500 writes a second per prefix, while the adaptive limit
    counts requests: several sent at once to a throttling prefix are each retried, and they wear out their
    attempts against each other before the limit comes down to one (measured: 16 at once failed an overwrite of
    100,000 files at 3,500 writes a second, where one at a time ends at 1.04x its floor)."""

    def __init__(self, store: S3Store, bucket: str, prefix: str) -> None:
        self._counters = store.counters
        self._throttles = self._throttled()
        state = store.requests.limit(bucket, prefix).state()
        self._most = 1 if state.limit < state.ceiling else DELETES_IN_FLIGHT
        self._running = 0
        self._changed = threading.Condition()

    def _throttled(self) -> int:
        return sum(self._counters.snapshot()["throttles"].values())

    def __enter__(self) -> None:
        with self._changed:
            if self._most > 1 and self._throttled() > self._throttles:
                self._most = 1
            self._changed.wait_for(lambda: self._running < self._most)
            self._running += 1

    def __exit__(self, *_: object) -> None:
        with self._changed:
            self._running -= 1
            self._changed.notify_all()


def _ranges(prefix: str, in_order: Sequence[str], most: int) -> list[tuple[str | None, str | None]]:
    """Up to ``most`` ranges of the keys under ``prefix``, split at kept keys (``in_order``: sorted) evenly spaced
    in S3's order (a code point's order is its UTF-8 bytes' order): ``(after, before)``, None at either end."""
    first = bisect.bisect_left(in_order, prefix)
    end = bisect.bisect_left(in_order, prefix + "\U0010ffff", first)  # (past the prefix's: splits only)
    inside = in_order[first:end]
    count = min(most, len(inside) + 1)
    bounds: list[str | None] = [None, *dict.fromkeys(inside[len(inside) * n // count] for n in range(1, count)), None]
    return list(itertools.pairwise(bounds))


def _listed_range(store: S3Store, bucket: str, prefix: str, after: str | None,
                  before: str | None) -> Iterator[ObjectInfo]:
    """The objects under ``prefix`` after ``after`` and before ``before`` (a store that ignores ``start-after``
    lists from the prefix's start: what comes first is passed over)."""
    listing = store.objects.list_objects(bucket, prefix, start_after=after)
    if after is not None:
        listing = itertools.dropwhile(lambda info: info.key <= after, listing)
    return listing if before is None else itertools.takewhile(lambda info: info.key < before, listing)


def _summed(results: Iterable[tuple[int, list[str]]]) -> tuple[int, list[str]]:
    deleted, changed = 0, []
    for gone, kept in results:
        deleted += gone
        changed.extend(kept)
    return deleted, changed


def _delete_singly(store: S3Store, bucket: str, doomed: Iterable[ObjectInfo],
                   pool: ThreadPoolExecutor | None) -> tuple[int, list[str]]:
    """One conditional DELETE per key (a store that honours ``If-Match`` on DELETE only)."""
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


def _batched(items: Iterable[ObjectInfo], size: int) -> Iterator[list[ObjectInfo]]:
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch
