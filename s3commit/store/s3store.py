"""S3Store: the only object that talks to S3 (boto3), composed of one collaborator per concept.

=============================  =========================================================================================
``store.objects``              :class:`~s3commit.store.objects.ObjectRequests`: PUT (``If-None-Match`` too), GET,
                               streamed ranged GET, HEAD, List, Delete, DeleteObjects, Copy
``store.uploads``              :class:`~s3commit.store.uploads.UploadRequests`: the multipart upload's requests
``store.conditional``          :class:`~s3commit.store.conditional.ConditionalRequests`: ``If-Match`` writes and deletes
``store.requests``             :class:`~s3commit.store.requests.Requests`: the choke point every request goes through;
                               its ``limits``: the adaptive concurrency limit per prefix
                               (:mod:`~s3commit.store.concurrency`)
``store.bodies``               :class:`~s3commit.store.body_policy.PayloadPolicy`: what is checked of a body sent
=============================  =========================================================================================

The store itself answers for its bucket and its clock (:meth:`S3Store.head_bucket`).

Every request owns, through :class:`~s3commit.store.requests.Requests`: retries (tenacity,
:mod:`s3commit.store.retry`; botocore's own retries are off), error translation
(:func:`s3commit.errors.translate_client_error`, once, keeping the cause), and counters by operation (requests,
retries, failures, bytes uploaded, bytes copied server-side). Each method declares in code how its request may be
retried (:class:`~s3commit.store.retry.Retry`: ``IDEMPOTENT``, ``VERIFIED`` or ``RECORDED``), which decides what a
retry may cost:

==========================================  ===========  ========================================================
method                                      retry        after an attempt that may have taken effect unseen
==========================================  ===========  ========================================================
uploads.create_multipart_upload             RECORDED     retried only if the caller records the Create's window
uploads.complete_multipart_upload           VERIFIED     NoSuchUpload / 412 / exhausted: HEAD decides if it is ours
objects.put_object(if_none_match=True)      VERIFIED     a 412 after an ambiguous attempt: read back, same bytes
conditional.put_if_match, delete_if_match   VERIFIED     read back after a lost answer
every other method                          IDEMPOTENT   retried as it is
==========================================  ===========  ========================================================

It knows nothing of committers, manifests or layouts. It is picklable: the client is rebuilt lazily in
each process (boto3 clients do not pickle), counters start afresh.

A test double replaces one collaborator by subclassing it and naming the subclass in a subclass of the store
(``class HeldCompletes(UploadRequests): ...``, ``class Store(S3Store): uploads_class = HeldCompletes``), so a
store is built, pickled and rebuilt in another process as the real one is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from s3commit.config.options import StoreOptions
from s3commit.errors import NoSuchBucketError, NotFoundError
from s3commit.store.body_policy import PayloadPolicy
from s3commit.store.capabilities import Capabilities
from s3commit.store.concurrency import ConcurrencyLimits
from s3commit.store.conditional import ConditionalRequests
from s3commit.store.objects import ObjectRequests
from s3commit.store.requests import Requests
from s3commit.store.responses import answered_at
from s3commit.store.retry import Retry
from s3commit.store.uploads import UploadRequests

__all__ = ["S3Store"]


class S3Store:
    """Every S3 request s3commit makes goes through here.

    Args:
        options: endpoint, credentials, retry policy, write options (SSE, storage class, ACL).
        client: an existing boto3 S3 client to use instead of building one (not pickled;
            :func:`~s3commit.store.moto_inprocess.adapt`).
        sleep: injectable backoff sleep, for tests.
        limits: the adaptive concurrency limits its requests share (:mod:`s3commit.store.concurrency`); default the
            process's, shared with every other store of the process (a simulated process brings its own).
    """

    objects_class: type[ObjectRequests] = ObjectRequests
    uploads_class: type[UploadRequests] = UploadRequests
    conditional_class: type[ConditionalRequests] = ConditionalRequests

    def __init__(
        self,
        options: StoreOptions | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        limits: ConcurrencyLimits | None = None,
    ) -> None:
        self.options = options or StoreOptions()
        #: The one choke point: the client, retries, error translation, counters, the adaptive concurrency limits
        #: (:mod:`s3commit.store.requests`).
        self.requests = Requests(self.options, client=client, sleep=sleep, limits=limits)
        self.counters = self.requests.counters
        #: What each bucket's store was seen to honour (:mod:`s3commit.store.capability_cache` fills it).
        self.capabilities: dict[str, Capabilities] = {}
        #: What the store checks of the bodies it sends, per bucket (:mod:`s3commit.store.body_policy`).
        self.bodies = PayloadPolicy(self.options, self.capabilities)
        #: Objects: PUT, GET, HEAD, List, Delete, Copy (:mod:`s3commit.store.objects`).
        self.objects = self.objects_class(self.requests, self.bodies)
        #: Multipart uploads (:mod:`s3commit.store.uploads`).
        self.uploads = self.uploads_class(self.requests, self.bodies, self.objects)
        #: ``If-Match`` writes and deletes (:mod:`s3commit.store.conditional`).
        self.conditional = self.conditional_class(self.requests, self.bodies, self.objects)

    # --- pickling: ship options and what is known of the store, not the client --------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "capabilities": dict(self.capabilities)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]
        self.capabilities.update(state.get("capabilities") or {})

    # --- the bucket and its clock -------------------------------------------------------------------

    def head_bucket(self, bucket: str) -> datetime:
        """Check the bucket exists and is reachable, and return the store's clock when it answered (the ``Date``
        of the HEAD): ages judged without this host's clock. Raises :class:`NoSuchBucketError`.
        ``Retry.IDEMPOTENT``."""
        try:
            response = self.requests.call("HeadBucket", lambda: self.requests.client.head_bucket(Bucket=bucket),
                                          retry=Retry.IDEMPOTENT, bucket=bucket)
        except NotFoundError as err:
            raise NoSuchBucketError(
                f"bucket {bucket!r} does not exist", operation="HeadBucket", bucket=bucket,
                code="NoSuchBucket", attempts=err.attempts,
            ) from err
        return answered_at(response)
