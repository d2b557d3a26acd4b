"""Snapshot destinations: a log of committed snapshots that readers trust over a listing (DESIGN.md section 27).

A plain directory is read by listing it, and no order of Completes and deletes makes a commit atomic for a lister.
A destination that opts in (:func:`enable`) keeps a log (:mod:`s3commit.model.snapshot_log`): every commit to it
publishes the next snapshot, the destination's whole file list, with one ``If-None-Match: *`` PUT, its commit point
(:class:`s3commit.commit.engine.CommitPoint`); the commit lease orders the commits. A reader that goes by the log
(stock Spark reading the directory; :func:`s3commit.arrow.dataset`; :func:`current`) sees exactly one committed
snapshot, whole: never the files of a commit under way, of a commit that failed or whose driver died, and never the
old and the new files of an overwrite at once.

An overwrite on a snapshot destination deletes nothing when it commits: the files it replaces leave the next
snapshot, and stay in the store for the retention horizon, so that a read planned on an older snapshot finishes.
:func:`vacuum` then deletes every data file in no retained snapshot (every later commit runs a bounded vacuum).

A plain lister of a snapshot destination sees every file the retention horizon keeps: old and new versions at once
after an overwrite. Readers must go by the log; ``docs/snapshots.md`` says which do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any, cast

from s3commit._version import __version__
from s3commit.errors import CommitConflictError, ConfigError, NotFoundError, PreconditionFailedError
from s3commit.model.object_info import ObjectInfo
from s3commit.model.paths import is_scratch_key
from s3commit.model.snapshot_log import (
    LOG_DIR,
    MANIFEST_DIR,
    SETTINGS_NAME,
    Snapshot,
    SnapshotFile,
    SnapshotSettings,
    entry_id,
    entry_name,
    manifest_key,
    manifests,
)
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import resolved

if TYPE_CHECKING:
    from s3commit.commit.process_state import SeenObjects

log = logging.getLogger(__name__)

VACUUM_ENTRIES_AT_COMMIT = 2
"""Expired log entries a commit's own vacuum settles at most (the rest wait for the next commit or
``s3commit snapshot vacuum``): two a commit keeps up with one commit each, and bounds its work."""


def hidden(relative: str) -> bool:
    """True for what readers of a directory skip (Spark's and pyarrow's rule, per path element: names starting with
    ``_`` that are not partitions, or with ``.``), and for s3commit's scratch keys."""
    for element in relative.split("/"):
        if element.startswith(".") or (element.startswith("_") and "=" not in element
                                       and not element.startswith(("_metadata", "_common_metadata"))):
            return True
    return is_scratch_key(relative)


@dataclass(frozen=True)
class LogState:
    """What one listing of the log's directory found: the settings (None: not a snapshot destination), the entries
    (id, when written) in id order, and whether it holds batches of a log that is not s3commit's (a file sink's)."""

    settings: SnapshotSettings | None
    entries: tuple[tuple[int, datetime | None], ...] = ()
    foreign: bool = False
    listed_settings: bool = False
    """The listing found the settings (read them only where :meth:`SnapshotLog.state` was asked to)."""
    settings_etag: str = ""
    """The settings' ETag as the listing gave it."""
    latest_etag: str = ""
    """The latest entry's ETag as the listing gave it."""

    @property
    def enabled(self) -> bool:
        return self.settings is not None or self.listed_settings

    @property
    def latest(self) -> int | None:
        return self.entries[-1][0] if self.entries else None


class SnapshotLog:
    """The snapshot log of one destination."""

    def __init__(self, store: S3Store, dest: S3Uri, *, seen: SeenObjects | None = None) -> None:
        self.store = store
        self.dest = dest
        self.dir = f"{dest.prefix}{LOG_DIR}/"
        self.seen = seen
        """Where this process keeps the settings and the latest entry it read or wrote, by ETag: a listing that finds
        them unchanged reads neither again."""

    def __repr__(self) -> str:
        return f"SnapshotLog(s3://{self.dest.bucket}/{self.dir})"

    def entry_key(self, snapshot_id: int) -> str:
        return self.dir + entry_name(snapshot_id)

    @property
    def settings_key(self) -> str:
        return self.dir + SETTINGS_NAME

    def enabled(self) -> bool:
        """Whether the destination keeps a log (its settings are there): one listing of the settings' key."""
        return any(info.key == self.settings_key
                   for info in self.store.objects.list_objects(self.dest.bucket, self.settings_key))

    def state(self, *, settings: bool = True) -> LogState:
        """One listing of the log's directory, and a GET of the settings where they are (unless ``settings`` is
        False: a reader needs only the entries)."""
        entries: list[tuple[int, datetime | None]] = []
        etags: dict[int, str] = {}
        has_settings = foreign = False
        settings_etag = ""
        for info in self.store.objects.list_objects(self.dest.bucket, self.dir):
            name = info.key[len(self.dir):]
            if name == SETTINGS_NAME:
                has_settings, settings_etag = True, info.etag.strip('"')
            elif (snapshot_id := entry_id(name)) is not None:
                entries.append((snapshot_id, info.last_modified))
                etags[snapshot_id] = info.etag.strip('"')
                foreign = foreign or not name.endswith(".compact")
        ordered = tuple(sorted(entries, key=lambda e: e[0]))
        latest_etag = etags[ordered[-1][0]] if ordered else ""
        if not has_settings:
            return LogState(None, ordered, foreign=bool(entries), latest_etag=latest_etag)
        listed = LogState(None, ordered, foreign=foreign, listed_settings=True, settings_etag=settings_etag,
                          latest_etag=latest_etag)
        return self.with_settings(listed) if settings else listed

    def with_settings(self, listed: LogState) -> LogState:
        """``listed`` (a listing that found the settings) with the settings read (or as this process read them
        before, where the listing gives the same ETag); not enabled if they went since."""
        known = self._held(self.settings_key, listed.settings_etag)
        if known is not None:
            return replace(listed, settings=cast(SnapshotSettings, known), listed_settings=False)
        found = self.read_settings()
        if found is None:  # disabled since the listing
            return LogState(None)
        return replace(listed, settings=found, listed_settings=False)

    def read_settings(self) -> SnapshotSettings | None:
        """The settings (one GET; None: not a snapshot destination), kept in :attr:`seen` by their ETag."""
        try:
            body, info, _ = self.store.objects.read_object(self.dest.bucket, self.settings_key)
        except NotFoundError:
            return None
        found = SnapshotSettings.from_json(body, source=f"s3://{self.dest.bucket}/{self.settings_key}")
        self._hold(self.settings_key, info.etag, found)
        return found

    def _held(self, key: str, etag: str) -> Any:
        """What :attr:`seen` holds of ``key`` where this process saw it with ``etag`` (a listing's), else None."""
        if self.seen is None or not etag:
            return None
        known = self.seen.get(self.store.options.endpoint_url or "", self.dest.bucket, key)
        return known[1] if known is not None and known[0] == etag.strip('"') else None

    def _hold(self, key: str, etag: str, value: Any) -> None:
        """Keep ``value`` (what ``key`` held, with ``etag``) in :attr:`seen`."""
        if self.seen is not None:
            self.seen.put(self.store.options.endpoint_url or "", self.dest.bucket, key, etag.strip('"'), value)

    def state_ahead(self) -> Future[tuple[LogState, Future[bytes | None]]]:
        """:meth:`state_and_latest` begun on a thread of its own (the entry's GET on a second): a job commit's early
        read of the log, started with its lease's taking (:meth:`CommitLease.acquire_ahead
        <s3commit.commit.lease.CommitLease.acquire_ahead>`, which notes first the ETag it remembers the lease free at,
        as the engine does before its own early read), so that it runs beside the reading of the task messages."""
        fetches = ThreadPoolExecutor(1, thread_name_prefix="s3commit-log-entry")
        reader = ThreadPoolExecutor(1, thread_name_prefix="s3commit-log-ahead")
        read = reader.submit(self.state_and_latest, fetches)
        reader.shutdown(wait=False)  # its thread ends with the read
        # The entry's fetch, queued by the end of the read, runs on after its executor is shut down.
        read.add_done_callback(lambda _: fetches.shutdown(wait=False))
        return read

    def state_and_latest(self, beside: Executor) -> tuple[LogState, Future[bytes | None]]:
        """:meth:`state`, and the latest entry being fetched on ``beside`` (as written: :meth:`parse` reads it), in
        two round trips: the listing, then the settings and the entry at once. The entry's future answers None where
        the log is not enabled, or has no entry."""
        return self._with_latest(self.state(settings=False), beside)

    def _with_latest(self, listed: LogState, beside: Executor) -> tuple[LogState, Future[bytes | None]]:
        """``listed`` (a listing, settings unread) with its settings, and its latest entry being fetched."""
        if not listed.listed_settings or listed.latest is None:
            return (self.with_settings(listed) if listed.listed_settings else listed), resolved(None)
        kept = self.kept(listed.latest, listed.latest_etag)
        latest: Future[bytes | None] = resolved(kept) if kept is not None else beside.submit(self.fetch, listed.latest)
        state = self.with_settings(listed)
        if not state.enabled:  # disabled since the listing: its entries went with its settings
            latest.add_done_callback(lambda f: f.exception())  # what the fetch found is not wanted
            return state, resolved(None)
        return state, latest

    def confirmed(self, early: tuple[LogState, Future[bytes | None]],
                  beside: Executor) -> tuple[LogState, Future[bytes | None]]:
        """:meth:`state_and_latest` read again (one listing), taking what ``early`` (that call's answer, made before
        the commit lease was taken) read where the listing finds the log as it was then: the same settings and
        latest entry, by ETag. Read anew otherwise (a commit, ``enable`` or ``disable`` came between)."""
        listed = self.state(settings=False)
        state, latest = early
        as_listed = replace(state, settings=None, listed_settings=True) if state.settings is not None else state
        if as_listed == listed:
            return early
        latest.add_done_callback(lambda f: f.exception())  # what the early fetch found is not wanted
        return self._with_latest(listed, beside)

    def read(self, snapshot_id: int) -> Snapshot:
        return self.parse(snapshot_id, self.fetch(snapshot_id))

    def fetch(self, snapshot_id: int) -> bytes:
        """Entry ``snapshot_id`` as written (:meth:`parse` reads it), kept in :attr:`seen` by its ETag."""
        data, info, _ = self.store.objects.read_object(self.dest.bucket, self.entry_key(snapshot_id))
        self._hold(self.entry_key(snapshot_id), info.etag, data)
        return data

    def kept(self, snapshot_id: int, etag: str) -> bytes | None:
        """Entry ``snapshot_id`` as this process last read or wrote it, where that was with ``etag`` (a listing's),
        else None."""
        return cast("bytes | None", self._held(self.entry_key(snapshot_id), etag))

    def read_ahead(self) -> SnapshotSettings | None:
        """The settings (None: not a snapshot destination), with the latest entry read into :attr:`seen` beside
        them (a job's setup, for its commit): one listing of the log, then a GET of each that this process does not
        hold as it is."""
        with ThreadPoolExecutor(1, thread_name_prefix="s3commit-log") as beside:
            state, latest = self.state_and_latest(beside)
            latest.result()
        return state.settings

    def parse(self, snapshot_id: int, data: bytes) -> Snapshot:
        return Snapshot.from_entry(snapshot_id, data, self.dest.bucket, self.dest.key,
                                   source=f"s3://{self.dest.bucket}/{self.entry_key(snapshot_id)}")

    def current(self, state: LogState | None = None) -> Snapshot | None:
        """The last committed snapshot, or None where the destination keeps no log."""
        state = state or self.state()
        if not state.enabled or state.latest is None:
            return None
        return self.read(state.latest)

    def publish(self, snapshot: Snapshot, settings: SnapshotSettings) -> None:
        """Write ``snapshot`` as the next entry (``If-None-Match: *``): the commit point of a snapshot commit.

        Raises:
            CommitConflictError: the entry exists (another writer published it: the lease did not serialize us).
        """
        self.publish_entry(snapshot.id, snapshot.to_entry(settings.scheme, self.dest.bucket, self.dest.key))

    def publish_entry(self, snapshot_id: int, entry: bytes) -> None:
        """:meth:`publish` with the entry made already.

        Raises:
            CommitConflictError: the entry exists (another writer published it: the lease did not serialize us).
        """
        try:
            etag = self.store.objects.put_object(self.dest.bucket, self.entry_key(snapshot_id), entry,
                                                 if_none_match=True, content_type="text/plain")
            self._hold(self.entry_key(snapshot_id), etag, entry)  # the next commit from this process reads none
        except PreconditionFailedError as err:
            raise CommitConflictError(
                f"snapshot {snapshot_id} of {self.dest} was published by another writer while this commit held "
                "the destination's commit lease: is a writer committing there without s3commit's lease?") from err


def next_snapshot(base: Snapshot | None, *, added: Iterable[SnapshotFile], replaced: Sequence[str]) -> Snapshot:
    """The snapshot after ``base``: its files less those under ``replaced`` (prefixes relative to the destination,
    ``""`` = all) and less the keys ``added`` writes again, plus ``added``."""
    new = {f.relative: f for f in added}
    prefixes = tuple(p if p == "" or p.endswith("/") else f"{p}/" for p in replaced)
    kept = [f for f in (base.files if base else ()) if f.relative not in new
            and not any(f.relative.startswith(p) for p in prefixes)]
    return Snapshot.of((base.id + 1) if base else 0, [*kept, *new.values()])


def data_files(store: S3Store, dest: S3Uri) -> list[ObjectInfo]:
    """The objects a reader listing ``dest`` takes as data (:func:`hidden` ones left out)."""
    return [info for info in store.objects.list_objects(dest.bucket, dest.prefix)
            if not hidden(dest.relative(info.key))]


def file_of(info: ObjectInfo, dest: S3Uri, job: str = "") -> SnapshotFile:
    modified = int(info.last_modified.timestamp() * 1000) if info.last_modified else int(time.time() * 1000)
    return SnapshotFile(relative=dest.relative(info.key), size=info.size, modified_ms=modified, job=job)


def write_manifests(store: S3Store, dest: S3Uri, snapshot: Snapshot, base: Snapshot | None, scheme: str, *,
                    pool_size: int = 16) -> int:
    """Bring the symlink manifests up to ``snapshot``: those of the partitions whose files changed since ``base``
    (all of them where ``base`` is None) written, those of partitions it no longer has deleted. After the commit
    point: a reader of the manifests sees each partition's new files once its manifest is written (each manifest
    is whole, the set of them is not: Delta's manifests are the same). Returns how many were written."""
    texts = manifests(snapshot, scheme, dest.bucket, dest.key)
    if base is None:
        changed = set(texts)
    else:
        before, after = {f.relative: f for f in base.files}, {f.relative: f for f in snapshot.files}
        changed = {r.rpartition("/")[0] for r in before.keys() ^ after.keys()}
        changed |= {r.rpartition("/")[0] for r in before.keys() & after.keys() if before[r] != after[r]}
    gone = [manifest_key(dest.key, d) for d in changed if d not in texts]
    written = [d for d in changed if d in texts]
    if written:
        with ThreadPoolExecutor(min(pool_size, len(written)), thread_name_prefix="s3commit-manifests") as pool:
            list(pool.map(lambda d: store.objects.put_object(dest.bucket, manifest_key(dest.key, d), texts[d],
                                                             content_type="text/plain"), written))
    if gone:
        store.objects.delete_objects(dest.bucket, gone)
    return len(written)


# --- the operations on a destination's log, each under the destination's commit lease --------------------------


@dataclass(frozen=True)
class VacuumReport:
    """What a vacuum did: files deleted, snapshots it kept, files in no snapshot it kept as too young, entries
    deleted."""

    deleted: int
    retained_snapshots: int
    kept_young: int
    entries_deleted: int


def enable(store: S3Store, dest: S3Uri, *, retention: float, scheme: str = "s3a",
           symlink_manifests: bool = False) -> Snapshot:
    """Make ``dest`` a snapshot destination: the data files it holds become snapshot 0. Idempotent (an enabled
    destination's current snapshot is returned; asked for symlink manifests, it starts keeping them). The caller
    holds the destination's commit lease.

    Raises:
        ConfigError: ``_spark_metadata`` holds a log that is not s3commit's (a Structured Streaming file sink's).
    """
    snapshots = SnapshotLog(store, dest)
    state = snapshots.state()
    if state.enabled:
        assert state.settings is not None
        current = snapshots.current(state)
        if current is not None:
            if symlink_manifests and not state.settings.symlink_manifests:
                settings = replace(state.settings, symlink_manifests=True)
                store.objects.put_object(dest.bucket, snapshots.settings_key, settings.to_json(),
                                         content_type="application/json")
                write_manifests(store, dest, current, None, settings.scheme)
            return current
    elif state.foreign or state.entries:
        raise ConfigError(
            f"{dest} already holds a log in {LOG_DIR}/ that is not s3commit's (a Structured Streaming file sink's?): "
            "Spark reads only the files it lists. A sink's directory cannot also be a snapshot destination")
    settings = SnapshotSettings(scheme=scheme, retention=retention, enabled_ms=int(time.time() * 1000),
                                enabled_by=f"s3commit {__version__}", symlink_manifests=symlink_manifests)
    first = Snapshot.of(0, [file_of(i, dest) for i in data_files(store, dest)])
    # The settings first: from then on an s3commit commit publishes a snapshot (the first from the listing, if the
    # enabling process died before snapshot 0); until snapshot 0 is written, Spark's reader finds a log with no
    # entry and fails (unable to infer the schema) rather than read a listing.
    store.objects.put_object(dest.bucket, snapshots.settings_key, settings.to_json(), content_type="application/json")
    snapshots.publish(first, settings)
    if symlink_manifests:
        write_manifests(store, dest, first, None, scheme)
    return first


def disable(store: S3Store, dest: S3Uri, *, pool_size: int = 16) -> int:
    """Return ``dest`` to a plain directory: every data file in no current snapshot deleted (the replaced files the
    retention horizon kept: a plain lister would read them), then the log. Returns how many files were deleted.
    The caller holds the destination's commit lease."""
    snapshots = SnapshotLog(store, dest)
    state = snapshots.state()
    if not state.enabled:
        return 0
    current = snapshots.current(state)
    live = current.relatives if current else frozenset()
    stale = [i.key for i in data_files(store, dest) if dest.relative(i.key) not in live]
    deleted = _delete_keys(store, dest.bucket, stale, pool_size)
    keys = [snapshots.settings_key, *(snapshots.entry_key(i) for i, _ in state.entries),
            *(i.key for i in store.objects.list_objects(dest.bucket, f"{dest.prefix}{MANIFEST_DIR}/"))]
    # The settings first: from then on no s3commit writer takes the destination for a snapshot one.
    store.objects.delete_objects(dest.bucket, keys[:1])
    if keys[1:]:
        store.objects.delete_objects(dest.bucket, keys[1:])
    return deleted


def vacuum(store: S3Store, dest: S3Uri, *, horizon: float | None = None, full: bool = True,
           max_entries: int | None = None, pool_size: int = 16, state: LogState | None = None,
           now: Callable[[], float] | None = None) -> VacuumReport:
    """Delete the data files of ``dest`` that are in no retained snapshot, and the log entries no longer retained.

    A snapshot is retained while it is current or was superseded less than ``horizon`` seconds ago (default: the
    destination's retention). The files of every expired entry that no
    retained snapshot lists are deleted, then the entry. ``full`` also lists the destination for data files in no
    snapshot at all (left by writers outside s3commit, or by a commit that died and was never settled) and deletes
    those older than the horizon, so that the files a commit under way has completed, and not yet published, stay.
    ``max_entries``: expire at most this many entries (a commit's bounded vacuum: no listing, ``full=False``).
    Ages are judged by the store's clock (the ``Date`` of a HEAD of the bucket, to the second), never this host's;
    ``now`` replaces it. The caller holds the commit lease.
    """
    snapshots = SnapshotLog(store, dest)
    state = state or snapshots.state()
    if not state.enabled or state.latest is None or (len(state.entries) < 2 and not full):
        return VacuumReport(0, 0, 0, 0)
    assert state.settings is not None
    horizon = state.settings.retention if horizon is None else horizon
    # The store's Date has whole seconds: its clock is within the second after it.
    cutoff = (now() if now else store.head_bucket(dest.bucket).timestamp() + 1) - horizon
    entries = list(state.entries)
    retained = {state.latest}
    for (snapshot_id, _), (_, superseded) in pairwise(entries):
        if superseded is None or superseded.timestamp() > cutoff:
            retained.add(snapshot_id)
    expired = [i for i, _ in entries if i not in retained][:max_entries]
    if not expired and not full:
        return VacuumReport(0, 0, 0, 0)
    live: set[str] = set()
    for snapshot_id in sorted(retained):
        live |= snapshots.read(snapshot_id).relatives
    due: set[str] = set()
    for snapshot_id in expired:
        due |= {dest.child(r).key for r in snapshots.read(snapshot_id).relatives - live}
    young = 0
    if full:
        for info in data_files(store, dest):
            if dest.relative(info.key) in live or info.key in due:
                continue
            if info.last_modified is not None and info.last_modified.timestamp() > cutoff:
                young += 1
            else:
                due.add(info.key)
    deleted = _delete_keys(store, dest.bucket, sorted(due), pool_size)
    # Entries after their files: a vacuum cut short finds the same files again from the entries left.
    dropped = [snapshots.entry_key(i) for i in expired]
    entries_deleted = store.objects.delete_objects(dest.bucket, dropped) if dropped else 0
    if deleted or entries_deleted:
        log.info("vacuum of %s: %d replaced files and %d log entries deleted, %d files in no snapshot kept for the "
                 "retention horizon", dest, deleted, entries_deleted, young)
    return VacuumReport(deleted=deleted, retained_snapshots=len(retained), kept_young=young,
                        entries_deleted=entries_deleted)


def _delete_keys(store: S3Store, bucket: str, keys: list[str], pool_size: int) -> int:
    if not keys:
        return 0
    chunks = [keys[i:i + 1000] for i in range(0, len(keys), 1000)]
    with ThreadPoolExecutor(min(pool_size, len(chunks))) as pool:
        return sum(pool.map(lambda chunk: store.objects.delete_objects(bucket, chunk), chunks))
