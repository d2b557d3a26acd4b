"""What a committed task tells the job (:class:`TaskCommitMessage`): a pure value, small and picklable, that every
engine carries from its tasks to the job commit (the sidecar as an NDJSON record of its fields)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from s3commit.model.manifests import PendingSet, PendingUpload


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
    completed: tuple[tuple[str, int, str], ...] = ()
    """What a task commit that completed every upload of its pendingset (a snapshot destination) completed: each
    file's key, length and upload id. The job commit then takes the pendingset's entries from here and reads no
    pendingset of the task (the pendingset, saved the same, stays the record ``s3commit recover`` reads). Empty
    otherwise."""

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> TaskCommitMessage:
        """A message from its fields as JSON gives them back (lists for tuples).

        Raises:
            TypeError, ValueError: a field is missing, unknown or of the wrong shape.
        """
        completed = tuple((str(k), int(n), str(u)) for k, n, u in record.get("completed") or ())
        return cls(**{**record, "absolute_dirs": tuple(record.get("absolute_dirs") or ()), "completed": completed})

    def completed_pendingset(self, bucket: str) -> PendingSet | None:
        """The task's pendingset as its commit saved it, from :attr:`completed` (in ``bucket``, the destination's),
        or None where the message does not carry it."""
        if not self.completed:
            return None
        commits = PendingUpload.completed_files(bucket, self.completed, job_id=self.job_id,
                                                task_id=self.task_attempt_id)
        return PendingSet(commits=commits, job_id=self.job_id, extra_data={"task.attempt.id": self.task_attempt_id})


def carried_pendingsets(messages: Iterable[TaskCommitMessage | None], bucket: str) -> dict[str, PendingSet]:
    """The pendingsets ``messages`` carry whole (tasks that completed every upload at their commit), by key, in
    ``bucket`` (the destination's): the job commit does not read them. Not where two attempts' messages name one
    pendingset (the last saved wins: it is read)."""
    named: dict[str, list[TaskCommitMessage]] = {}
    for message in messages:
        if message is not None and message.pendingset_key is not None:
            named.setdefault(message.pendingset_key, []).append(message)
    carried = {key: found[0].completed_pendingset(bucket) for key, found in named.items() if len(found) == 1}
    return {key: pendingset for key, pendingset in carried.items() if pendingset is not None}


def completed_files(pendingset: PendingSet) -> tuple[tuple[str, int, str], ...]:
    """What :attr:`TaskCommitMessage.completed` carries for ``pendingset``: its entries where its task commit
    completed every one, else nothing (the job commit then reads the pendingset)."""
    if not pendingset.commits or not all(c.completed_at_task_commit for c in pendingset.commits):
        return ()
    return tuple((c.destination_key, c.length, c.upload_id) for c in pendingset.commits)
