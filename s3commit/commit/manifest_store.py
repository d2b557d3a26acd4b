"""The manifests and upload records in S3: load and save ``.pending`` files and pendingsets, write and read
upload markers (``.upload``), and find them in a job's directories.

The formats are :mod:`s3commit.model.manifests`'s (pure); this module moves them to and from the store, writing
part ETags in the form the store's options name (``StoreOptions.etag_form``). A task's
pendingset is saved last-attempt-wins, as in Hadoop, and the uploads of the attempt it supersedes are
aborted. What a job's records mean (which uploads are the job's) is :mod:`s3commit.commit.job_uploads`'s question.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TypeVar

from s3commit.commit.prefixes import keys_under
from s3commit.commit.upload_actions import abort_upload_quietly, delete_completed_quietly
from s3commit.errors import NotFoundError, PreconditionFailedError, S3CommitError
from s3commit.model.manifests import PendingSet, PendingUpload
from s3commit.model.markers import UploadMarker
from s3commit.model.object_info import UploadRef
from s3commit.model.paths import PENDING_SUFFIX, PENDINGSET_SUFFIX, UPLOAD_MARKER_SUFFIX
from s3commit.store.lean_http import LeanLoop
from s3commit.store.s3store import S3Store
from s3commit.transfer.parallel import map_ordered

log = logging.getLogger(__name__)
R = TypeVar("R")
MANY_GETS_FROM = 200
"""Pendingsets from which they are read from one event loop of their own (:func:`read_pendingsets`, without the
caller's loop): its connections are new (a TLS handshake each, against botocore's pool, warm from the job's other
requests), which a few hundred GETs at ~0.5 ms less CPU each pay for; fewer are read through botocore. On a job
commit's loop they always are: its Completes use those connections next."""


def load_pending_upload(store: S3Store, bucket: str, key: str) -> PendingUpload:
    return PendingUpload.from_json(store.objects.get_object(bucket, key), source=f"s3://{bucket}/{key}")


def save_pending_upload(store: S3Store, bucket: str, key: str, pending: PendingUpload) -> None:
    store.objects.put_object(bucket, key, pending.to_json(etag_form=store.options.etag_form),
                             content_type="application/json")


def load_pendingset(store: S3Store, bucket: str, key: str) -> PendingSet:
    return read_pendingset(store, bucket, key)[0]


def read_pendingset(store: S3Store, bucket: str, key: str) -> tuple[PendingSet, bytes]:
    """A pendingset, and its body as read."""
    body = store.objects.get_object(bucket, key)
    return PendingSet.from_json(body, source=f"s3://{bucket}/{key}"), body


def read_pendingsets(store: S3Store, bucket: str, keys: Sequence[str], *, pool: Executor, ahead: int,
                     then: Callable[[PendingSet, bytes], R],
                     loop: LeanLoop | None = None) -> Iterator[tuple[str, Future[R]]]:
    """``then(pendingset, body)`` of each of ``keys`` read and parsed, on ``pool``, ``(key, future)`` in the order
    of the keys, at most ``ahead`` read beyond the one handed out last. Where the store can
    (:meth:`~s3commit.store.objects.ObjectRequests.can_get_many`), the GETs go from one event loop (a fifth of
    botocore's CPU each: a job commit reads every pendingset before its first Complete) and ``pool`` parses what they
    bring: from ``loop`` (the job commit's, whose connections its Completes use next), or from :data:`MANY_GETS_FROM`
    pendingsets on connections of their own; else ``pool`` reads and parses each."""
    if not keys or (loop is None and len(keys) < MANY_GETS_FROM) or not store.objects.can_get_many(bucket):
        yield from map_ordered(pool, keys, lambda key: then(*read_pendingset(store, bucket, key)), window=ahead)
        return

    def parse(got: tuple[str, Future[bytes]]) -> R:
        key, body = got
        data = body.result()
        return then(PendingSet.from_json(data, source=f"s3://{bucket}/{key}"), data)

    for (key, _), parsed in map_ordered(pool, store.objects.get_many(bucket, keys, ahead=ahead, loop=loop), parse,
                                        window=ahead):
        yield key, parsed


def save_pendingset(store: S3Store, bucket: str, key: str, pendingset: PendingSet) -> None:
    """Save (overwrite: the last task attempt to commit wins, as in Hadoop)."""
    store.objects.put_object(bucket, key, pendingset.to_json(etag_form=store.options.etag_form),
                             content_type="application/json")


def save_task_pendingset(store: S3Store, bucket: str, key: str, pendingset: PendingSet, *,
                         first_attempt: bool = False) -> str | None:
    """Save a task's pendingset; if an earlier attempt of the task had committed one, abort the uploads of
    that superseded attempt (they would otherwise be orphans nobody can attribute). Costs one GET per task
    commit (a 404 in the usual case), except for a ``first_attempt`` (attempt number 0 of its task: Spark
    numbers stage re-attempts' tasks past it too), which writes with ``If-None-Match`` instead: a later attempt
    that committed before it (attempt 0 ran late) makes that PUT fail, and is then read and superseded as above.
    (A store that ignores ``If-None-Match`` overwrites it: that attempt's uploads are left to the job's sweep by
    the job id in their names, or to the lifecycle rule.)

    A task that wrote nothing saves nothing (an earlier attempt's pendingset is deleted): returns ``None``,
    and its commit message names no pendingset, so the job commit reads nothing for it. Otherwise returns
    ``key``.
    """
    superseded = 0
    if first_attempt and pendingset.commits:
        # No GET, but no blind overwrite either: a later attempt of the task may have committed first (attempt 0
        # ran late). Where the store honours If-None-Match that one's pendingset refuses this PUT, and is read.
        try:
            store.objects.put_object(bucket, key, pendingset.to_json(etag_form=store.options.etag_form),
                                     if_none_match=True, content_type="application/json")
            return key
        except PreconditionFailedError:
            first_attempt = False
    try:
        previous = None if first_attempt else load_pendingset(store, bucket, key)
    except NotFoundError:
        previous = None
    except S3CommitError as err:  # a corrupt earlier pendingset is replaced; its uploads go to the sweep
        log.warning("replacing unreadable pendingset s3://%s/%s: %s", bucket, key, err)
        previous = None
    if pendingset.commits:
        save_pendingset(store, bucket, key, pendingset)
    elif previous is not None:
        store.objects.delete_object(bucket, key)
    if previous is not None:
        keep = {c.upload_id for c in pendingset.commits}
        keys = {c.destination_key for c in pendingset.commits}
        for commit in previous.commits:
            if commit.upload_id in keep or commit.bucket != bucket:
                continue
            if commit.completed_at_task_commit:
                # The loser's file, completed at its task commit: in no snapshot. Deleted unless this attempt
                # writes the key too (its upload, pending or complete, is the file there).
                if commit.destination_key not in keys and delete_completed_quietly(store, commit):
                    superseded += 1
            elif abort_upload_quietly(store, bucket, commit.destination_key, commit.upload_id):
                superseded += 1
        log.info("s3://%s/%s: aborted %d uploads of superseded task attempt %s", bucket, key, superseded,
                 previous.task_attempt_id or "?")
    return key if pendingset.commits else None


def read_upload_marker(store: S3Store, bucket: str, key: str) -> UploadRef | None:
    """The upload recorded by a magic writer at start (``<magic path>.upload``), or None if unreadable."""
    try:
        return UploadMarker.decode(store.objects.get_object(bucket, key))
    except NotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as err:
        log.warning("ignoring unreadable upload marker s3://%s/%s: %s", bucket, key, err)
        return None


@dataclass(frozen=True)
class AttemptListing:
    """Everything under a task attempt directory, by kind."""

    keys: tuple[str, ...]

    @property
    def pending(self) -> list[str]:
        return [k for k in self.keys if k.endswith(PENDING_SUFFIX)]

    @property
    def markers(self) -> list[str]:
        return [k for k in self.keys if k.endswith(UPLOAD_MARKER_SUFFIX)]


def scan_attempt_dir(store: S3Store, bucket: str, prefix: str) -> AttemptListing:
    """List a task attempt directory (or all of them) once: its ``.pending`` files and upload markers."""
    return AttemptListing(tuple(keys_under(store, bucket, prefix)))


def pendingset_keys_under(store: S3Store, bucket: str, job_attempt_dir: str) -> list[str]:
    """The ``.pendingset`` files directly in a job attempt directory (the fallback when the caller has
    no task commit messages)."""
    prefix = f"{job_attempt_dir}/"
    return sorted(k for k in keys_under(store, bucket, prefix)
                  if k.endswith(PENDINGSET_SUFFIX) and "/" not in k[len(prefix):])
