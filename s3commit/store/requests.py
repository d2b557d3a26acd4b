"""The store's one choke point: every S3 request runs here, under the retry policy its method declares
(:class:`~s3commit.store.retry.Retry`; tenacity, the one retry owner: botocore's own retries are off), with its
errors translated once (:func:`s3commit.errors.translate_client_error`, keeping the cause) and counted by
operation. Each attempt first takes a slot of its prefix's adaptive concurrency limit
(:mod:`s3commit.store.concurrency`, shared by the process) and frees it when it ends, telling the limit whether it
was throttled. It also holds the boto3 client, built lazily in each process (:mod:`s3commit.store.client`).

:class:`~s3commit.store.s3store.S3Store`'s collaborators (:mod:`~s3commit.store.objects`,
:mod:`~s3commit.store.uploads`, :mod:`~s3commit.store.conditional`, each a :class:`RequestGroup`) send through one
:class:`Requests`; nothing else calls boto3.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tenacity import Retrying

from s3commit.config.options import StoreOptions
from s3commit.errors import ChecksumMismatchError, StoreError, ThrottledError, translate_client_error
from s3commit.store import body_policy, moto_inprocess
from s3commit.store.concurrency import PROCESS_LIMITS, ConcurrencyLimit, ConcurrencyLimits
from s3commit.store.counters import StoreCounters
from s3commit.store.retry import Attempts, Retry, build_retrying, is_ambiguous, is_retryable

T = TypeVar("T")


class Requests:
    """The boto3 client, the retry policy and the counters of one store.

    Args:
        options: the store's options (endpoint, credentials, the retry policy).
        client: an existing boto3 S3 client to use instead of building one (:func:`moto_inprocess.adapt`).
        sleep: injectable backoff sleep, for tests.
        limits: the concurrency limits the attempts take slots of; default the process's
            (:data:`~s3commit.store.concurrency.PROCESS_LIMITS`).
    """

    def __init__(self, options: StoreOptions, *, client: Any = None,
                 sleep: Callable[[float], None] = time.sleep, limits: ConcurrencyLimits | None = None) -> None:
        self.options = options
        self._client = body_policy.install_bodies(moto_inprocess.adapt(client))
        #: Whether the client may compute a checksum of its own for a body sent without one: one the caller made
        #: (a user's, ``request_checksum_calculation`` ``when_supported`` by default); never the store's own.
        self.client_adds_checksums = client is not None and getattr(
            getattr(getattr(client, "meta", None), "config", None), "request_checksum_calculation",
            "when_supported") != "when_required"
        self.sleep = sleep
        self._lock = threading.Lock()
        self.counters = StoreCounters()
        #: The adaptive limits of requests in flight per prefix (:mod:`s3commit.store.concurrency`).
        self.limits = limits if limits is not None else PROCESS_LIMITS
        self._endpoint = options.endpoint_url or f"aws:{options.region or ''}"

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build_client()
        return self._client

    def _build_client(self) -> Any:
        # Credentials (S3A's providers, an assumed role), proxy, TLS, pool and timeouts: s3commit.store.client.
        # botocore's DEBUG logs print request headers and signed strings: clients keeps credentials out of them.
        from s3commit.store.client import build_s3_client

        return body_policy.install_bodies(moto_inprocess.adapt(build_s3_client(self.options)))

    def call(
        self,
        operation: str,
        fn: Callable[[], T],
        *,
        retry: Retry,
        bucket: str,
        key: str | None = None,
        upload_id: str | None = None,
        attempts: Attempts | None = None,
        recorded: bool = False,
    ) -> T:
        """Run one S3 request under the retry policy, as ``retry`` allows; translate its errors once.

        ``attempts`` (required for ``VERIFIED`` and ``RECORDED``) learns how many attempts failed ambiguously;
        ``recorded`` says the caller records what a ``RECORDED`` request may have left behind.
        """
        if retry is not Retry.IDEMPOTENT and attempts is None:
            raise TypeError(f"{operation}: a {retry.value} request needs an Attempts record")
        seen = attempts if attempts is not None else Attempts()
        try:
            return self.retrying(operation, retry, recorded=recorded, made=seen.made)(
                lambda: self.attempt(operation, fn, seen, bucket=bucket, key=key, upload_id=upload_id))
        except StoreError as err:
            self.gave_up(operation, err, seen)
            raise

    def limit(self, bucket: str, key: str | None = None) -> ConcurrencyLimit:
        """The concurrency limit requests to ``key`` in ``bucket`` take their slots of (what a commit reads to
        learn how many requests the prefix takes, and reports)."""
        return self.limits.get(self._endpoint, bucket, key, ceiling=self.options.concurrency_max,
                               adaptive=self.options.concurrency_adaptive)

    @contextmanager
    def slot(self, operation: str, bucket: str, key: str | None) -> Iterator[None]:
        """Hold a slot of the limit of ``key``'s prefix for one attempt; a throttling answer is counted and lowers
        the limit (:mod:`s3commit.store.concurrency`)."""
        limit = self.limit(bucket, key)
        generation = limit.acquire()
        throttled = False
        try:
            yield
        except ThrottledError:
            throttled = True
            self.counters.add("throttles", operation)
            raise
        finally:
            limit.release(generation, throttled=throttled)

    def retrying(self, operation: str, retry: Retry, *, recorded: bool = False, made: int = 0) -> Retrying:
        """The one retry loop of one request: the store's policy, as ``retry`` allows, each retry counted.

        :meth:`call` runs a request in it; a request whose answer is read after the call returns (a GET's body
        streamed, :meth:`~s3commit.store.objects.ObjectRequests.stream_object`) iterates it
        itself, sending each attempt with :meth:`attempt` and reporting the end with :meth:`gave_up`, so that
        the reads of the answer share the request's budget instead of adding a loop of their own. ``made``: attempts
        already made elsewhere, counted in the budget (:func:`~s3commit.store.retry.build_retrying`).
        """
        return build_retrying(
            self.options.retry, sleep=self.sleep,
            on_retry=lambda _state: self.counters.add("retries", operation),
            retry_on=lambda exc: retry.may_retry(exc, recorded=recorded), made=made,
        )

    def attempt(self, operation: str, fn: Callable[[], T], seen: Attempts, *, bucket: str,
                key: str | None = None, upload_id: str | None = None) -> T:
        """One attempt of a request, no retry: counted (in ``seen`` and the counters), its error translated."""
        if not seen.made:
            seen.first_sent = time.monotonic()
        seen.made += 1
        self.counters.add("requests", operation)
        with self.slot(operation, bucket, key):
            try:
                return fn()
            except Exception as err:  # botocore raises many unrelated types; translate all once
                if isinstance(err, StoreError) and not err.operation:  # raised by a check of the answer
                    err.operation, err.bucket, err.key, err.upload_id = operation, bucket, key, upload_id
                error = err if isinstance(err, StoreError) else translate_client_error(
                    err, operation=operation, bucket=bucket, key=key, upload_id=upload_id)
                seen.failed(error)
                if error is err:
                    raise
                raise error from err

    def gave_up(self, operation: str, error: StoreError, seen: Attempts) -> None:
        """A request failed for good (retries exhausted or not allowed): ``error`` names its attempts, and
        the failure is counted once."""
        error.attempts = seen.made
        self.counters.add("failures", operation)

    def send_once(self, operation: str, bucket: str, key: str | None = None, **params: Any) -> Any:
        """Send one request for a capability probe, whose point is what the store answers it, and return the
        answer; ``operation`` is boto3's name in CamelCase (``UploadPart``), ``params`` as boto3 names them.
        Retried only after a failure that never reached the store's data (throttling, a refused connection); any
        other answer, an error such as ``BadDigest`` included, is the finding (:class:`~s3commit.errors.StoreError`
        translated once). A 500 or a timeout is raised too: the probe cannot tell what the store did."""
        method = getattr(self.client, "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_"))

        def attempt() -> Any:
            self.counters.add("requests", operation)
            with self.slot(operation, bucket, key):
                try:
                    return method(Bucket=bucket, **({"Key": key} if key is not None else {}), **params)
                except Exception as err:
                    raise translate_client_error(err, operation=operation, bucket=bucket, key=key,
                                                 upload_id=params.get("UploadId")) from err

        def unapplied(exc: BaseException) -> bool:
            return is_retryable(exc) and not is_ambiguous(exc) and not isinstance(exc, ChecksumMismatchError)

        try:
            return build_retrying(self.options.retry, sleep=self.sleep, retry_on=unapplied,
                                  on_retry=lambda _state: self.counters.add("retries", operation))(attempt)
        except StoreError:
            self.counters.add("failures", operation)
            raise


class RequestGroup:
    """What each of the store's collaborators (objects, uploads, conditional writes) sends through: the store's one
    :class:`Requests` and its :class:`~s3commit.store.body_policy.PayloadPolicy`."""

    def __init__(self, requests: Requests, bodies: body_policy.PayloadPolicy) -> None:
        self.requests = requests
        self.bodies = bodies
        self.options = requests.options
        self.counters = requests.counters

    @property
    def client(self) -> Any:
        """The store's boto3 client (built on first use in each process)."""
        return self.requests.client

    def checksum_algorithm(self, bucket: str, *, object_checked: bool = False) -> str | None:
        """The checksum bodies sent to ``bucket`` carry (:meth:`~s3commit.store.body_policy.PayloadPolicy.algorithm`),
        given whether the client adds one of its own to a body sent without (a client the user made computes its
        own CRC32: ``request_checksum_calculation`` ``when_supported``) and whether each completed object's checksum
        will be compared with its parts' (``object_checked``: ``validate_output``, whose check is the checksum the
        store computes of what it keeps): either way ``auto``'s is kept."""
        return self.bodies.algorithm(bucket, keep=self.requests.client_adds_checksums or object_checked)
