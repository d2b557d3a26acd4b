"""Overwrite plans: which old objects a job replaces once its new ones are complete, and deleting them.

:class:`OverwritePlan` says what goes (paths under the destination, locations elsewhere in its bucket, the
partitions written); :class:`OldObjects` lists it (in key ranges at once, while the job's files are completed where
the commit starts it ahead) and deletes it once every file of the job is complete, never the keys just committed,
and, where the store honours it (:mod:`s3commit.store.capabilities`), each only if its ETag is still the one listed,
so that an object a writer outside s3commit replaced since the listing is kept.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from s3commit.commit.prefixes import DELETES_IN_FLIGHT, batched, delete_singly, summed
from s3commit.errors import ConfigError
from s3commit.model.paths import partition_of
from s3commit.model.uri import S3Uri
from s3commit.store.objects import DELETE_BATCH
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import map_ordered

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class OverwritePlan:
    """Old data to replace once the new data is complete.

    ``delete_paths``: prefixes (relative to the destination, ``""`` = all of it) whose old objects go.
    ``delete_outside``: directories (keys in the destination's bucket, outside the destination: a custom
    partition location) whose old objects go.
    ``replace_partitions``: also replace every partition directory a committed file landed in (for a file
    written to an absolute directory outside the destination, that directory).
    """

    delete_paths: tuple[str, ...] = ()
    replace_partitions: bool = False
    delete_outside: tuple[str, ...] = ()

    @classmethod
    def of(cls, dest: S3Uri, paths: Iterable[str], *, replace_partitions: bool = False) -> OverwritePlan:
        """The plan deleting ``paths``: each relative to ``dest``, or an ``s3://``/``s3a://`` location in its
        bucket (under ``dest`` or outside it).

        Raises:
            ConfigError: a location in another bucket (its deletion cannot wait for this job's commit).
        """
        relative: list[str] = []
        outside: list[str] = []
        for path in paths:
            if "://" not in path:
                relative.append(path.strip("/"))
                continue
            location = S3Uri.from_location(path)
            if location.bucket != dest.bucket:
                raise ConfigError(f"cannot delete {path} with the job: it is not in the bucket of the "
                                  f"destination {dest}")
            if location.key == dest.key:
                relative.append("")
            elif dest.contains_key(location.key):
                relative.append(dest.relative(location.key))
            else:
                outside.append(location.key)
        return cls(delete_paths=tuple(relative), replace_partitions=replace_partitions,
                   delete_outside=tuple(outside))

    @property
    def deletes(self) -> bool:
        """True if the plan deletes anything."""
        return bool(self.delete_paths or self.delete_outside or self.replace_partitions)

    def prefixes(self, dest: S3Uri, committed_keys: Iterable[str]) -> list[str]:
        """The key prefixes whose old objects go, none nested in another (deleting the parent covers it)."""
        keys = list(committed_keys)
        rels = {p.strip("/") for p in self.delete_paths}
        wanted = {f"{d}/" if d else "" for d in (p.strip("/") for p in self.delete_outside)}
        if self.replace_partitions:
            rels |= {part for k in keys if dest.contains_key(k) and (part := partition_of(dest.relative(k)))}
            wanted |= {f"{k.rpartition('/')[0]}/" for k in keys if not dest.contains_key(k)}
        wanted |= {dest.prefix if r == "" else f"{dest.prefix}{r}/" for r in rels}
        # In sorted order, the prefixes under a kept one follow it directly.
        kept: list[str] = []
        for prefix in sorted(wanted):
            if not kept or not prefix.startswith(kept[-1]):
                kept.append(prefix)
        return kept


RANGES = 16
"""Key ranges an overwrite lists, and deletes from, at once, split at the keys it keeps (a prefix's share of them
where it replaces several): the listing of a table's 100,000 old and 100,000 new files is otherwise 200 pages one
after another (13 s of an overwrite that completed its files in 21 s)."""

LISTERS_AHEAD = 4
"""Threads listing the ranges ahead while the job's files are completed (each range its pages in turn): the listing
has the Completes' whole length to run in, and each listing thread takes the interpreter from the loop the Completes
are answered on (measured, 10,000 files over 10,000 old ones: 16 threads lengthened the Completes by 30-50 ms, 4 by
10-20 ms). The ranges they have not begun when the Completes end are listed then, as many at once as the deletes
have threads."""

AHEAD = 200_000
"""Old objects an overwrite holds listed while its job's files are completed (their keys and ETags: ~60 MB at
most); those past it are listed once the files are complete, as they are deleted."""


class OldObjects:
    """The objects an overwrite deletes: what ``plan`` replaces under ``dest``, except ``keep`` (the job's files)
    and what ``skip`` selects.

    Listed in key ranges split at the kept keys (each range is a page or so of S3's listing where a prefix holds the
    old and the new files interleaved); :meth:`list_ahead` starts that while the job's files are completed
    (:data:`LISTERS_AHEAD` ranges at once), holding up to :data:`AHEAD` of them. :meth:`delete` deletes them once
    every file is complete (never before: a commit that fails leaves the old data whole), then lists and deletes the
    rest: so the
    deletes after the Completes are the DeleteObjects alone, not a listing of old and new files too (an overwrite
    of 100,000 files spent 5 s after its Completes listing 200 pages). What was listed ahead and replaced since by
    a writer outside s3commit is kept where the store honours conditional deletes; what such a writer adds under
    the plan's prefixes after its range was listed is not deleted (a listing after the Completes would have).
    """

    def __init__(self, store: S3Store, dest: S3Uri, plan: OverwritePlan, keep: Collection[str], *,
                 skip: Callable[[str], bool]) -> None:
        self.store, self.dest, self.plan, self.keep, self.skip = store, dest, plan, keep, skip
        known = store.capabilities.get(dest.bucket)
        self.conditional = ("" if known is None else "batch" if known.conditional_batch_deletes
                            else "single" if known.conditional_deletes else "")
        self._prefixes: list[str] | None = None
        self._ranges: list[_Range] | None = None
        self._lock = threading.Lock()
        self._listers: ThreadPoolExecutor | None = None
        self._started: Future[None] | None = None
        self._listing: list[Future[None]] = []
        self._budget = AHEAD
        self._stopped = False

    @property
    def prefixes(self) -> list[str]:
        """The key prefixes whose old objects go (:meth:`OverwritePlan.prefixes`)."""
        if self._prefixes is None:
            self._prefixes = self.plan.prefixes(self.dest, self.keep)
        return self._prefixes

    @property
    def ranges(self) -> list[_Range]:
        """The key ranges listed at once: each prefix's share of :data:`RANGES`, split at the kept keys."""
        if self._ranges is None:
            prefixes = self.prefixes
            in_order = sorted(self.keep) if prefixes else []
            share = max(1, RANGES // max(1, len(prefixes)))
            self._ranges = [_Range(prefix, after, before) for prefix in prefixes
                            for after, before in _ranges(prefix, in_order, share)]
        return self._ranges

    def list_ahead(self, unless: Callable[[], bool] = bool) -> None:
        """Start listing, up to :data:`AHEAD` objects in all, on threads of its own (returns at once),
        unless ``unless()``, asked there, says not to."""
        if not self.plan.deletes:
            return
        with self._lock:
            if self._stopped or self._listers is not None:
                return
            self._listers = ThreadPoolExecutor(LISTERS_AHEAD, thread_name_prefix="s3commit-overwrite-list")
            self._started = self._listers.submit(self._start, unless)

    def _start(self, unless: Callable[[], bool]) -> None:
        if unless():
            return
        ranges = self.ranges
        with self._lock:
            if not self._stopped and self._listers is not None:
                self._listing = [self._listers.submit(self._hold, listed) for listed in ranges]

    def stop(self) -> None:
        """Stop listing ahead (the commit failed, or deletes another plan: nothing is deleted); a page being read
        ends first."""
        with self._lock:
            self._stopped = True
            listers = self._listers
        if listers is not None:
            listers.shutdown(wait=True, cancel_futures=True)

    def _hold(self, listed: _Range) -> None:
        """List the range ahead while the budget lasts (shared: the old objects may all fall in one range, as when
        the new files' names sort after the old ones'; a page at a time, so a range may hold a page past it)."""
        try:
            listing = self._doomed(listed)
            while self._budget > 0 and not self._stopped:  # (read unlocked: a few pages past it at most)
                page = next(listing, None)
                if page is None:
                    listed.done = True
                    return
                listed.keys += page[0]  # (held once taken from the listing)
                listed.etags += page[1]
                with self._lock:
                    self._budget -= len(page[0])
        except Exception as err:  # listed again as it is deleted
            log.debug("an overwrite's listing ahead of s3://%s/%s failed (listed again after the Completes): %s",
                      self.dest.bucket, listed.prefix, err)
            listed.keys.clear()
            listed.etags.clear()
            listed.listing = None

    def _doomed(self, listed: _Range) -> Iterator[tuple[list[str], list[str]]]:
        """The range's objects to delete, a page at a time (keys, ETags), from where its listing stopped (a new
        listing where it has none)."""
        if listed.listing is None:
            listed.listing = self._doomed_pages(listed)
        return listed.listing

    def _doomed_pages(self, listed: _Range) -> Iterator[tuple[list[str], list[str]]]:
        keep, skip = self.keep, self.skip
        for keys, etags in _listed_range(self.store, self.dest.bucket, listed.prefix, listed.after, listed.before):
            wanted = [n for n, key in enumerate(keys) if key not in keep and not skip(key)]
            yield (keys, etags) if len(wanted) == len(keys) else ([keys[n] for n in wanted], [etags[n] for n in wanted])

    def delete(self, *, threads: int) -> tuple[int, int]:
        """Delete them (call once every file of the job is complete): what was listed ahead first, in batches of
        1,000 across ranges, then the ranges' rest as listed; returns how many objects were deleted and how many
        were kept because they changed since the listing."""
        if not self.prefixes:
            return 0, 0
        with ThreadPoolExecutor(threads, thread_name_prefix="s3commit-overwrite") as pool:
            self._finish_listing_ahead(pool)
            if self.conditional == "single":  # one DELETE a key, on the pool: what was listed ahead, then the rest
                deleted, kept = delete_singly(self.store, self.dest.bucket, itertools.chain(
                    (item for listed in self.ranges for item in listed.held()),
                    (item for listed in self.ranges if not listed.done
                     for keys, etags in self._doomed(listed) for item in zip(keys, etags, strict=True))), pool)
            else:
                deleted, kept = self._delete_batches(pool)
        for key in kept[:10]:
            log.warning("s3://%s/%s changed since the overwrite listed it (another writer): kept", self.dest.bucket,
                        key)
        return deleted, len(kept)

    def _finish_listing_ahead(self, pool: ThreadPoolExecutor) -> None:
        """The listing ahead, finished (each range up to the budget): the ranges its threads had not begun are listed
        on ``pool`` (the Completes are over: as many at once as it has threads)."""
        if self._started is None:
            return
        wait([self._started])
        if self._listers is not None:
            self._listers.shutdown(wait=False, cancel_futures=True)
        # (a future cancelled before a worker took it up is never done for wait(): those are left out)
        begun = [future for future in self._listing if not future.cancelled()]
        late = [pool.submit(self._hold, listed)
                for listed, future in zip(self.ranges, self._listing, strict=False) if future.cancelled()]
        wait([*begun, *late])

    def _delete_batches(self, pool: ThreadPoolExecutor) -> tuple[int, list[str]]:
        store, bucket, gate = self.store, self.dest.bucket, DeleteGate(self.store, self.dest.bucket, self.prefixes[0])
        if self.conditional == "batch":
            def delete(batch: list[tuple[str, str]]) -> tuple[int, list[str]]:
                with gate:
                    return store.conditional.delete_objects_if_match(bucket, batch)
        else:
            def delete(batch: list[tuple[str, str]]) -> tuple[int, list[str]]:
                with gate:
                    return store.objects.delete_objects(bucket, (key for key, _ in batch)), []

        # What was listed ahead, the first failure raised (batches already sent finish); then each range's rest,
        # listed from where it stopped and deleted as it goes, RANGES at once.
        held = batched((item for listed in self.ranges for item in listed.held()), DELETE_BATCH)
        first = summed(future.result() for _, future in map_ordered(pool, held, delete, window=DELETES_AT_MOST))

        def rest(listed: _Range) -> tuple[int, list[str]]:
            return summed(delete(batch) for batch in batched(
                (item for keys, etags in self._doomed(listed) for item in zip(keys, etags, strict=True)), DELETE_BATCH))

        left = [listed for listed in self.ranges if not listed.done]
        then = summed(future.result() for _, future in map_ordered(pool, left, rest, window=RANGES))
        return first[0] + then[0], first[1] + then[1]


class _Range:
    """A stretch of a prefix's keys (after ``after``, before ``before``; None at either end), what of it was
    listed ahead, and its listing where it stopped."""

    __slots__ = ("after", "before", "done", "etags", "keys", "listing", "prefix")

    def __init__(self, prefix: str, after: str | None, before: str | None) -> None:
        self.prefix, self.after, self.before = prefix, after, before
        # What was listed ahead: keys and ETags in lists of their own, not a tuple each (100,000 tuples that live
        # through the Completes are containers the garbage collector walks, while it is kept off the rest).
        self.keys: list[str] = []
        self.etags: list[str] = []
        self.done = False
        self.listing: Iterator[tuple[list[str], list[str]]] | None = None

    def held(self) -> Iterator[tuple[str, str]]:
        """What was listed ahead, ``(key, etag)``."""
        return zip(self.keys, self.etags, strict=True)


DELETES_AT_MOST = 32
"""DeleteObjects an overwrite sends at once at most, grown to from
:data:`~s3commit.commit.prefixes.DELETES_IN_FLIGHT` while the store throttles none (:class:`DeleteGate`): 100 of
them, for 100,000 old files, in 4 round trips rather than 13."""


class DeleteGate:
    """How many of an overwrite's DeleteObjects go at once: :data:`~s3commit.commit.prefixes.DELETES_IN_FLIGHT` at
    first, one more for each that succeeds while the store has given no throttling answer (to anything) since the gate
    was made (so twice as many each round trip, as a TCP slow start, up to :data:`DELETES_AT_MOST`), and one at a time
    from the first throttling answer on, or from the start where the prefix's adaptive limit is below its ceiling
    (throttled lately).

    A DeleteObjects of 1,000 keys is 1,000 of S3's 3,500 writes a second per prefix, while the adaptive limit
    counts requests: several sent at once to a throttling prefix are each retried, and they wear out their
    attempts against each other before the limit comes down to one (measured: 16 at once from the start failed an
    overwrite of 100,000 files at 3,500 writes a second, where one at a time ends at 1.04x its floor). So more go
    at once only after as many have been answered without a throttle: a prefix that took 8,000 deletes in a round
    trip is not one S3 holds at 3,500 a second."""

    def __init__(self, store: S3Store, bucket: str, prefix: str) -> None:
        self._counters = store.counters
        self._throttles = self._throttled()
        state = store.requests.limit(bucket, prefix).state()
        self._most = 1 if state.limit < state.ceiling else DELETES_IN_FLIGHT
        self._growing = self._most > 1
        self._running = 0
        self._changed = threading.Condition()

    @property
    def most(self) -> int:
        """How many may go at once now."""
        return self._most

    def _throttled(self) -> int:
        return sum(self._counters.snapshot()["throttles"].values())

    def _check(self) -> None:
        """One at a time from now on if the store has throttled anything since the gate was made."""
        if self._most > 1 and self._throttled() > self._throttles:
            self._most, self._growing = 1, False

    def __enter__(self) -> None:
        with self._changed:
            self._check()
            self._changed.wait_for(lambda: self._running < self._most)
            self._running += 1

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        with self._changed:
            self._running -= 1
            if self._growing:
                self._check()
                if kind is None and self._growing:
                    self._most = min(self._most + 1, DELETES_AT_MOST)
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
                  before: str | None) -> Iterator[tuple[list[str], list[str]]]:
    """The objects under ``prefix`` after ``after`` and before ``before``, a page at a time (keys, ETags; a store
    that ignores ``start-after`` lists from the prefix's start: what comes first is passed over). A page is in S3's
    order, a code point's (so Python's) order: cut where the range ends by bisection, not key by key."""
    for page in store.objects.list_key_pages(bucket, prefix, start_after=after):
        keys, etags = page.keys, page.etags
        first = 0 if after is None else bisect.bisect_right(keys, after)
        end = len(keys) if before is None else bisect.bisect_left(keys, before, first)
        yield (keys, etags) if first == 0 and end == len(keys) else (keys[first:end], etags[first:end])
        if end < len(keys):
            return
