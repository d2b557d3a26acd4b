"""A job says that it is alive: its driver keeps the job's liveness record fresh from job setup to its end.

The record is the job's owner record (``_owner.json`` in its job attempt directory, :mod:`s3commit.commit.ownership`),
written at setup with ``If-None-Match``. While the job lives, a :class:`JobLiveness` in the driver's process rewrites
it every quarter of the job's window (``s3commit.job.liveness``, declared in the record) with ``If-Match`` on the
ETag it holds, so the store's ``Last-Modified`` of the object says when the job last spoke, on the store's clock.
Whoever judges a job dead (:mod:`s3commit.commit.sweep`) takes its record with ``If-Match`` on the version it saw
before it touches anything of the job's: a renewal that lands first keeps the job alive; a job that comes back
after it was taken finds out at its next renewal (412, or 404 once the sweep deleted its directory) and stops:
its commit raises :class:`~s3commit.errors.JobSweptError` and it loses nothing of another job's.

Where a job's record lives on in a process: the Python API keeps it while the committer object lives (a daemon
thread; the committer's commit or abort ends it, and so does the object's collection); a Spark driver's sidecar
keeps it from ``job.setup`` to ``job.commit``/``job.abort`` (its committers are built per call: :class:`Keepers`,
one per process, in its :class:`~s3commit.commit.process_state.ProcessState`). A process that is paused (SIGSTOP, a
laptop asleep) does not renew: a pause longer than the window can get the job swept; give such jobs a longer
``s3commit.job.liveness``.

On a store that ignores conditional writes the record is still renewed (plain PUTs: ``show`` says whether a job
speaks), but no one takes it: nothing is swept automatically there (:mod:`s3commit.commit.sweep`).
"""

from __future__ import annotations

import logging
import threading
import weakref

from s3commit.commit.clock import SYSTEM_CLOCK, Clock
from s3commit.commit.ownership import owner_key
from s3commit.errors import JobSweptError, NotFoundError, PreconditionFailedError, S3CommitError
from s3commit.model.markers import OwnerRecord
from s3commit.model.paths import JobLayout
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

RENEWALS_PER_WINDOW = 4
"""A job renews its record this many times per window: three renewals in a row may fail before it looks dead."""
WARN_EVERY = 60.0
"""Seconds between the warnings of a keeper whose renewals fail (the store unreachable)."""


class JobLiveness:
    """Keeps one job's liveness record fresh on a daemon thread (:meth:`start`) until :meth:`stop`; ``clock``
    times its renewals (a test passes one it drives)."""

    def __init__(self, store: S3Store, dest: S3Uri, layout: JobLayout, record: OwnerRecord, etag: str, *,
                 conditional: bool, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.dest = dest
        self.key = owner_key(layout)
        self.record = record
        self.etag = etag
        self.conditional = conditional
        self.window = max(1.0, record.liveness)
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost: str | None = None
        #: The job's commit or abort is under way: its clean-up deletes the record, so a 404 then is no loss.
        self.ending = False
        self.renewals = 0
        self.last_ok = clock.monotonic()

    @property
    def uri(self) -> str:
        return f"s3://{self.dest.bucket}/{self.key}"

    @property
    def job_id(self) -> str:
        return self.record.job_id

    def start(self) -> JobLiveness:
        self._thread = threading.Thread(target=self._loop, name=f"s3commit-alive-{self.job_id[:8]}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        every = self.window / RENEWALS_PER_WINDOW
        warned: float | None = None
        while not self._clock.wait(self._stop, every):
            try:
                self.renew()
            except (PreconditionFailedError, NotFoundError):
                if not self.ending:
                    self._lose()
                return
            except S3CommitError as err:
                now = self._clock.monotonic()
                if warned is None or now - warned >= WARN_EVERY:
                    warned = now
                    log.warning("job %s: renewing its liveness record %s failed for %.0f s (the job is judged dead "
                                "by others after %g s of silence): %s", self.job_id, self.uri, now - self.last_ok,
                                self.window, err)

    def renew(self) -> None:
        """Rewrite the record (a new body, so a new ETag), with ``If-Match`` on the ETag held where the store honours
        it. Raises :class:`PreconditionFailedError` or :class:`NotFoundError` if it was taken or deleted."""
        with self._lock:
            if self._lost is not None:
                raise PreconditionFailedError(self._lost)
            renewed = self.record.renewed_once()
            body = renewed.to_json()
            if self.conditional:
                self.etag = self.store.conditional.put_if_match(self.dest.bucket, self.key, body, self.etag,
                                                                content_type="application/json")
            else:
                self.etag = self.store.objects.put_object(self.dest.bucket, self.key, body,
                                                          content_type="application/json")
            self.record = renewed
            self.renewals += 1
            self.last_ok = self._clock.monotonic()

    def _lose(self) -> None:
        self._lost = swept_reason(self.store, self.dest, self.key, self.job_id, self.window)
        log.error("%s", self._lost)

    def confirm(self) -> None:
        """Before the job commits: make sure it was not swept. A renewal that succeeded within the last half window
        proves it (the record's ``Last-Modified`` is no older, and nobody judges it dead before a whole window has
        passed since), else renew now and learn.

        Raises:
            JobSweptError: the job was judged dead and its record taken or deleted (nothing was changed here).
        """
        if self._lost is None and self._clock.monotonic() - self.last_ok >= self.window / 2:
            try:
                self.renew()
            except (PreconditionFailedError, NotFoundError):
                self._lose()
            except S3CommitError as err:
                log.warning("job %s: could not renew its liveness record before its commit: %s", self.job_id, err)
        if self._lost is not None:
            raise JobSweptError(self._lost)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)


def swept_reason(store: S3Store, dest: S3Uri, key: str, job_id: str, window: float) -> str:
    """Why a job's record is no longer its own: who took it (the record names its sweeper), or that it is gone."""
    uri = f"s3://{dest.bucket}/{key}"
    try:
        taken = OwnerRecord.from_json(store.objects.get_object(dest.bucket, key))
        who = f"its liveness record {uri} was taken by {taken.swept_by or 'another run of the job'}"
    except NotFoundError:
        who = f"its liveness record {uri} is gone (its directory was swept)"
    except (ValueError, S3CommitError):
        who = f"its liveness record {uri} was changed by another writer"
    return (f"job {job_id} was judged dead and swept: {who}, after it was silent longer than its liveness window "
            f"({window:g} s; its renewals had stopped or failed). Its uploads were aborted; it cannot commit. "
            "Nothing of another job's was touched. Run the job again; if its driver pauses for long, raise "
            "s3commit.job.liveness")


class Keepers:
    """The liveness records one process keeps fresh, one keeper per destination and job id, each ending with its job
    (:meth:`release`) or with the object that owns it. A part of
    :class:`~s3commit.commit.process_state.ProcessState`."""

    def __init__(self) -> None:
        self._keepers: dict[tuple[str, str, str], JobLiveness] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        with self._guard:
            return len(self._keepers)

    def keep(self, keeper: JobLiveness, *, owner: object | None = None) -> JobLiveness:
        """Start ``keeper`` as this process's keeper of its job (a re-sent setup replaces the last). ``owner``: the
        object whose collection ends it too (the Python API's committer); ``None``: it lives until :meth:`release`
        (a sidecar, whose committers live for one call)."""
        slot = _slot(keeper.dest, keeper.job_id)
        with self._guard:
            previous = self._keepers.pop(slot, None)
            self._keepers[slot] = keeper
        if previous is not None:
            previous.stop()
        keeper.start()
        if owner is not None:
            weakref.finalize(owner, self._release_if, slot, keeper)
        return keeper

    def keeper_of(self, dest: S3Uri, job_id: str) -> JobLiveness | None:
        with self._guard:
            return self._keepers.get(_slot(dest, job_id))

    def release(self, dest: S3Uri, job_id: str) -> None:
        """The job ended (committed or aborted): stop keeping its record (its clean-up deletes it)."""
        with self._guard:
            keeper = self._keepers.pop(_slot(dest, job_id), None)
        if keeper is not None:
            keeper.ending = True
            keeper.stop()

    def stop_all(self) -> None:
        """The process ends: stop every keeper (a record left is the sweep's to judge, as after a crash)."""
        with self._guard:
            keepers, self._keepers = list(self._keepers.values()), {}
        for keeper in keepers:
            keeper.stop()

    def _release_if(self, slot: tuple[str, str, str], keeper: JobLiveness) -> None:
        with self._guard:
            if self._keepers.get(slot) is keeper:
                del self._keepers[slot]
        keeper.stop()


def _slot(dest: S3Uri, job_id: str) -> tuple[str, str, str]:
    return dest.bucket, dest.key, job_id


def confirm_alive(store: S3Store, dest: S3Uri, layout: JobLayout, job_id: str, keepers: Keepers) -> None:
    """Before a job commits: renew its record if this process keeps it (``keepers``); else read it, and refuse if a
    sweeper took it. From here on the job's own clean-up may delete the record.

    Raises:
        JobSweptError: the job was swept (see :func:`swept_reason`).
    """
    keeper = keepers.keeper_of(dest, job_id)
    if keeper is not None:
        keeper.confirm()
        keeper.ending = True
        return
    key = owner_key(layout)
    try:
        record = OwnerRecord.from_json(store.objects.get_object(dest.bucket, key))
    except (NotFoundError, ValueError):
        return  # never set up here, or committed and cleaned up (a re-sent commit): the session decides
    except S3CommitError as err:
        log.warning("job %s: could not read its liveness record before its commit: %s", job_id, err)
        return
    if record.swept_by:
        raise JobSweptError(swept_reason(store, dest, key, job_id, max(1.0, record.liveness)))
