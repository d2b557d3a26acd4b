"""What a committed task tells the job (:class:`TaskCommitMessage`): a pure value, small and picklable, that every
engine carries from its tasks to the job commit (the sidecar as an NDJSON record of its fields)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskCommitMessage:
    """What a committed task sends to the job committer (the driver): small and picklable."""

    job_id: str
    task_id: str
    task_attempt_id: str
    pendingset_key: str | None
    files: int
    bytes: int
    absolute_dirs: tuple[str, ...] = ()
    """Directories outside the destination (keys in its bucket) the task wrote files to; the job commit
    accepts uploads there only for directories a committed task declared."""
