"""What is done to one upload: complete it, abort it, revert it (delete the object it completed to).

The abort and revert here are the clean-up variants: they log a failure instead of raising it, so that
clean-up never hides the error that caused it. Which uploads to act on is for the callers to decide (the job
commit engine, :mod:`s3commit.commit.job_uploads`, the committers); retries and error translation are the store's
(no retry layer is added here).
"""

from __future__ import annotations

import logging

from s3commit.errors import S3CommitError, short_upload_id
from s3commit.model import checksums
from s3commit.model.manifests import PendingUpload
from s3commit.store.s3store import S3Store
from s3commit.store.uploads import CompleteCall

log = logging.getLogger(__name__)


def complete_call(pending: PendingUpload, *, if_none_match: bool = False) -> CompleteCall:
    """The Complete of one pending upload, naming the part checksums its ``.pending`` records, so that a server
    that validates refuses parts that are not those. ``if_none_match``: only if no object is at the key."""
    algorithm, part_checksums = checksums.recorded(pending.extra_data, pending.part_count, pending.filename)
    return CompleteCall(pending.bucket, pending.destination_key, pending.upload_id, tuple(pending.etags),
                        expected_length=pending.length, if_none_match=if_none_match, created_ms=pending.created,
                        checksum_algorithm=algorithm, part_checksums=tuple(part_checksums))


def commit_upload(store: S3Store, pending: PendingUpload, *, if_none_match: bool = False) -> str:
    """Complete one pending upload (idempotent: an already-completed one counts as done; :func:`complete_call`).
    ``if_none_match``: only if no object is at the key (``PreconditionFailedError`` otherwise)."""
    call = complete_call(pending, if_none_match=if_none_match)
    return store.uploads.complete_multipart_upload(call.bucket, call.key, call.upload_id, call.etags,
                                                   expected_length=call.expected_length, created_ms=call.created_ms,
                                                   checksum_algorithm=call.checksum_algorithm,
                                                   part_checksums=call.part_checksums, if_none_match=if_none_match)


def abort_upload_quietly(store: S3Store, bucket: str, key: str, upload_id: str) -> bool:
    """Abort; log (never raise) a failure, so cleanup cannot hide the error that caused it."""
    try:
        store.uploads.abort_multipart_upload(bucket, key, upload_id)
        return True
    except S3CommitError as err:
        log.warning("could not abort upload %s of s3://%s/%s: %s", short_upload_id(upload_id), bucket, key, err)
        return False


def revert_upload_quietly(store: S3Store, bucket: str, key: str) -> bool:
    """Delete a completed object again (job commit failed); log a failure."""
    try:
        store.objects.delete_object(bucket, key)
        return True
    except S3CommitError as err:
        log.warning("could not revert (delete) s3://%s/%s: %s", bucket, key, err)
        return False


def delete_completed_quietly(store: S3Store, pending: PendingUpload) -> bool:
    """Delete the object an upload completed at its task commit (an attempt that lost, a job aborted or dead), if
    the object at its key is still the one that upload made (one HEAD: a later commit's file there is kept); log a
    failure. Returns whether it was deleted."""
    try:
        if store.uploads.completed_object(pending.bucket, pending.destination_key, pending.etags,
                                          length=pending.length, created_ms=pending.created) is None:
            return False
        store.objects.delete_object(pending.bucket, pending.destination_key)
        return True
    except S3CommitError as err:
        log.warning("could not delete %s, completed at its task commit: %s", pending.dest_uri, err)
        return False
