"""The commit lease: one job commit at a time per destination.

A job lists and deletes after it completes its files (an overwrite plan), so two commits to one destination must
not interleave: two overwrites would delete each other's new files. The unit serialized is the commit phase
(Completes, the overwrite plan, ``_SUCCESS``, the clean-up up to the journal's deletion), never the tasks.

The lease is one small object, ``<dest>/__s3commit_lease`` (a ``_``-prefixed name that Spark, pyarrow and Hive
skip, and that no overwrite deletes: :func:`s3commit.model.paths.is_scratch_key`). Its body names the holder
(:class:`Holder`: job id, host, process, when taken, the operation, its journal) and a duration.

- **Taken** with ``If-None-Match: *``: of racing jobs exactly one wins; the others wait, with jittered backoff,
  logging every ~30 s whom they wait for, up to ``lease_wait``; past it :class:`LeaseTimeoutError` names the holder.
- **Renewed** by its holder every quarter of its duration with ``If-Match`` on the ETag it holds (the body changes
  each time, so the ETag does).
- **Released** with ``If-Match`` on a PUT of its free state, on success and on failure: the object stays, recording
  the jobs committed under it (:func:`committed_here`) and the ETag a process remembers it free at (its next job
  takes it with one PUT). No conditional DELETE is needed, so a store that honours conditional PUTs only has it.
- **Expired** when the store's clock (the ``Date`` of the answer that read it) is past its ``Last-Modified`` plus
  its duration: never the client's clock. A holder on this host whose process is gone (same boot and PID namespace)
  is known dead at once. Either is **taken over** with ``If-Match`` on the exact ETag seen (a PUT of the taker's own
  body), so two waiters can never both win; the taker then settles the dead holder's interrupted commit (the
  caller's ``settle``: :func:`s3commit.commit.recovery.settle_interrupted`) before it commits its own.
- A holder that cannot renew for longer than the duration, or finds its lease taken over, is **lost**: the commit
  stops at its next step (:meth:`CommitLease.check`) with :class:`LeaseLostError`.

:func:`lease_for` decides from ``s3commit.commit.lease`` and what the store honours (:mod:`s3commit.store.capabilities`)
whether a job takes one: ``auto`` where conditional writes are honoured (else :class:`NoLease`, with a warning),
``on`` refuses to commit without them, ``off`` never. Nested destinations (``t/`` and ``t/p=1/``) have leases of
their own and are not serialized with each other.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from s3commit.commit.clock import SYSTEM_CLOCK, Clock
from s3commit.commit.process_state import SeenObjects
from s3commit.config.options import CommitterOptions, LeaseMode
from s3commit.errors import (
    ConfigError,
    LeaseLostError,
    LeaseTimeoutError,
    ManifestError,
    NotFoundError,
    PreconditionFailedError,
    S3CommitError,
)
from s3commit.model.lease_record import Committed, Holder, LeaseState, expired
from s3commit.model.object_info import ObjectInfo
from s3commit.model.paths import LEASE_NAME
from s3commit.model.uri import S3Uri
from s3commit.store.capabilities import LEASE_CHECKS
from s3commit.store.s3store import S3Store

log = logging.getLogger(__name__)

LOG_EVERY = 30.0
"""Seconds between the waiter's log lines naming the holder."""
FIRST_DELAY, MAX_DELAY = 0.05, 0.5
"""The waiter's backoff between reads of the lease (jittered, doubling)."""


def lease_key(dest: S3Uri) -> str:
    """The key of ``dest``'s commit lease."""
    return f"{dest.prefix}{LEASE_NAME}"


class CommitLease:
    """One operation's hold on a destination's commit lease (a context manager: acquire, then release).

    Args:
        settle: called with a dead holder of *another* job after its lease was taken over, before this operation
            goes on (it finishes or rolls back that job's interrupted commit, returning True if the job ends
            committed); it may raise, and the lease is then released and the error raised.
        clock: times the waiting and the renewals (a test passes one it drives); never whether a lease expired,
            which the store's clock says.
    """

    def __init__(self, store: S3Store, dest: S3Uri, job_id: str, *, operation: str = "commit", journal: str = "",
                 duration: float = 120.0, wait: float = 1200.0, settle: Callable[[Holder], bool] | None = None,
                 clock: Clock = SYSTEM_CLOCK, seen: SeenObjects | None = None) -> None:
        self.store = store
        self.dest = dest
        self.key = lease_key(dest)
        self.job_id = job_id
        self.holder = Holder.mine(job_id, operation, duration, journal)
        self.wait = wait
        self.settle = settle
        self._clock = clock
        self._seen = seen
        self._endpoint = store.options.endpoint_url or ""
        self.etag: str | None = None
        self.state = LeaseState()
        """What the lease object holds while this operation holds it (its holder: ours)."""
        self.taken_over: Holder | None = None
        """The dead holder this lease was taken from, if any."""
        self.settled: list[str] = []
        """Jobs whose interrupted commit this lease's taker finished (recorded as committed at release)."""
        self.waited = 0.0
        self.taken_as_remembered: str | None = None
        """The ETag this process remembered and took the lease on with one conditional PUT (:meth:`_take_as_released`;
        :data:`SeenObjects.ABSENT` where it created it): nothing held it between the moment this process saw that
        ETag (:meth:`remembered`) and now, so nothing a holder writes (the snapshot log) changed in between."""
        self.requests = 0
        """Requests this lease made (taking, reading, renewing, releasing)."""
        self._lost: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        self._ahead: Future[CommitLease] | None = None
        """The taking started by :meth:`acquire_ahead`, which :meth:`acquire` waits for."""
        self._remembered_ahead: str | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.dest.bucket}/{self.key}"

    @property
    def held(self) -> bool:
        return self.etag is not None and self._lost is None

    # --- taking it -------------------------------------------------------------------------------------------

    def acquire(self) -> CommitLease:
        """Take the lease, waiting for a live holder (up to ``wait``) and taking over a dead one. Idempotent. Where
        :meth:`acquire_ahead` started it, waits for that (and raises its error)."""
        if self._ahead is not None:
            return self._ahead.result()
        return self._acquire()

    def acquire_ahead(self) -> None:
        """Start taking the lease on a thread of its own, so that what the caller does before its commit needs it
        (reading the task commit messages: tens of milliseconds of CPU for 10,000 files) runs beside its requests
        rather than before them, and its first request is sent before that CPU holds the interpreter. The commit's
        :meth:`acquire` waits for it; :meth:`remembered` answers as it would have before. Idempotent."""
        if self._ahead is not None or self.etag is not None:
            return
        self._remembered_ahead = self.remembered()
        ahead: Future[CommitLease] = Future()

        def take() -> None:
            try:
                ahead.set_result(self._acquire())
            except BaseException as err:  # handed to acquire()
                ahead.set_exception(err)

        self._ahead = ahead
        threading.Thread(target=take, name=f"s3commit-lease-{self.job_id[:8]}", daemon=True).start()

    def _acquire(self) -> CommitLease:
        if self.etag is not None:
            return self
        started = self._clock.monotonic()
        logged = started
        delay = FIRST_DELAY
        while not self._take_as_released():
            seen = self._read()
            if seen is None:  # no lease object yet: the first commit here creates it
                if self._create():
                    break
                continue
            state, info, now = seen
            holder = state.holder if state is not None else None
            if state is not None and holder is None:  # free
                if self._replace(state, info):
                    break
                continue
            duration = holder.duration if holder is not None else self.holder.duration
            if expired(duration, info, now) or (holder is not None and holder.dead_here()):
                if self._replace(state or LeaseState(), info, taken_over=holder):
                    break
                continue
            waited = self._clock.monotonic() - started
            who = holder.describe() if holder is not None else f"an unreadable lease object ({self.uri})"
            if waited >= self.wait:
                raise LeaseTimeoutError(
                    f"job {self.job_id} waited {waited:.0f} s for the commit lease on {self.dest}, held by {who}; "
                    f"gave up (s3commit.commit.lease.wait={self.wait:g}). If that job is gone, its lease expires "
                    f"{duration:g} s after its last renewal, or release it by hand: s3commit recover {self.dest} "
                    "--release-lease --yes")
            if self._clock.monotonic() - logged >= LOG_EVERY:
                log.warning("job %s has waited %.0f s for the commit lease on %s, held by %s", self.job_id, waited,
                            self.dest, who)
                logged = self._clock.monotonic()
            self._clock.sleep(min(delay * (0.5 + random.random()), max(0.05, self.wait - waited)))
            delay = min(delay * 2, MAX_DELAY)
        self.waited = self._clock.monotonic() - started
        self._start_renewing()
        if self.taken_over is not None and self.taken_over.job_id != self.job_id and self.settle is not None:
            log.warning("job %s took over the commit lease on %s from %s, which is gone; settling its commit first",
                        self.job_id, self.dest, self.taken_over.describe())
            try:
                if self.settle(self.taken_over):
                    self.settled.append(self.taken_over.job_id)
            except BaseException:
                self.release()
                raise
        return self

    def _take_as_released(self) -> bool:
        """Where this process released the lease last, or read it free (:meth:`remember`), take
        it with ``If-Match`` on the ETag of that release, reading nothing: the lease is free if nothing wrote it
        since. Taken before the first read only; False (and a read follows) if another took it since."""
        if self._seen is None or (known := self._seen.get(self._endpoint, self.dest.bucket, self.key)) is None:
            return False
        self._seen.forget(self._endpoint, self.dest.bucket, self.key)  # tried once: the loop reads from here on
        etag, released = known
        if etag == SeenObjects.ABSENT:  # read at setup, there was none: created as the first commit does
            taken = self._create()
        else:
            taken = self._replace(released, ObjectInfo(key=self.key, size=-1, etag=etag))
        self.taken_as_remembered = etag if taken else None
        return taken

    def remembered(self) -> str | None:
        """The ETag this process remembers the lease free at (:data:`SeenObjects.ABSENT`: none there), if any: a
        caller that reads what the lease guards before taking it notes this first, and trusts that read where the
        lease is then taken on this very ETag (:attr:`taken_as_remembered`)."""
        if self._ahead is not None:  # as it was when the taking began
            return self._remembered_ahead
        known = self._seen.get(self._endpoint, self.dest.bucket, self.key) if self._seen is not None else None
        return known[0] if known is not None else None

    def remember(self) -> None:
        """Read the lease ahead of taking it (a job's setup, beside its other requests): where it is free, this
        process keeps its ETag (:class:`~s3commit.commit.process_state.SeenObjects`) and the commit takes it with
        one ``If-Match`` PUT (:meth:`_take_as_released`), reading nothing then; where there is none yet, with one
        ``If-None-Match`` PUT. If anything wrote it since, that PUT
        fails and the commit reads it as without this. Best effort: never raises."""
        if self._seen is None:
            return
        try:
            seen = self._read()
        except S3CommitError as err:
            log.debug("job %s: could not read the commit lease on %s ahead of its commit: %s", self.job_id,
                      self.dest, err)
            return
        if seen is None:  # none yet: the commit creates it (If-None-Match) without reading first
            self._seen.put(self._endpoint, self.dest.bucket, self.key, SeenObjects.ABSENT, None)
        elif seen[0] is not None and seen[0].holder is None:
            self._seen.put(self._endpoint, self.dest.bucket, self.key, seen[1].etag, seen[0])

    def _read(self) -> tuple[LeaseState | None, ObjectInfo, datetime] | None:
        """The lease object (None: there is none), its metadata and the store's clock; an unreadable body is
        ``None`` in the first place (judged by its age alone)."""
        self.requests += 1
        try:
            body, info, now = self.store.objects.read_object(self.dest.bucket, self.key)
        except NotFoundError:
            return None
        try:
            return LeaseState.from_json(body, source=self.uri), info, now
        except ManifestError as err:
            log.warning("%s; it is judged by its age alone", err)
            return None, info, now

    def _create(self) -> bool:
        self.requests += 1
        mine = LeaseState(self.holder)
        try:
            self.etag = self.store.objects.put_object(self.dest.bucket, self.key, mine.to_json(), if_none_match=True,
                                                      content_type="application/json")
        except PreconditionFailedError:
            return False
        self.state = mine
        return True

    def _replace(self, state: LeaseState, info: ObjectInfo, *, taken_over: Holder | None = None) -> bool:
        """Hold the lease in place of what ``info`` is (free, or a dead or expired holder's), conditional on the
        exact ETag seen: True if ours now (another waiter, or a renewal, changes the ETag first otherwise)."""
        self.requests += 1
        mine = state.held_by(self.holder)
        try:
            self.etag = self.store.conditional.put_if_match(self.dest.bucket, self.key, mine.to_json(), info.etag,
                                                            content_type="application/json")
        except (PreconditionFailedError, NotFoundError):
            return False
        self.state = mine
        self.taken_over = taken_over
        return True

    # --- keeping it ------------------------------------------------------------------------------------------

    def _start_renewing(self) -> None:
        self._renewer = threading.Thread(target=self._renew_loop, name=f"s3commit-lease-{self.job_id[:8]}",
                                         daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        every = self.holder.duration / 4
        last_ok = self._clock.monotonic()
        while not self._clock.wait(self._stop,
                                   every if self._clock.monotonic() - last_ok < every else min(1.0, every)):
            try:
                self.renew()
                last_ok = self._clock.monotonic()
            except (PreconditionFailedError, NotFoundError):
                self._lose(f"it was taken over ({self.uri} changed)")
                return
            except S3CommitError as err:
                if self._clock.monotonic() - last_ok > self.holder.duration:
                    self._lose(f"it could not be renewed for {self.holder.duration:g} s: {err}")
                    return
                log.warning("job %s: renewing the commit lease on %s failed (retrying): %s", self.job_id,
                            self.dest, err)

    def renew(self) -> None:
        """Rewrite the lease (a new body, so a new ETag) with ``If-Match`` on the ETag held."""
        with self._lock:
            if self.etag is None or self._lost is not None:
                return
            self.holder = self.holder.renewed_once()
            renewed = self.state.held_by(self.holder)
            self.requests += 1
            self.etag = self.store.conditional.put_if_match(self.dest.bucket, self.key, renewed.to_json(), self.etag,
                                                            content_type="application/json")
            self.state = renewed

    def _lose(self, why: str) -> None:
        self._lost = why
        log.error("job %s lost the commit lease on %s: %s; its commit stops at its next step", self.job_id,
                  self.dest, why)

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if the lease was lost (the commit must not go on)."""
        if self._lost is not None:
            raise LeaseLostError(f"job {self.job_id} lost the commit lease on {self.dest}: {self._lost}. Another job "
                                 f"may be settling this commit from its journal")

    # --- letting it go ---------------------------------------------------------------------------------------

    def release(self, *, committed: bool = False, files: int = -1) -> None:
        """Stop renewing and free the lease if it is still ours (``If-Match``), recording this job as committed
        (``committed``, with its ``files``) and any job whose commit the taking over settled. Never raises. A taking
        begun by :meth:`acquire_ahead` is waited for first (and what it took, released)."""
        if self._ahead is not None:
            self._ahead.exception()  # done (its error is acquire()'s to raise: nothing is held then)
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join()
        with self._lock:
            etag, self.etag = self.etag, None
        if etag is None or self._lost is not None:
            return
        done = {**({self.job_id: files} if committed else {}), **{job: -1 for job in self.settled}}
        self.requests += 1
        released = self.state.with_committed(done)
        try:
            etag = self.store.conditional.put_if_match(self.dest.bucket, self.key, released.to_json(), etag,
                                                       content_type="application/json")
            if self._seen is not None:
                self._seen.put(self._endpoint, self.dest.bucket, self.key, etag, released)
        except (PreconditionFailedError, NotFoundError):
            log.warning("job %s: its commit lease on %s had been taken over when it released it", self.job_id,
                        self.dest)
        except S3CommitError as err:
            log.warning("job %s: could not release its commit lease on %s (it expires %g s after its last renewal): "
                        "%s", self.job_id, self.dest, self.holder.duration, err)

    def __enter__(self) -> CommitLease:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def read_state(store: S3Store, dest: S3Uri) -> LeaseState | None:
    """The state of ``dest``'s lease object (None: there is none, or it is unreadable). One GET."""
    key = lease_key(dest)
    try:
        body, _info, _now = store.objects.read_object(dest.bucket, key)
        return LeaseState.from_json(body, source=f"s3://{dest.bucket}/{key}")
    except (NotFoundError, ManifestError):
        return None


def committed_here(store: S3Store, dest: S3Uri, job_id: str) -> Committed | None:
    """``dest``'s lease object's record of ``job_id``'s commit there, if it has one (the job's own record,
    whatever ``_SUCCESS`` says now)."""
    known = store.capabilities.get(dest.bucket)
    if known is None or not known.conditional_writes:
        return None
    state = read_state(store, dest)
    return state.committed(job_id) if state is not None else None


def release_by_hand(store: S3Store, dest: S3Uri) -> Holder | None:
    """Free ``dest``'s commit lease, for an operator who knows its holder is gone (``s3commit recover
    --release-lease``), conditional on the ETag read; returns who held it (None: no lease was held).

    Raises:
        LeaseLostError: the lease changed between the read and the write (its holder renewed it: it is alive).
    """
    key = lease_key(dest)
    try:
        body, info, _now = store.objects.read_object(dest.bucket, key)
    except NotFoundError:
        return None
    try:
        state = LeaseState.from_json(body, source=f"s3://{dest.bucket}/{key}")
    except ManifestError:
        state = LeaseState()  # unreadable: replaced by a free one
    else:
        if state.holder is None:
            return None  # free already
    try:
        store.conditional.put_if_match(dest.bucket, key, state.held_by(None).to_json(), info.etag,
                                       content_type="application/json")
    except (PreconditionFailedError, NotFoundError) as err:
        raise LeaseLostError(f"the commit lease on {dest} changed while it was being released (its holder renewed "
                             "it, or another job took it): it was left alone") from err
    return state.holder


class NoLease:
    """What a job holds where it takes no lease (``off``, or ``auto`` on a store without conditional writes)."""

    held = False
    taken_as_remembered = None
    requests = 0
    waited = 0.0
    taken_over = None

    def acquire(self) -> NoLease:
        return self

    def acquire_ahead(self) -> None:
        """Nothing to take."""

    def remembered(self) -> str | None:
        return None

    def check(self) -> None:
        """Nothing to lose."""

    def release(self, *, committed: bool = False, files: int = -1) -> None:
        """Nothing to release."""

    def __enter__(self) -> NoLease:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def lease_for(store: S3Store, dest: S3Uri, job_id: str, options: CommitterOptions, *, operation: str = "commit",
              journal: str = "", settle: Callable[[Holder], Any] | None = None,
              warn: bool = True, clock: Clock = SYSTEM_CLOCK,
              seen: SeenObjects | None = None) -> CommitLease | NoLease:
    """The lease a job's ``operation`` on ``dest`` takes, as ``options.lease`` and the store's capabilities say.

    Raises:
        ConfigError: ``lease=on`` where the store was not seen to honour conditional writes (nothing changed).
    """
    if options.lease is LeaseMode.OFF:
        return NoLease()
    known = store.capabilities.get(dest.bucket)
    if known is None or not known.conditional_writes:
        why = ("could not be probed" if known is None else
               "does not honour conditional writes (" + ", ".join(
                   f"{n}: {known.findings[n]}" for n in LEASE_CHECKS if n in known.findings) + ")")
        if options.lease is LeaseMode.ON:
            raise ConfigError(f"s3commit.commit.lease is on, but the store of {dest} {why}: concurrent commits "
                              "there cannot be serialized. Use a store that honours them, or set the lease to auto "
                              "or off (concurrent jobs on one destination may then delete each other's files)")
        if warn:
            log.warning("job %s: no commit lease on %s: the store %s; concurrent commits to this destination are not "
                        "protected", job_id, dest, why)
        return NoLease()
    return CommitLease(store, dest, job_id, operation=operation, journal=journal, duration=options.lease_duration,
                       wait=options.lease_wait, settle=settle, clock=clock, seen=seen)
