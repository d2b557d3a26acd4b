"""One owner per job: an operation on a job (commit, abort, recover) never runs beside another on the same job, and
two live jobs with one id never share a destination.

- **In a process** (a Spark sidecar serves the driver's ``job.commit`` and ``job.abort`` on two threads; a Python
  program may call ``abort_job`` from another thread): :func:`one_operation` is a lock per destination and job id;
  the second operation waits for the first, then acts on what it left.
- **Across processes**, the records are the job's journal and the destination's commit lease
  (:mod:`s3commit.commit.lease`): an abort or recover that meets a live commit waits for its lease.
- **Job ids**: at job setup a job writes an owner record into its own scratch directory with ``If-None-Match``
  (:func:`claim`): a second live job with the same id on the same destination (``fs.s3a.committer.uuid`` set for a
  whole session, a ``job_id`` reused) is refused before it writes anything, naming the key to change.
- **RDD writes** (Hadoop's ``FileOutputFormat`` promises that a job fails when its output exists):
  :func:`claim_output` writes ``<dest>/__s3commit_writing`` with ``If-None-Match`` at setup, so that two jobs
  started together on one new destination cannot both pass; it goes with the job's end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from s3commit.errors import CommitConflictError, ConfigError, NotFoundError, PreconditionFailedError, S3CommitError
from s3commit.model.markers import OwnerRecord
from s3commit.model.paths import WRITING_NAME, JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

OWNER_FILE = "_owner.json"
"""The owner record in a job's scratch directory (its job attempt directory)."""

@dataclass
class _JobLock:
    """One job's lock in this process, and how many operations hold or wait for it (the entry goes with the last)."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0


_job_locks: dict[tuple[str, str, str], _JobLock] = {}
"""The jobs with an operation running or waiting in this process: an entry lives as long as they do, so a long-lived
process (a sidecar serving thousands of jobs) keeps none for jobs that ended."""
_job_locks_guard = threading.Lock()


@contextmanager
def one_operation(dest: S3Uri, job_id: str, what: str) -> Iterator[None]:
    """Hold this process's lock of job ``job_id`` on ``dest`` while ``what`` runs (re-entrant in a thread: a
    failed commit aborts itself under it). Another operation on the job waits, and says so."""
    slot = (dest.bucket, dest.key, job_id)
    with _job_locks_guard:
        entry = _job_locks.setdefault(slot, _JobLock())
        entry.users += 1
    try:
        if not entry.lock.acquire(blocking=False):
            started = time.monotonic()
            log.warning("job %s: %s waits for another operation of this job in this process to end", job_id, what)
            entry.lock.acquire()
            log.info("job %s: %s waited %.1f s", job_id, what, time.monotonic() - started)
        try:
            yield
        finally:
            entry.lock.release()
    finally:
        with _job_locks_guard:
            entry.users -= 1
            if entry.users == 0 and _job_locks.get(slot) is entry:
                del _job_locks[slot]


def owner_key(layout: JobLayout) -> str:
    return f"{layout.job_attempt_dir}/{OWNER_FILE}"


def claim(store: S3Store, dest: S3Uri, layout: JobLayout, job_id: str, token: str, *,
          conditional: bool, liveness: float = 0.0) -> tuple[OwnerRecord, str]:
    """Record this job run (``token``) as the owner of job ``job_id`` at ``dest``: its owner record, which is also
    its liveness record (``liveness``: the window it declares, :mod:`s3commit.commit.liveness`). Returns the record
    and its ETag (the one a renewal names in ``If-Match``).

    Raises:
        ConfigError: another live (or interrupted) job with the same id has claimed it (nothing was written).
    """
    key = owner_key(layout)
    record = OwnerRecord(job_id, token, liveness=liveness)
    # A store that ignores If-None-Match: a read first narrows the window, it cannot close it.
    if not conditional and _owner_token(store, dest, key) not in (None, token):
        raise _taken(dest, job_id, key)
    try:
        etag = store.objects.put_object(dest.bucket, key, record.to_json(), if_none_match=True,
                                        content_type="application/json")
    except PreconditionFailedError:
        # This run set the job up already (a re-sent setup): its record stands, with the ETag it has now.
        try:
            body, info, _ = store.objects.read_object(dest.bucket, key)
            mine = OwnerRecord.from_json(body)
        except (NotFoundError, ValueError):
            raise _taken(dest, job_id, key) from None
        if mine.token != token or mine.swept_by:
            raise _taken(dest, job_id, key) from None
        return mine, info.etag
    return record, etag


def _owner_token(store: S3Store, dest: S3Uri, key: str) -> str | None:
    try:
        return OwnerRecord.token_of(store.objects.get_object(dest.bucket, key))
    except NotFoundError:
        return None
    except (ValueError, S3CommitError):
        return "?"


def _taken(dest: S3Uri, job_id: str, key: str) -> ConfigError:
    return ConfigError(
        f"job id {job_id} is already used by another job writing {dest} (its owner record s3://{dest.bucket}/{key}): "
        "two jobs with one id would commit and clean up each other's files. Give each write its own id "
        "(fs.s3a.committer.uuid must be set per write, never for a whole session; job_id= in Python), or, if that "
        f"job is gone, discard it first: s3commit recover {dest} --job {job_id} --abort")


def writing_key(dest: S3Uri) -> str:
    return f"{dest.prefix}{WRITING_NAME}"


def claim_output(store: S3Store, dest: S3Uri, job_id: str, *, conditional: bool) -> None:
    """An RDD write's promise that its output did not exist: ``<dest>/__s3commit_writing`` created with
    ``If-None-Match`` (two jobs started together on one new destination: the second fails here, before any task).

    Raises:
        CommitConflictError: another job is writing ``dest`` (named), or its output exists.
    """
    key = writing_key(dest)
    try:
        store.objects.put_object(dest.bucket, key, job_id.encode(), if_none_match=conditional)
    except PreconditionFailedError:
        try:
            other = store.objects.get_object(dest.bucket, key).decode(errors="replace")
        except S3CommitError:
            other = "?"
        if other == job_id:
            return
        raise CommitConflictError(f"Output directory {dest} already exists: job {other} is writing it (s3://"
                                  f"{dest.bucket}/{key}), started before this one") from None


def release_output(store: S3Store, dest: S3Uri, job_id: str) -> None:
    """Remove the job's ``__s3commit_writing`` (best effort: never another job's)."""
    key = writing_key(dest)
    try:
        if store.objects.get_object(dest.bucket, key).decode(errors="replace") == job_id:
            store.objects.delete_object(dest.bucket, key)
    except NotFoundError:
        pass
    except S3CommitError as err:
        log.warning("job %s: could not remove %s: %s", job_id, key, err)
