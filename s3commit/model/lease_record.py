"""What a destination's commit lease object holds (:mod:`s3commit.commit.lease`): its holder, if any, and the jobs that
most recently committed there. Pure: no I/O.

The object stays once a destination has had a commit: free (no holder) between commits, it remembers the last
:data:`RECENT` jobs that committed, so that a job's own records say it committed when ``_SUCCESS`` no longer names
it (another job committed since, or ``_SUCCESS`` is off): a re-sent commit then reports success, an abort refuses.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from s3commit.errors import ManifestError
from s3commit.model.object_info import ObjectInfo

LEASE_FORMAT = "s3commit.CommitLease/2"
RECENT = 100
"""Jobs a lease object remembers as committed (the most recent first)."""
EXPIRY_SLACK = timedelta(seconds=1)
"""Added to a lease's duration: ``Last-Modified`` and ``Date`` have whole seconds."""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class Holder:
    """Who holds a lease. ``taken`` is the holder's clock, for people to read: expiry is judged by the store's."""

    job_id: str
    operation: str
    host: str
    pid: int
    token: str
    taken: str
    duration: float
    journal: str
    boot: str = ""
    pid_namespace: str = ""
    renewed: int = 0

    @classmethod
    def mine(cls, job_id: str, operation: str, duration: float, journal: str) -> Holder:
        return cls(job_id=job_id, operation=operation, host=socket.gethostname(), pid=os.getpid(),
                   token=uuid.uuid4().hex, taken=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   duration=duration, journal=journal, boot=_boot_id(), pid_namespace=_pid_namespace())

    def renewed_once(self) -> Holder:
        return replace(self, renewed=self.renewed + 1)

    def describe(self) -> str:
        return (f"job {self.job_id} ({self.operation}) on host {self.host}, process {self.pid}, since {self.taken}, "
                f"journal {self.journal or '(none)'}")

    def dead_here(self) -> bool:
        """True if this holder's process was on this host (same boot, same PID namespace) and is gone."""
        if not self.boot or self.boot != _boot_id() or self.pid_namespace != _pid_namespace():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@dataclass(frozen=True)
class Committed:
    """A job that committed to the destination, when (the committer's clock), and how many files (-1: unknown)."""

    job_id: str
    at: str
    files: int = -1


@dataclass(frozen=True)
class LeaseState:
    """A lease object's body: its holder (None: free) and the jobs that committed most recently."""

    holder: Holder | None = None
    recent: tuple[Committed, ...] = field(default_factory=tuple)

    def held_by(self, holder: Holder | None) -> LeaseState:
        return replace(self, holder=holder)

    def with_committed(self, jobs: dict[str, int]) -> LeaseState:
        """Free, with ``jobs`` (job id -> files committed, -1 unknown) first among the recent (at most
        :data:`RECENT`)."""
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        new = tuple(Committed(job_id, at, files) for job_id, files in jobs.items())
        kept = tuple(c for c in self.recent if c.job_id not in jobs)
        return LeaseState(None, (new + kept)[:RECENT])

    def committed(self, job_id: str) -> Committed | None:
        """The record of ``job_id``'s commit here, if it is among the recent."""
        return next((c for c in self.recent if c.job_id == job_id), None)

    def to_json(self) -> bytes:
        body: dict[str, Any] = {"format": LEASE_FORMAT, "holder": asdict(self.holder) if self.holder else None,
                                "recent": [asdict(c) for c in self.recent]}
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> LeaseState:
        """Raises :class:`ManifestError` naming ``source`` for anything else."""
        try:
            parsed = json.loads(data)
            if not isinstance(parsed, dict) or parsed.get("format") != LEASE_FORMAT:
                raise ValueError(f"not a {LEASE_FORMAT} document")
            holder = parsed.get("holder")
            fields = Holder.__dataclass_fields__
            return cls(Holder(**{k: v for k, v in holder.items() if k in fields}) if holder else None,
                       tuple(Committed(str(c["job_id"]), str(c.get("at", "")), int(c.get("files", -1)))
                             for c in parsed.get("recent") or ()))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise ManifestError(f"not a commit lease: {err}", source=source) from err


def expired(duration: float, info: ObjectInfo, now: datetime) -> bool:
    """Whether a lease last written at ``info.last_modified`` with that duration is past it at ``now`` (both the
    store's clock)."""
    if info.last_modified is None:
        return False
    return now > info.last_modified + timedelta(seconds=duration) + EXPIRY_SLACK
