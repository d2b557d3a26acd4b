"""The committers: the lifecycles of jobs and tasks (*when*), and the one factory callers use: :func:`create_committer`.

The lifecycle every committer shares (:mod:`.base`), a task attempt (:mod:`.attempt`), the magic committer
(:mod:`.magic`), the staging committers (:mod:`.staging`), the rename baselines (:mod:`.rename`), and Structured
Streaming's file-sink batches (:mod:`.sink_batches`). *How* uploads are committed is
:mod:`s3commit.commit`'s (the magic task attempts' in-memory tracking too: :mod:`s3commit.commit.task_registry`).

May import: :mod:`s3commit.commit`, :mod:`s3commit.transfer`, :mod:`s3commit.store`, :mod:`s3commit.config`,
:mod:`s3commit.model`, :mod:`s3commit.errors`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from s3commit.commit.process_state import ProcessState
from s3commit.committers.attempt import TaskAttempt
from s3commit.committers.base import Committer
from s3commit.committers.magic import MagicCommitter, open_magic_file
from s3commit.committers.rename import RenameV1Committer, RenameV2Committer
from s3commit.committers.staging import DirectoryCommitter, PartitionedCommitter
from s3commit.config.options import CommitterName, CommitterOptions
from s3commit.errors import ConfigError
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

_CLASSES: dict[CommitterName, type[Committer]] = {
    CommitterName.MAGIC: MagicCommitter,
    CommitterName.DIRECTORY: DirectoryCommitter,
    CommitterName.PARTITIONED: PartitionedCommitter,
    CommitterName.RENAME_V1: RenameV1Committer,
    CommitterName.RENAME_V2: RenameV2Committer,
}


def create_committer(
    name: str | CommitterName,
    dest: str | S3Uri,
    *,
    job_id: str | None = None,
    store: S3Store | None = None,
    options: CommitterOptions | None = None,
    process: ProcessState | None = None,
    **option_overrides: Any,
) -> Committer:
    """Create a committer for one job writing to ``dest``.

    Args:
        name: ``magic``, ``directory``, ``partitioned``, ``rename-v1`` or ``rename-v2``.
        dest: ``s3://bucket/path`` or ``s3a://bucket/path``.
        job_id: the job's unique id; a new UUID if omitted. Every process of one job must use the same.
        store: the S3 store; default resolves endpoint and credentials like boto3.
        options: a full :class:`CommitterOptions`; ``option_overrides`` (``threads=``, ``part_size=``,
            ``conflict_mode=``, ``unique_filenames=``, ``success_marker=``, ...) replace single fields.
        process: what this process keeps across jobs (:class:`~s3commit.commit.process_state.ProcessState`); default
            the process's own. The sidecar hands its own; a test of several simulated processes one each.

    Raises:
        ConfigError: unknown committer name, unknown option, or an invalid value.
    """
    kind = CommitterName.parse(name, what="committer name")
    unknown = set(option_overrides) - CommitterOptions.field_names()
    if unknown:
        raise ConfigError(f"unknown committer option(s): {', '.join(sorted(unknown))}. "
                          f"Valid options are: {', '.join(sorted(CommitterOptions.field_names()))}")
    opts = replace(options or CommitterOptions(), **option_overrides)
    return _CLASSES[kind](dest, job_id=job_id, store=store, options=opts, process=process)


__all__ = [
    "Committer",
    "DirectoryCommitter",
    "MagicCommitter",
    "PartitionedCommitter",
    "RenameV1Committer",
    "RenameV2Committer",
    "TaskAttempt",
    "create_committer",
    "open_magic_file",
]
