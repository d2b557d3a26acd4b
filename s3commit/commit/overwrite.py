"""Overwrite plans: which old objects a job replaces once its new ones are complete, and deleting them.

:class:`OverwritePlan` says what goes (paths under the destination, locations elsewhere in its bucket, the
partitions written); :func:`delete_old` deletes it after the job's files are complete, never the keys just
committed, and, where the store honours it (:mod:`s3commit.store.capabilities`), each only if its ETag is still the one
listed, so that an object a writer outside s3commit replaced since the listing is kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from s3commit.commit.prefixes import delete_listed
from s3commit.errors import ConfigError
from s3commit.model.paths import partition_of
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

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


def delete_old(store: S3Store, dest: S3Uri, plan: OverwritePlan, keep: set[str], *, threads: int,
               skip: Callable[[str], bool]) -> tuple[int, int]:
    """Delete what ``plan`` replaces under ``dest`` except ``keep`` and what ``skip`` selects; returns how many
    objects were deleted and how many were kept because they changed since the listing."""
    prefixes = plan.prefixes(dest, keep)
    if not prefixes:
        return 0, 0
    known = store.capabilities.get(dest.bucket)
    conditional = ("" if known is None else "batch" if known.conditional_batch_deletes
                   else "single" if known.conditional_deletes else "")
    deleted = changed = 0
    in_order = sorted(keep)  # where each prefix's listing is split (prefixes.RANGES)
    with ThreadPoolExecutor(threads, thread_name_prefix="s3commit-overwrite") as pool:
        for prefix in prefixes:
            gone, kept = delete_listed(store, dest.bucket, prefix, keep=keep, skip=skip, conditional=conditional,
                                       pool=pool, kept_in_order=in_order)
            deleted += gone
            changed += len(kept)
            for key in kept[:10]:
                log.warning("s3://%s/%s changed since the overwrite listed it (another writer): kept", dest.bucket, key)
    return deleted, changed
