"""Assertions and helpers for tests against S3: object listings, pending uploads, request costs.

Tests assert behaviour *and* cost: "no pending uploads left", "exact object sets after
commit", "request counts per operation". These helpers do the listing (paginated, so they work on real S3
too) and produce failure messages that say what was found. They take a plain boto3 client, and for request
counts anything with a ``stats()`` method returning a :class:`~s3commit.testing._sim.stats.StatsSnapshot` (an
:class:`~s3commit.testing.server.S3TestServer`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from s3commit.errors import short_upload_id
from s3commit.testing._sim.stats import StatsSnapshot

_SHOWN = 20  # entries listed in a failure message before "... and N more"


@dataclass(frozen=True)
class ListedUpload:
    """A multipart upload that was started and neither completed nor aborted."""

    key: str
    upload_id: str

    def __str__(self) -> str:
        return f"{self.key} (upload {short_upload_id(self.upload_id)})"


def list_keys(client: Any, bucket: str, prefix: str = "", *, page_size: int = 1000) -> list[str]:
    """All keys under ``prefix`` in ``bucket``, sorted (ListObjectsV2, every page).

    Args:
        client: a boto3 S3 client.
        bucket: the bucket.
        prefix: only keys starting with this.
        page_size: keys per request (S3's maximum and default is 1,000).
    """
    keys: list[str] = []
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": page_size}):
        keys.extend(entry["Key"] for entry in page.get("Contents", []))
    return sorted(keys)


def parquet_column(client: Any, bucket: str, prefix: str, column: str = "id") -> list[Any]:
    """Every value of ``column`` in the Parquet objects under ``prefix``, sorted (needs pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values: list[Any] = []
    for key in list_keys(client, bucket, prefix):
        if key.endswith(".parquet"):
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            values += pq.read_table(pa.BufferReader(body)).column(column).to_pylist()
    return sorted(values)


def visible_keys(client: Any, bucket: str, prefix: str = "") -> list[str]:
    """What a reader of ``prefix`` sees: every key but the committers' scratch (job directories, a probe's, the
    commit lease)."""
    from s3commit.model.paths import is_scratch_key

    return [k for k in list_keys(client, bucket, prefix) if not is_scratch_key(k)]


def held_leases(client: Any, bucket: str, prefix: str = "") -> list[str]:
    """Commit leases under ``prefix`` that a holder still holds (a free lease object stays between commits: it
    records the jobs that committed there)."""
    from s3commit.model.lease_record import LeaseState
    from s3commit.model.paths import LEASE_NAME

    held = []
    for key in list_keys(client, bucket, prefix):
        if key.rsplit("/", 1)[-1] == LEASE_NAME:
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            if LeaseState.from_json(body, source=key).holder is not None:
                held.append(key)
    return held


def list_pending_uploads(client: Any, bucket: str, prefix: str = "") -> list[ListedUpload]:
    """Multipart uploads in progress under ``prefix``, sorted by key (ListMultipartUploads, every page)."""
    uploads: list[ListedUpload] = []
    paginator = client.get_paginator("list_multipart_uploads")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        uploads.extend(ListedUpload(u["Key"], u["UploadId"]) for u in page.get("Uploads", []))
    return sorted(uploads, key=lambda upload: (upload.key, upload.upload_id))


def assert_no_pending_uploads(client: Any, bucket: str, prefix: str = "") -> None:
    """Fail if any multipart upload under ``prefix`` is still pending (neither completed nor aborted).

    Raises:
        AssertionError: listing each pending key with its short upload id.
    """
    pending = list_pending_uploads(client, bucket, prefix)
    if pending:
        shown = "\n  ".join(str(upload) for upload in pending[:_SHOWN])
        more = f"\n  ... and {len(pending) - _SHOWN} more" if len(pending) > _SHOWN else ""
        raise AssertionError(
            f"{len(pending)} pending multipart upload(s) under s3://{bucket}/{prefix}:\n  {shown}{more}"
        )


class StatsSource(Protocol):
    """Anything that reports simulator stats (an ``S3TestServer``)."""

    def stats(self) -> StatsSnapshot: ...


class RequestCounter:
    """Counts the requests the simulator served while the ``with`` block ran.

    ``counter.delta`` is the per-operation delta (``{"UploadPart": 4, ...}``; operations with no request
    are absent); ``counter["PutObject"]`` reads one entry (0 if absent); ``counter.stats`` has the full
    :class:`StatsSnapshot` delta (bytes, faults, delays). Inside the block they are read live.

    Other traffic to the same server during the block is counted too; keep tests that count requests from
    sharing a server concurrently (e.g. with pytest-xdist, give each worker its own server).
    """

    def __init__(self, source: StatsSource) -> None:
        self._source = source
        self._before: StatsSnapshot | None = None
        self._after: StatsSnapshot | None = None

    def __enter__(self) -> RequestCounter:
        self._before = self._source.stats()
        self._after = None
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._after = self._source.stats()

    @property
    def stats(self) -> StatsSnapshot:
        """Everything the simulator counted between entering the block and leaving it (or now)."""
        if self._before is None:
            raise RuntimeError("RequestCounter is used as a context manager: `with count_requests(server):`")
        after = self._after if self._after is not None else self._source.stats()
        return after.minus(self._before)

    @property
    def delta(self) -> dict[str, int]:
        """Requests per operation name."""
        return dict(self.stats.requests)

    @property
    def total(self) -> int:
        """All requests."""
        return self.stats.total_requests

    def __getitem__(self, operation: str) -> int:
        return self.delta.get(str(getattr(operation, "value", operation)), 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self.delta)

    def __repr__(self) -> str:
        return f"RequestCounter({self.delta})"


def count_requests(server: StatsSource) -> RequestCounter:
    """``with count_requests(server) as counter: ...`` then ``counter.delta`` (see :class:`RequestCounter`)."""
    return RequestCounter(server)
