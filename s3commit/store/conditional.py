"""Writes that check before they act: the collaborator of :class:`~s3commit.store.s3store.S3Store` that asks S3 to
replace or delete an object only if it is still what the caller saw (``If-Match``), the requests the commit lease,
liveness records and conditional overwrites are built on. (A create that must not meet an object,
``If-None-Match: *``, is a flag of :meth:`ObjectRequests.put_object
<s3commit.store.objects.ObjectRequests.put_object>` and :meth:`UploadRequests.complete_multipart_upload
<s3commit.store.uploads.UploadRequests.complete_multipart_upload>`.)

It sends through the store's :class:`~s3commit.store.requests.Requests` (its client, counters and one retry
owner), asks the store's :class:`~s3commit.store.body_policy.PayloadPolicy` what to check of a body, and reads back
through :class:`~s3commit.store.objects.ObjectRequests`. Every request declares its
:class:`~s3commit.store.retry.Retry`; errors are translated once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from s3commit.errors import NotFoundError, PreconditionFailedError, error_class_for_code
from s3commit.model.checksums import Sending
from s3commit.store.body_policy import PayloadPolicy
from s3commit.store.objects import DELETE_BATCH, ObjectRequests
from s3commit.store.requests import RequestGroup, Requests
from s3commit.store.retry import Attempts, Retry


class ConditionalRequests(RequestGroup):
    """``If-Match`` writes and deletes, one at a time or in batches."""

    def __init__(self, requests: Requests, bodies: PayloadPolicy, objects: ObjectRequests) -> None:
        super().__init__(requests, bodies)
        self.objects = objects

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str, *,
                     content_type: str | None = None) -> str:
        """Replace the object only if its ETag is still ``etag`` (``If-Match``); returns the new ETag.

        ``Retry.VERIFIED``: a 412 after an attempt whose answer was lost is read back, and if the object holds
        exactly ``body`` the replacement was ours. Otherwise :class:`PreconditionFailedError`: it changed (or is
        gone: some stores answer 412, AWS 404 :class:`NotFoundError`, for a missing key).
        """
        args: dict[str, Any] = {**self.options.write_args(), "IfMatch": etag}
        if content_type:
            args["ContentType"] = content_type
        sending = Sending(self.checksum_algorithm(bucket), body, etag_is_md5=self.bodies.verifies_etags(bucket))
        args.update(sending.args())
        attempts = Attempts()
        try:
            response = self.requests.call(
                "PutObject",
                lambda: sending.check(f"s3://{bucket}/{key}",
                                      self.client.put_object(Bucket=bucket, Key=key, Body=body, **args)),
                retry=Retry.VERIFIED, attempts=attempts, bucket=bucket, key=key)
        except (PreconditionFailedError, NotFoundError) as err:
            if not attempts.ambiguous:
                raise
            read = self.objects.read_if_exists(bucket, key)
            if read is None or read[0] != body:
                raise
            err.__suppress_context__ = True
            return read[1].etag
        self.counters.add_bytes(uploaded=len(body))
        return str(response.get("ETag", ""))

    def delete_if_match(self, bucket: str, key: str, etag: str) -> None:
        """Delete the object only if its ETag is still ``etag`` (``If-Match`` on DeleteObject).

        ``Retry.VERIFIED``: after an attempt whose answer was lost, a missing object (404, or a 412 for a key that
        is gone) counts as deleted by us. Raises :class:`PreconditionFailedError` when the object changed, and
        :class:`NotFoundError` when it was already gone before any attempt of ours.
        """
        attempts = Attempts()
        try:
            self.requests.call("DeleteObject",
                               lambda: self.client.delete_object(Bucket=bucket, Key=key, IfMatch=etag),
                               retry=Retry.VERIFIED, attempts=attempts, bucket=bucket, key=key)
        except (PreconditionFailedError, NotFoundError):
            if attempts.ambiguous and self.objects.read_if_exists(bucket, key) is None:
                return
            raise

    def delete_objects_if_match(self, bucket: str, objects: Iterable[tuple[str, str]]) -> tuple[int, list[str]]:
        """Delete ``(key, etag)`` pairs in batches of 1,000 (DeleteObjects), each only if its ETag is still the
        one given; returns how many were deleted and the keys kept because they changed (``PreconditionFailed``).
        ``Retry.IDEMPOTENT``: a key already gone counts as deleted. Other per-key errors raise."""
        deleted, kept = 0, []
        batch: list[tuple[str, str]] = []
        for item in objects:
            batch.append(item)
            if len(batch) == DELETE_BATCH:
                done, changed = self._delete_batch_if_match(bucket, batch)
                deleted, batch = deleted + done, []
                kept.extend(changed)
        if batch:
            done, changed = self._delete_batch_if_match(bucket, batch)
            deleted += done
            kept.extend(changed)
        return deleted, kept

    def _delete_batch_if_match(self, bucket: str, batch: list[tuple[str, str]]) -> tuple[int, list[str]]:
        response = self.objects.delete_batch(bucket, batch)
        errors = response.get("Errors") or []
        changed = [e.get("Key", "") for e in errors if e.get("Code") in ("PreconditionFailed", "412")]
        others = [e for e in errors if e.get("Code") not in ("PreconditionFailed", "412", "NoSuchKey")]
        if others:
            first = others[0]
            raise error_class_for_code(first.get("Code"))(
                f"{len(others)} of {len(batch)} deletes failed; first: {first.get('Message', '')}",
                operation="DeleteObjects", bucket=bucket, key=first.get("Key"), code=first.get("Code"))
        return len(batch) - len(errors), changed
