"""Commit operations: what is done to uploads and scratch data, and how.

Load and save manifests (and upload markers), complete / abort / revert single uploads, delete prefixes in
batches. Which uploads belong to a job is :mod:`s3commit.job_uploads`'s question. The committers decide
*when* each of these happens; this module knows nothing of
Spark or of committer lifecycles, and it relies on the store for retries and error translation (it adds
no retry layer of its own).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

from s3commit.errors import NotFoundError, S3CommitError, short_upload_id
from s3commit.manifest import PendingSet, PendingUpload
from s3commit.objects import CREATE_WINDOW_KEY, CreateWindow
from s3commit.paths import (
    MAGIC_PATH_PREFIX,
    PENDING_SUFFIX,
    PENDINGSET_SUFFIX,
    STAGING_PATH_PREFIX,
    UPLOAD_MARKER_SUFFIX,
    split_elements,
)
from s3commit.store import S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadRef:
    """Just enough to abort an upload; ``window``: its Create lost an answer, and an upload of the same key
    initiated inside the window is its orphan (see :class:`~s3commit.objects.CreateWindow`)."""

    bucket: str
    key: str
    upload_id: str
    window: CreateWindow | None = None


def load_pending_upload(store: S3Store, bucket: str, key: str) -> PendingUpload:
    return PendingUpload.from_json(store.get_object(bucket, key), source=f"s3://{bucket}/{key}")


def save_pending_upload(store: S3Store, bucket: str, key: str, pending: PendingUpload) -> None:
    store.put_object(bucket, key, pending.to_json(), content_type="application/json")


def load_pendingset(store: S3Store, bucket: str, key: str) -> PendingSet:
    return PendingSet.from_json(store.get_object(bucket, key), source=f"s3://{bucket}/{key}")


def save_pendingset(store: S3Store, bucket: str, key: str, pendingset: PendingSet) -> None:
    """Save (overwrite: the last task attempt to commit wins, as in Hadoop)."""
    store.put_object(bucket, key, pendingset.to_json(), content_type="application/json")


def save_task_pendingset(store: S3Store, bucket: str, key: str, pendingset: PendingSet) -> str | None:
    """Save a task's pendingset; if an earlier attempt of the task had committed one, abort the uploads of
    that superseded attempt (they would otherwise be orphans nobody can attribute). Costs one GET per task
    commit (a 404 in the usual case).

    A task that wrote nothing saves nothing (an earlier attempt's pendingset is deleted): returns ``None``,
    and its commit message names no pendingset, so the job commit reads nothing for it. Otherwise returns
    ``key``.
    """
    superseded = 0
    try:
        previous = load_pendingset(store, bucket, key)
    except NotFoundError:
        previous = None
    except S3CommitError as err:  # a corrupt earlier pendingset is replaced; its uploads go to the sweep
        log.warning("replacing unreadable pendingset s3://%s/%s: %s", bucket, key, err)
        previous = None
    if pendingset.commits:
        save_pendingset(store, bucket, key, pendingset)
    elif previous is not None:
        store.delete_object(bucket, key)
    if previous is not None:
        keep = {c.upload_id for c in pendingset.commits}
        for commit in previous.commits:
            if (commit.upload_id not in keep and commit.bucket == bucket
                    and abort_upload_quietly(store, bucket, commit.destination_key, commit.upload_id)):
                superseded += 1
        log.info("s3://%s/%s: aborted %d uploads of superseded task attempt %s", bucket, key, superseded,
                 previous.task_attempt_id or "?")
    return key if pendingset.commits else None


def upload_marker(ref: UploadRef) -> bytes:
    """The body of an upload marker (``<magic path>.upload``) recording ``ref``."""
    import json

    marker = {"bucket": ref.bucket, "destinationKey": ref.key, "uploadId": ref.upload_id}
    if ref.window is not None:
        marker[CREATE_WINDOW_KEY] = ref.window.encode()
    return json.dumps(marker).encode()


def read_upload_marker(store: S3Store, bucket: str, key: str) -> UploadRef | None:
    """The upload recorded by a magic writer at start (``<magic path>.upload``), or None if unreadable."""
    import json

    try:
        data = json.loads(store.get_object(bucket, key))
        return UploadRef(str(data["bucket"]), str(data["destinationKey"]), str(data["uploadId"]),
                         CreateWindow.decode(data.get(CREATE_WINDOW_KEY)))
    except NotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as err:
        log.warning("ignoring unreadable upload marker s3://%s/%s: %s", bucket, key, err)
        return None


def commit_upload(store: S3Store, pending: PendingUpload) -> str:
    """Complete one pending upload (idempotent: an already-completed one counts as done)."""
    return store.complete_multipart_upload(pending.bucket, pending.destination_key, pending.upload_id,
                                           pending.etags, expected_length=pending.length,
                                           created_ms=pending.created)


def abort_upload_quietly(store: S3Store, bucket: str, key: str, upload_id: str) -> bool:
    """Abort; log (never raise) a failure, so cleanup cannot hide the error that caused it."""
    try:
        store.abort_multipart_upload(bucket, key, upload_id)
        return True
    except S3CommitError as err:
        log.warning("could not abort upload %s of s3://%s/%s: %s", short_upload_id(upload_id), bucket, key, err)
        return False


def revert_upload_quietly(store: S3Store, bucket: str, key: str) -> bool:
    """Delete a completed object again (job commit failed); log a failure."""
    try:
        store.delete_object(bucket, key)
        return True
    except S3CommitError as err:
        log.warning("could not revert (delete) s3://%s/%s: %s", bucket, key, err)
        return False


def list_keys(store: S3Store, bucket: str, prefix: str) -> Iterator[str]:
    for info in store.list_objects(bucket, prefix):
        yield info.key


def delete_prefix(store: S3Store, bucket: str, prefix: str, *, keep: Collection[str] = (),
                  skip: Callable[[str], bool] | None = None) -> int:
    """Delete every object under ``prefix`` except ``keep`` (and keys ``skip`` selects), in batches.

    ``prefix`` must end with ``/`` or be ``""`` (the bucket root) so that ``a/b`` never matches ``a/bc``.
    """
    if prefix and not prefix.endswith("/"):
        raise ValueError(f"prefix {prefix!r} must end with '/'")
    doomed = (k for k in list_keys(store, bucket, prefix)
              if k not in keep and not (skip is not None and skip(k)))
    return store.delete_objects(bucket, doomed)


def is_scratch_key(key: str) -> bool:
    """A key inside any job's scratch directory (ours or a concurrent job's): never user data."""
    return any(e.startswith((MAGIC_PATH_PREFIX, STAGING_PATH_PREFIX)) for e in split_elements(key))


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
    return AttemptListing(tuple(list_keys(store, bucket, prefix)))


def map_parallel(executor: Executor, fn: Callable[[str], PendingUpload], keys: Iterable[str]
                 ) -> tuple[list[PendingUpload], list[BaseException]]:
    """Run ``fn`` over ``keys`` on ``executor``; collect results and failures (none is raised)."""
    futures = [executor.submit(fn, k) for k in keys]
    results: list[PendingUpload] = []
    failures: list[BaseException] = []
    for future in futures:
        try:
            results.append(future.result())
        except Exception as err:
            failures.append(err)
    return results, failures


def pendingset_keys_under(store: S3Store, bucket: str, job_attempt_dir: str) -> list[str]:
    """The ``.pendingset`` files directly in a job attempt directory (the fallback when the caller has
    no task commit messages)."""
    prefix = f"{job_attempt_dir}/"
    return sorted(k for k in list_keys(store, bucket, prefix)
                  if k.endswith(PENDINGSET_SUFFIX) and "/" not in k[len(prefix):])
