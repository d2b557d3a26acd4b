"""What one task attempt is (:class:`TaskAttempt`: where its files go, how one is opened); the staging committers'
local root."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import IO, Any

from s3commit.config.options import CommitterOptions
from s3commit.errors import CommitStateError, ConfigError
from s3commit.model.paths import TaskAttemptId


class TaskAttempt(ABC):
    """One attempt of one task: where its files go, and how to open one."""

    def __init__(self, committer: Any, task_attempt_id: str) -> None:
        """``committer``: the :class:`~s3commit.committers.base.Committer` the attempt belongs to."""
        self.committer = committer
        self.id = TaskAttemptId.parse(task_attempt_id)
        self.task_attempt_id = str(self.id)
        self.task_id = self.id.task_id
        self.committed = False
        self.aborted = False

    @property
    @abstractmethod
    def work_path(self) -> str:
        """Where an engine writes this attempt's files itself (an S3 URI or a local directory)."""

    @abstractmethod
    def open(self, relative_path: str) -> IO[bytes]:
        """A binary writable file that becomes ``dest/<relative_path>`` when the job commits."""

    def open_absolute(self, location: str, name: str) -> IO[bytes]:
        """A binary writable file that becomes ``<location>/<name>`` when the job commits, for a directory
        outside the destination in the same bucket (Spark's custom partition locations).

        Raises:
            ConfigError: this committer cannot write outside its destination, or ``location`` is in
                another bucket.
        """
        raise self._no_absolute(location)

    def absolute_work_path(self, location: str, name: str) -> str:
        """Where an engine writes a file bound for ``<location>/<name>`` itself (see :meth:`open_absolute`)."""
        raise self._no_absolute(location)

    def _no_absolute(self, location: str) -> ConfigError:
        return ConfigError(f"the {self.committer.name} committer writes only under its destination "
                          f"{self.committer.dest}, not to {location}: use the magic committer for output to "
                          "absolute locations (custom partition locations)")

    def check_open(self) -> None:
        """Raise :class:`CommitStateError` if the attempt was committed or aborted already."""
        if self.committed or self.aborted:
            state = "committed" if self.committed else "aborted"
            raise CommitStateError(f"task attempt {self.task_attempt_id} is already {state}")


def local_staging_root(options: CommitterOptions) -> str:
    import tempfile

    return options.staging_dir or os.path.join(tempfile.gettempdir(), "s3commit-staging")
