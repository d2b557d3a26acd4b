"""Many whole-object GETs of one bucket from one event loop: what :meth:`ObjectRequests.get_many
<s3commit.store.objects.ObjectRequests.get_many>` does.

A job commit reads every pendingset before its first Complete (1,000 GETs for 100,000 files). Through botocore each
GET costs ~0.6 ms of the interpreter's time (its HTTP session, urllib3, http.client's header parser), most of the
load's on a 2-core machine; the Completes' own connections (:mod:`s3commit.store.lean_http`) answer one in ~0.1 ms.
Here the first attempt of each GET is built and signed by :class:`~s3commit.store.lean_complete.LeanCompletes` and sent
from a loop on a thread of its own (:class:`~s3commit.store.lean_http.LeanLoop`: the caller's, whose connections its
Completes then use, or one of its own), in a slot of its prefix's concurrency limit (taken without blocking the
loop), as the store counts a request; an attempt that fails goes on in the store's one retry loop on a settler thread
(``ObjectRequests.get_object``, its budget counting the first attempt), so every GET ends as it would alone.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait

from s3commit.errors import EndpointUnreachableError, StoreError, ThrottledError, TransientError, translate_client_error
from s3commit.store.concurrency import SLOT_POLL_SECONDS
from s3commit.store.lean_complete import LeanCompletes, object_of
from s3commit.store.lean_http import LeanLoop, Origin, Unanswered
from s3commit.store.requests import Requests
from s3commit.store.retry import Attempts, Retry

GET = "GetObject"
GET_SETTLERS = 4
"""Threads that carry on a GET whose first attempt failed (retried under the store's policy)."""


def get_many(requests: Requests, lean: LeanCompletes, get_object: Callable[..., bytes], bucket: str,
             keys: Iterable[str], *, ahead: int, loop: LeanLoop | None = None) -> Iterator[tuple[str, Future[bytes]]]:
    """``(key, future of its bytes)`` in the order of ``keys``, at most ``ahead`` GETs sent beyond the one the
    caller was handed last (``lean.own_connections`` must serve ``bucket``). ``get_object(bucket, key,
    attempts=)``: the store's GET, which carries on an attempt that failed here (and sends every GET of a bucket whose
    store refused this path). ``loop``: where they are sent from, on its connections (else a loop of their own).
    Once the last is handed out, the generator ends when every GET has; a caller that stops early (closes it)
    cancels what is still in flight."""
    if ahead < 1:
        raise ValueError(f"ahead must be >= 1, got {ahead}")
    gets = _Gets(requests, lean, get_object, bucket, loop)
    sent: deque[tuple[str, Future[bytes]]] = deque()
    unanswered: set[Future[bytes]] = set()
    ended = False
    try:
        for key in keys:
            future = gets.submit(key)
            unanswered.add(future)
            future.add_done_callback(unanswered.discard)
            sent.append((key, future))
            if len(sent) > ahead:
                yield sent.popleft()
        while sent:
            yield sent.popleft()
        ended = True
    finally:
        if ended:  # every GET handed out: they end before the loop does (the caller waits for them)
            wait(list(unanswered))
        gets.close()


class _Gets:
    """The loop (the caller's, or one of its own), its connections and the settlers, for one :func:`get_many`."""

    def __init__(self, requests: Requests, lean: LeanCompletes, get_object: Callable[..., bytes],
                 bucket: str, loop: LeanLoop | None = None) -> None:
        own = lean.own_connections(requests.client, bucket)
        if own is None:
            raise ValueError(f"the GETs of bucket {bucket} cannot be sent on connections of s3commit's own "
                             "(ObjectRequests.can_get_many)")
        target, settings = own
        self.requests, self.lean, self.get_object, self.bucket = requests, lean, get_object, bucket
        self.origin, self.host = Origin.of(target.base), target.host
        self.own_loop = loop is None
        self.loop = LeanLoop(settings, name="s3commit-gets") if loop is None else loop
        self.settlers = ThreadPoolExecutor(GET_SETTLERS, thread_name_prefix="s3commit-get-settle")
        self.sent: set[Future[bytes]] = set()

    def submit(self, key: str) -> Future[bytes]:
        future = self.loop.submit(self._get(key))
        self.sent.add(future)
        future.add_done_callback(self.sent.discard)
        return future

    async def _get(self, key: str) -> bytes:
        requests, lean, bucket = self.requests, self.lean, self.bucket
        limit = requests.limit(bucket, key)
        while (generation := limit.try_acquire()) is None:
            await asyncio.sleep(SLOT_POLL_SECONDS)
        attempts = Attempts(made=1, first_sent=time.monotonic())
        requests.counters.add("requests", GET)
        error: StoreError | None = None
        refused = False
        try:
            prepared = lean.prepare_get(requests.client, bucket, key)
            connections = self.loop.connections
            assert connections is not None
            answer = await connections.send(self.origin, self.host, "GET", prepared.path_query,
                                                 prepared.headers, b"")
            return object_of(answer.status, answer.headers, answer.body)
        except Unanswered as err:
            error = (TransientError if err.sent else EndpointUnreachableError)(
                str(err), operation=GET, bucket=bucket, key=key,
                code="ConnectionLost" if err.sent else "ConnectionRefused")
        except Exception as err:  # botocore's error for the answer: translated once, as the store does
            refused = lean.refused(bucket, err)
            if not refused:
                error = translate_client_error(err, operation=GET, bucket=bucket, key=key)
        finally:
            throttled = isinstance(error, ThrottledError)
            if throttled:
                requests.counters.add("throttles", GET)
            limit.release(generation, throttled=throttled)
        loop = asyncio.get_running_loop()
        if refused:  # not acted on: botocore sends it, and the bucket's GETs from now on
            return await loop.run_in_executor(self.settlers, self.get_object, bucket, key)
        assert error is not None
        attempts.failed(error)
        return await loop.run_in_executor(self.settlers, self._go_on, key, error, attempts)

    def _go_on(self, key: str, error: StoreError, attempts: Attempts) -> bytes:
        """On a settler: the GET whose first attempt failed with ``error``, retried as the store's policy allows."""
        requests = self.requests
        if not Retry.IDEMPOTENT.may_retry(error) or attempts.made >= requests.options.retry.max_attempts:
            requests.gave_up(GET, error, attempts)
            raise error
        requests.counters.add("retries", GET)
        return self.get_object(self.bucket, key, attempts=attempts)

    def close(self) -> None:
        """Cancel the GETs still in flight (a caller that stopped early); end the loop if it is this one's own."""
        try:
            if self.own_loop:
                self.loop.close()
            else:  # the caller's loop: its owner waits for what is cancelled here when it closes it
                for future in list(self.sent):
                    future.cancel()
        finally:
            self.settlers.shutdown(wait=True, cancel_futures=True)
