"""Turning a destination's snapshot log on and off, vacuuming it, and its history: each change under the
destination's commit lease, so that it falls between two commits (``s3commit snapshot ...``, and the same from
Python: ``s3commit.enable_snapshots`` and its siblings).

The log's formats are :mod:`s3commit.model.snapshot_log`; what a commit does with it, :mod:`s3commit.commit.snapshots`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from s3commit.commit.lease import NoLease, lease_for
from s3commit.commit.recovery import settle_interrupted
from s3commit.commit.snapshots import LogState, SnapshotLog, VacuumReport, disable, enable, vacuum
from s3commit.config.options import CommitterOptions
from s3commit.errors import ConfigError, NotFoundError
from s3commit.model.snapshot_log import LOG_SCHEMES, Snapshot
from s3commit.model.uri import S3Uri
from s3commit.store import capability_cache
from s3commit.store.s3store import S3Store

Changed = TypeVar("Changed")


def _under_lease(store: S3Store, dest: S3Uri, options: CommitterOptions, operation: str,
                 change: Callable[[], Changed]) -> Changed:
    """Run ``change`` holding ``dest``'s commit lease (a dead holder's interrupted commit settled first).

    Raises:
        ConfigError: the store does not honour conditional writes: a snapshot's entry, its commit point, is one.
    """
    known = capability_cache.known(store, dest.bucket, prefix=dest.prefix)
    if known is None or not known.conditional_writes:
        raise ConfigError(f"the store of {dest} was not seen to honour conditional writes (`s3commit doctor {dest}` "
                          "says why): a snapshot is published with If-None-Match, and commits to a snapshot "
                          "destination are ordered by the commit lease, which needs them")
    lease = lease_for(store, dest, f"snapshot-{uuid.uuid4()}", options, operation=operation,
                      settle=lambda holder: settle_interrupted(store, dest, holder.job_id, options))
    if isinstance(lease, NoLease):
        raise ConfigError(f"s3commit.commit.lease is off: `{operation}` on {dest} needs the commit lease")
    with lease:
        return change()


def _dest_uri(dest: str | S3Uri) -> S3Uri:
    return dest if isinstance(dest, S3Uri) else S3Uri.parse(dest)


def enable_snapshots(dest: str | S3Uri, *, store: S3Store | None = None, retention: float | None = None,
                     scheme: str = "s3a", symlink_manifests: bool = False,
                     options: CommitterOptions | None = None) -> Snapshot:
    """Make ``dest`` a snapshot destination; the data files there now become snapshot 0 (returned). Idempotent.

    Args:
        retention: seconds replaced files stay readable (default ``s3commit.snapshot.retention``'s, 24 h).
        scheme: the scheme of the paths Spark reads from the log (``s3a``, the one its readers use; ``s3`` on EMR's
            EMRFS).
        symlink_manifests: keep ``_symlink_format_manifest/<partition>/manifest`` current at every commit, for
            Trino, Athena, Hive and Presto (Hive's ``SymlinkTextInputFormat``).

    Raises:
        ConfigError: a store without conditional writes; a Structured Streaming sink's log already there.
    """
    options = options or CommitterOptions()
    if scheme not in LOG_SCHEMES:
        raise ConfigError(f"scheme {scheme!r}: choose one of {', '.join(LOG_SCHEMES)}")
    uri, store = _dest_uri(dest), store or S3Store()
    keep = options.snapshot_retention if retention is None else retention
    if keep < 0:
        raise ConfigError(f"retention {keep!r}: must be >= 0 seconds")
    return _under_lease(store, uri, options, "snapshot enable",
                        lambda: enable(store, uri, retention=keep, scheme=scheme,
                                       symlink_manifests=symlink_manifests))


def disable_snapshots(dest: str | S3Uri, *, store: S3Store | None = None,
                      options: CommitterOptions | None = None) -> int:
    """Return ``dest`` to a plain directory: the files no current snapshot lists (kept for the retention horizon)
    deleted, then the log. Returns how many files were deleted. Readers still reading an older snapshot fail."""
    options = options or CommitterOptions()
    uri, store = _dest_uri(dest), store or S3Store()
    return _under_lease(store, uri, options, "snapshot disable",
                        lambda: disable(store, uri, pool_size=options.pool_size))


def vacuum_snapshots(dest: str | S3Uri, *, store: S3Store | None = None, horizon: float | None = None,
                     options: CommitterOptions | None = None) -> VacuumReport:
    """Delete the files of ``dest`` in no retained snapshot (:func:`s3commit.commit.snapshots.vacuum`).

    Raises:
        ConfigError: ``dest`` is not a snapshot destination.
    """
    options = options or CommitterOptions()
    uri, store = _dest_uri(dest), store or S3Store()
    if not SnapshotLog(store, uri).state().enabled:
        raise ConfigError(f"{uri} is not a snapshot destination: nothing to vacuum")
    return _under_lease(store, uri, options, "snapshot vacuum",
                        lambda: vacuum(store, uri, horizon=horizon, pool_size=options.pool_size))


def current_files(dest: str | S3Uri, *, store: S3Store | None = None) -> Snapshot:
    """The last committed snapshot of ``dest`` (an empty snapshot ``-1`` before the first is written).

    Raises:
        ConfigError: ``dest`` is not a snapshot destination.
    """
    uri, store = _dest_uri(dest), store or S3Store()
    snapshots = SnapshotLog(store, uri)
    state = snapshots.state(settings=False)
    if not state.enabled:
        raise ConfigError(f"{uri} is not a snapshot destination (no s3commit log in {snapshots.dir!r}): read it "
                          f"as a directory, or run `s3commit snapshot enable {uri}` first")
    return snapshots.current(state) or Snapshot.of(-1, ())


@dataclass(frozen=True)
class SnapshotSummary:
    """One snapshot in a destination's history."""

    id: int
    committed: datetime | None
    files: int
    bytes: int
    jobs: tuple[str, ...]
    """The jobs whose files it lists, newest first (the first one committed it, unless it only removed files)."""


def snapshot_history(dest: str | S3Uri, *, store: S3Store | None = None) -> tuple[LogState, list[SnapshotSummary]]:
    """The log's state and the snapshots it still holds (vacuum drops the expired ones), newest first."""
    uri, store = _dest_uri(dest), store or S3Store()
    snapshots = SnapshotLog(store, uri)
    state = snapshots.state()
    out = []
    for snapshot_id, written in reversed(state.entries if state.enabled else ()):
        try:
            snapshot = snapshots.read(snapshot_id)
        except NotFoundError:
            continue  # vacuumed since the listing
        newest: dict[str, int] = {}
        for f in snapshot.files:
            newest[f.job] = max(newest.get(f.job, 0), f.modified_ms)
        jobs = tuple(j or "(enabled)" for j, _ in sorted(newest.items(), key=lambda item: -item[1]))
        out.append(SnapshotSummary(id=snapshot_id, committed=written, files=len(snapshot.files),
                                   bytes=snapshot.size, jobs=jobs))
    return state, out
