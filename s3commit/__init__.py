"""s3commit: fast, safe S3 output commits through multipart uploads (magic and staging committers).

Typical use::

    from s3commit import create_committer
    committer = create_committer("magic", "s3://bucket/table")
    committer.setup_job()
    attempt = committer.setup_task(committer.new_task_attempt_id(0))
    with attempt.open("part-00000.parquet") as f:
        f.write(data)
    committer.commit_job([committer.commit_task(attempt)])
"""

from s3commit._version import __version__
from s3commit.commit.snapshot_admin import (
    current_files,
    disable_snapshots,
    enable_snapshots,
    snapshot_history,
    vacuum_snapshots,
)
from s3commit.committers import (
    Committer,
    TaskAttempt,
    create_committer,
    open_magic_file,
)
from s3commit.config.options import CommitterName, CommitterOptions, ConflictMode, RetryPolicy, StoreOptions
from s3commit.errors import (
    AccessDeniedError,
    CommitConflictError,
    CommitStateError,
    ConfigError,
    EndpointUnreachableError,
    JobCommitError,
    ManifestError,
    NoSuchBucketError,
    NoSuchUploadError,
    NotFoundError,
    S3CommitError,
    StoreError,
    ThrottledError,
)
from s3commit.model.manifests import PendingSet, PendingUpload, SuccessData
from s3commit.model.task_message import TaskCommitMessage
from s3commit.model.uri import S3Uri
from s3commit.store.s3store import S3Store

__all__ = [
    "AccessDeniedError",
    "CommitConflictError",
    "CommitStateError",
    "Committer",
    "CommitterName",
    "CommitterOptions",
    "ConfigError",
    "ConflictMode",
    "EndpointUnreachableError",
    "JobCommitError",
    "ManifestError",
    "NoSuchBucketError",
    "NoSuchUploadError",
    "NotFoundError",
    "PendingSet",
    "PendingUpload",
    "RetryPolicy",
    "S3CommitError",
    "S3Store",
    "S3Uri",
    "StoreError",
    "StoreOptions",
    "SuccessData",
    "TaskAttempt",
    "TaskCommitMessage",
    "ThrottledError",
    "__version__",
    "create_committer",
    "current_files",
    "disable_snapshots",
    "enable_snapshots",
    "open_magic_file",
    "snapshot_history",
    "vacuum_snapshots",
]
