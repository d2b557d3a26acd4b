"""What a recovery found and did (:class:`RecoveryReport`, :class:`RecoveryAction`), and why it may refuse
(:class:`RecoveryError`, :class:`AlreadyCommittedError`): the vocabulary of :mod:`s3commit.commit.recovery`. Pure."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

from s3commit.errors import S3CommitError


class RecoveryError(S3CommitError):
    """Recovery was refused (it would lose data) or could not finish; the message says what to do."""


class AlreadyCommittedError(RecoveryError):
    """A roll-back was refused because the job has committed: ``_SUCCESS`` names it, or its clean-up began."""


class RecoveryAction(enum.Enum):
    """What :func:`recover` did."""

    FINISHED = "finished"
    """An interrupted commit was completed: all the job's output is visible, ``_SUCCESS`` written."""
    CLEANED_UP = "cleaned-up"
    """The commit had finished and was cleaning up; the clean-up was completed."""
    ROLLED_BACK = "rolled-back"
    """An interrupted commit was undone: none of the job's output is visible."""
    ABORTED = "aborted"
    """No commit had started; the job's uploads were aborted and its directory deleted."""
    NOTHING = "nothing"
    """Nothing to do (see the message): no journal, already committed, or no trace of the job."""

    @property
    def changed(self) -> bool:
        return self is not RecoveryAction.NOTHING


@dataclass(frozen=True)
class RecoveryReport:
    """What :func:`recover` found and did. ``to_dict()`` is the CLI's ``--json`` output."""

    dest: str
    job_id: str
    action: RecoveryAction
    message: str
    committer: str | None = None
    journal_age_seconds: float | None = None
    uploads: int = 0
    """Uploads of the job: those its pendingsets hold (journal found), or those pending under the destination
    (no journal)."""
    completed: int = 0
    """Uploads completed by this recovery (forward)."""
    already_completed: int = 0
    """Uploads that were complete before this recovery started."""
    aborted: int = 0
    """Uploads aborted (roll-back, or uploads not in any pendingset)."""
    reverted: int = 0
    """Completed uploads deleted again (roll-back)."""
    deleted_by_overwrite: int = 0
    orphans_aborted: int = 0
    scratch_objects_deleted: int = 0
    success_written: bool = False

    @property
    def changed(self) -> bool:
        return self.action.changed

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["action"] = self.action.value
        data["changed"] = self.changed
        return data
