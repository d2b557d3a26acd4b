"""Objects: whole-object writes, reads (ranged and streamed), metadata, listings, deletes and server-side copies, the
collaborator of :class:`~s3commit.store.s3store.S3Store` for requests about objects that exist.

Every request declares its :class:`~s3commit.store.retry.Retry` and is sent through the store's
:class:`~s3commit.store.requests.Requests` (one retry owner, errors translated once, counted); what is checked of a
body sent is asked of the store's :class:`~s3commit.store.body_policy.PayloadPolicy`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Any, cast

from s3commit.errors import NotFoundError, PreconditionFailedError, StoreError, error_class_for_code
from s3commit.model.checksums import Sending
from s3commit.model.object_info import KeyPage, ObjectInfo
from s3commit.store import many_gets
from s3commit.store.body_policy import Payload, PayloadPolicy, sha256_hex
from s3commit.store.lean_complete import LeanCompletes, key_page_from
from s3commit.store.lean_http import LeanLoop, Origin
from s3commit.store.ranged_gets import RangedGets
from s3commit.store.requests import RequestGroup, Requests
from s3commit.store.responses import answered_at, read_get_body
from s3commit.store.retry import Attempts, Retry

DELETE_BATCH = 1000
"""S3's maximum number of keys in one DeleteObjects request."""


class ObjectRequests(RequestGroup):
    """PUT, GET, HEAD, List, Delete and Copy of objects (a PUT may be ``If-None-Match``; the writes that check an
    ETag first are :class:`~s3commit.store.conditional.ConditionalRequests`)."""

    def __init__(self, requests: Requests, bodies: PayloadPolicy) -> None:
        super().__init__(requests, bodies)
        self._ranges = RangedGets()
        #: Requests sent by s3commit's lean path where ``s3commit.store.lean-requests`` asks (else None): the
        #: store's one, for its Completes (:mod:`s3commit.store.uploads`), its listings' pages and whole-object GETs.
        self.lean = LeanCompletes() if self.options.lean_requests else None

    def put_object(self, bucket: str, key: str, body: bytes | bytearray | memoryview, *, if_none_match: bool = False,
                   content_type: str | None = None) -> str:
        """Write a whole object; returns its ETag. ``Retry.IDEMPOTENT`` (same bytes).

        With ``if_none_match`` the key must not exist (``If-None-Match: *``): ``Retry.VERIFIED``. When an
        attempt's answer was lost and a retry then meets an object (412), the object is read back and, if it
        holds exactly ``body``, it is ours and the PUT succeeded; otherwise, and always when no attempt can
        have applied (a 412 first, or after 503s only), :class:`PreconditionFailedError`: someone else's.
        """
        args: dict[str, Any] = dict(self.options.write_args())
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if content_type:
            args["ContentType"] = content_type
        sending = Sending(self.checksum_algorithm(bucket), body, etag_is_md5=self.bodies.verifies_etags(bucket))
        args.update(sending.args())
        signed, sha256 = self.bodies.signs_payload(bucket), sha256_hex(sending.algorithm, sending.value)

        def send() -> Any:
            response = self.client.put_object(Bucket=bucket, Key=key, Body=Payload(body, signed=signed,
                                                                                  sha256_hex=sha256), **args)
            if not sending.arrived(str(response.get("ETag", ""))) and if_none_match:
                self.client.delete_object(Bucket=bucket, Key=key)  # ours, corrupt: the retry must not meet it
            return sending.check(f"s3://{bucket}/{key}", response)

        attempts = Attempts()
        try:
            response = self.requests.call("PutObject", send,
                                          retry=Retry.VERIFIED if if_none_match else Retry.IDEMPOTENT,
                                          attempts=attempts, bucket=bucket, key=key)
        except PreconditionFailedError as err:
            read = self.read_if_exists(bucket, key) if attempts.ambiguous else None
            if read is None or read[0] != body:
                raise
            err.__suppress_context__ = True
            return read[1].etag
        self.counters.add_bytes(uploaded=memoryview(body).nbytes)
        return str(response.get("ETag", ""))

    def get_object(self, bucket: str, key: str, *, start: int | None = None, end: int | None = None,
                   attempts: Attempts | None = None) -> bytes:
        """Read an object, or the byte range ``[start, end)``. ``Retry.IDEMPOTENT``; ``attempts``: those made
        already, elsewhere (:meth:`get_many`'s first), which the policy's budget counts."""
        args: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if start is not None or end is not None:
            first = start or 0
            args["Range"] = f"bytes={first}-{'' if end is None else end - 1}"

        client, lean = self.client, self.lean

        def read() -> bytes:
            return bytes(client.get_object(**args)["Body"].read())

        send = read
        if lean is not None and "Range" not in args and lean.usable(client, bucket):
            def send() -> bytes:  # one attempt, built and signed here (s3commit.store.lean_complete)
                return cast(bytes, lean.attempt(bucket, lambda: lean.get_object(client, bucket, key), read))

        return self.requests.call("GetObject", send, retry=Retry.IDEMPOTENT, attempts=attempts, bucket=bucket,
                                  key=key)

    def can_get_many(self, bucket: str) -> bool:
        """Whether :meth:`get_many` may read ``bucket``'s objects (the lean path serves it: see
        :mod:`s3commit.store.many_gets`)."""
        if type(self).get_object is not ObjectRequests.get_object:
            return False  # a subclass that sees each GET (a fault injected, an audit) is called for each one
        return self.lean is not None and self.lean.own_connections(self.client, bucket) is not None

    def get_many(self, bucket: str, keys: Iterable[str], *, ahead: int,
                 loop: LeanLoop | None = None) -> Iterator[tuple[str, Future[bytes]]]:
        """Whole objects, ``(key, future of its bytes)`` in the order of ``keys``, at most ``ahead`` GETs sent
        beyond the one handed out last, their first attempts from one event loop on connections of s3commit's own
        (a fifth of botocore's CPU a GET), a failed one retried as :meth:`get_object` retries (call
        :meth:`can_get_many` first). ``loop``: the caller's (:meth:`lean_loop`), whose connections they use and
        leave open; else one of their own. A caller that stops early cancels what is in flight."""
        if self.lean is None:
            raise ValueError("get_many needs s3commit.store.lean-requests (see can_get_many)")
        return many_gets.get_many(self.requests, self.lean, self.get_object, bucket, keys, ahead=ahead, loop=loop)

    def lean_loop(self, bucket: str) -> LeanLoop | None:
        """A loop whose connections to ``bucket``'s store a run of lean requests shares (:meth:`get_many`, then
        :meth:`UploadRequests.complete_many <s3commit.store.uploads.UploadRequests.complete_many>`), opened ahead
        of them by its ``warm``; None where the lean path does not serve ``bucket``. The caller closes it."""
        own = self.lean.own_connections(self.client, bucket) if self.lean is not None else None
        if own is None:
            return None
        target, settings = own
        return LeanLoop(settings, origin=Origin.of(target.base))

    def stream_object(self, bucket: str, key: str, *, start: int, end: int,
                      chunk_size: int = 1024 * 1024) -> Iterator[bytes]:
        """Bytes ``[start, end)`` of an object as they arrive, in chunks of at most ``chunk_size``: one GET
        streamed (:mod:`s3commit.store.ranged_gets`), never the whole range in memory. ``Retry.IDEMPOTENT``, in
        one retry loop (:meth:`Requests.retrying`): a GET that fails, or whose body fails part way (a reset, a
        timeout, a short body), is followed by a new GET from the next byte not yet read, and all of them share
        the policy's attempts; each retry is counted once.
        """
        position = start
        seen = Attempts()
        try:
            for attempt in self.requests.retrying("GetObject", Retry.IDEMPOTENT):
                with attempt:
                    body = self.requests.attempt("GetObject", lambda p=position: self._ranges.get(  # type: ignore[misc]
                        self.client, bucket, key, p, end - 1), seen, bucket=bucket, key=key)["Body"]
                    try:
                        while position < end:
                            data = read_get_body(body, min(chunk_size, end - position), bucket, key, position)
                            position += len(data)
                            yield data
                    finally:
                        body.close()
        except StoreError as err:
            self.requests.gave_up("GetObject", err, seen)
            raise

    def head_object(self, bucket: str, key: str, *, checksums: bool = False) -> ObjectInfo:
        """Metadata of an object (``checksums``: with the checksums S3 keeps); raises :class:`NotFoundError`."""
        mode = {"ChecksumMode": "ENABLED"} if checksums else {}
        response = self.requests.call("HeadObject", lambda: self.client.head_object(Bucket=bucket, Key=key, **mode),
                                      retry=Retry.IDEMPOTENT, bucket=bucket, key=key)
        return ObjectInfo(key, int(response.get("ContentLength", 0)), str(response.get("ETag", "")),
                          response.get("LastModified"), tuple((name[8:], str(value)) for name, value in
                                                              response.items() if name.startswith("Checksum")
                                                              and name != "ChecksumType"))

    def list_objects(self, bucket: str, prefix: str, *, delimiter: str | None = None,
                     start_after: str | None = None) -> Iterator[ObjectInfo]:
        """Objects under ``prefix``, all pages; with a delimiter also common prefixes (``size == -1``); with
        ``start_after``, from the first key after it (S3's order: a store that ignores it lists from the start).
        ``Retry.IDEMPOTENT``."""
        token: str | None = None
        while True:
            args = _list_args(bucket, prefix, delimiter, token, start_after)
            page = self.requests.call("ListObjectsV2", self._page_sender(bucket, args),
                                      retry=Retry.IDEMPOTENT, bucket=bucket, key=prefix)
            for common in page.get("CommonPrefixes", []) or []:
                yield ObjectInfo(common["Prefix"], -1)
            for obj in page.get("Contents", []) or []:
                yield ObjectInfo(obj["Key"], int(obj.get("Size", 0)), str(obj.get("ETag", "")),
                                 obj.get("LastModified"))
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def list_key_pages(self, bucket: str, prefix: str, *, start_after: str | None = None) -> Iterator[KeyPage]:
        """:meth:`list_objects` (no delimiter) a page at a time, as the page's keys and ETags: no object per entry,
        for the listings of 100,000s of keys a commit reads beside its Completes. ``Retry.IDEMPOTENT``."""
        token: str | None = None
        while True:
            args = _list_args(bucket, prefix, None, token, start_after)
            page = self.requests.call("ListObjectsV2", self._key_page_sender(bucket, args), retry=Retry.IDEMPOTENT,
                                      bucket=bucket, key=prefix)
            yield page
            if page.token is None:
                return
            token = page.token

    def _page_sender(self, bucket: str, args: dict[str, Any]) -> Callable[[], Any]:
        """One attempt at a ListObjectsV2 page: by the lean path where it is usable for ``bucket`` (botocore's where
        the store refuses it, from then on), else by botocore."""
        client, lean = self.client, self.lean

        def by_botocore() -> Any:
            return client.list_objects_v2(**args)

        if lean is None or not lean.usable(client, bucket):
            return by_botocore

        def send() -> Any:
            return lean.attempt(bucket, lambda: lean.list_page(client, bucket, args), by_botocore)
        return send

    def _key_page_sender(self, bucket: str, args: dict[str, Any]) -> Callable[[], KeyPage]:
        """:meth:`_page_sender`, the page as its keys and ETags."""
        client, lean = self.client, self.lean

        def by_botocore() -> KeyPage:
            return key_page_from(client.list_objects_v2(**args))

        if lean is None or not lean.usable(client, bucket):
            return by_botocore

        def send() -> KeyPage:
            return cast(KeyPage, lean.attempt(bucket, lambda: lean.list_keys_page(client, bucket, args), by_botocore))
        return send

    def delete_object(self, bucket: str, key: str) -> None:
        """Delete one object (a missing one is fine). ``Retry.IDEMPOTENT``."""
        self.requests.call("DeleteObject", lambda: self.client.delete_object(Bucket=bucket, Key=key),
                           retry=Retry.IDEMPOTENT, bucket=bucket, key=key)

    def delete_objects(self, bucket: str, keys: Iterable[str]) -> int:
        """Delete keys in batches of 1,000; returns how many were deleted. ``Retry.IDEMPOTENT``."""
        batch: list[str] = []
        deleted = 0
        for key in keys:
            batch.append(key)
            if len(batch) == DELETE_BATCH:
                deleted += self._delete_batch(bucket, batch)
                batch = []
        if batch:
            deleted += self._delete_batch(bucket, batch)
        return deleted

    def delete_batch(self, bucket: str, objects: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """One quiet DeleteObjects of up to 1,000 ``(key, etag)`` pairs (an ETag of ``""``: whatever the key holds,
        else only if it still has that ETag): its answer, whose ``Errors`` name the keys not deleted. Built and
        signed by the lean path where it serves the bucket (a tenth of botocore's CPU), else by botocore.
        ``Retry.IDEMPOTENT``."""
        client, lean = self.client, self.lean

        def by_botocore() -> Any:
            request = {"Objects": [{"Key": key, "ETag": etag} if etag else {"Key": key} for key, etag in objects],
                       "Quiet": True}
            return client.delete_objects(Bucket=bucket, Delete=request)

        send = by_botocore
        if lean is not None and lean.usable(client, bucket):
            def send() -> Any:  # one attempt, built and signed here (s3commit.store.lean_complete)
                return lean.attempt(bucket, lambda: lean.delete_objects(client, bucket, objects), by_botocore)

        response: dict[str, Any] = self.requests.call("DeleteObjects", send, retry=Retry.IDEMPOTENT, bucket=bucket,
                                                      key=objects[0][0])
        return response

    def _delete_batch(self, bucket: str, keys: list[str]) -> int:
        response = self.delete_batch(bucket, [(key, "") for key in keys])
        errors = response.get("Errors") or []
        if errors:
            first = errors[0]
            raise error_class_for_code(first.get("Code"))(
                f"{len(errors)} of {len(keys)} deletes failed; first: {first.get('Message', '')}",
                operation="DeleteObjects", bucket=bucket, key=first.get("Key"), code=first.get("Code"),
            )
        return len(keys)

    def copy_object(self, bucket: str, src_key: str, dst_key: str, *, size: int | None = None) -> str:
        """Server-side copy (what a "rename" costs on S3); returns the new ETag. ``Retry.IDEMPOTENT``.

        ``size`` (if known from a listing) is only used to count bytes copied; otherwise it is looked up.
        """
        if size is None:
            size = self.head_object(bucket, src_key).size
        args = dict(self.options.write_args())
        response = self.requests.call(
            "CopyObject",
            lambda: self.client.copy_object(Bucket=bucket, Key=dst_key,
                                            CopySource={"Bucket": bucket, "Key": src_key}, **args),
            retry=Retry.IDEMPOTENT, bucket=bucket, key=dst_key,
        )
        self.counters.add_bytes(copied=size)
        return str(response.get("CopyObjectResult", {}).get("ETag", ""))

    def read_object(self, bucket: str, key: str) -> tuple[bytes, ObjectInfo, datetime]:
        """The object's bytes, its metadata (ETag, ``Last-Modified``) and the store's clock when it answered (the
        ``Date`` header): ages judged by the store's clock, never this host's. ``Retry.IDEMPOTENT``; raises
        :class:`NotFoundError`."""
        def read() -> tuple[bytes, ObjectInfo, datetime]:
            response = self.client.get_object(Bucket=bucket, Key=key)
            body = bytes(response["Body"].read())
            info = ObjectInfo(key, len(body), str(response.get("ETag", "")), response.get("LastModified"))
            return body, info, answered_at(response)

        result: tuple[bytes, ObjectInfo, datetime] = self.requests.call("GetObject", read, retry=Retry.IDEMPOTENT,
                                                                        bucket=bucket, key=key)
        return result

    def read_if_exists(self, bucket: str, key: str) -> tuple[bytes, ObjectInfo] | None:
        try:
            body, info, _ = self.read_object(bucket, key)
        except NotFoundError:
            return None
        return body, info

    def delete_quietly(self, bucket: str, key: str) -> None:
        """Delete an object, ignoring any failure (clean-up of scratch objects)."""
        with contextlib.suppress(StoreError):
            self.requests.call("DeleteObject", lambda: self.client.delete_object(Bucket=bucket, Key=key),
                               retry=Retry.IDEMPOTENT, bucket=bucket, key=key)


def _list_args(bucket: str, prefix: str, delimiter: str | None, token: str | None,
               start_after: str | None) -> dict[str, Any]:
    """A ListObjectsV2 page's arguments as botocore names them: after ``token`` where the listing has one, else after
    ``start_after``."""
    args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if delimiter:
        args["Delimiter"] = delimiter
    if token:
        args["ContinuationToken"] = token
    elif start_after:
        args["StartAfter"] = start_after
    return args
