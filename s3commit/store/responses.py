"""Reading S3's answers: the server's clock from a response, and one read of a streamed GET body."""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

from s3commit.errors import StoreError, TransientError, translate_client_error


def answered_at(response: Any) -> datetime:
    """S3's clock when it answered (the ``Date`` header, which S3 always sends); this host's clock if absent."""
    date = (response.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
    try:
        return parsedate_to_datetime(date) if date else datetime.now(timezone.utc)
    except (TypeError, ValueError):
        return datetime.now(timezone.utc)


def read_get_body(body: Any, size: int, bucket: str, key: str, position: int) -> bytes:
    """One read of a GET's body; a failure, or an early end, is raised as a :class:`~s3commit.errors.StoreError`
    (translated once; :meth:`~s3commit.store.objects.ObjectRequests.stream_object` resumes it)."""
    try:
        data = body.read(size)
    except Exception as err:
        if isinstance(err, StoreError):
            raise
        raise translate_client_error(err, operation="GetObject", bucket=bucket, key=key) from err
    if not data:
        raise TransientError(f"s3://{bucket}/{key}: the body ended early, at byte {position}",
                             operation="GetObject", bucket=bucket, key=key)
    return bytes(data)
