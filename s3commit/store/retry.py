"""The retry policy: one owner of retries for every S3 request (tenacity), and what each request may risk.

botocore's own retries are switched off (one attempt) so that attempts can be counted, sleeps injected in
tests, and every error reported with how many attempts it took. Callers of the store must not add
another retry layer on top.

Each store method declares, in code, how its request may be retried (:class:`Retry`), because a retry is
only as safe as the request is repeatable. What decides is whether a failed attempt may have taken effect
(:func:`is_ambiguous`): a 503 SlowDown or a refused connection never reached S3's data, so repeating it is
always safe; a 500, a timeout or a reset after the request was sent may have been applied with its answer
lost, so the repeat may meet (or duplicate) the first attempt's effect.
"""

from __future__ import annotations

import enum
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from s3commit.config.options import RetryPolicy
from s3commit.errors import RETRYABLE, EndpointUnreachableError, StoreError, ThrottledError, TransientError

log = logging.getLogger(__name__)

NOT_APPLIED_CODES = frozenset({
    "ServiceUnavailable", "RequestTimeout", "RequestTimeTooSkewed", "OperationAborted",
    "ConditionalRequestConflict", "BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch",
})
"""Transient error codes with which S3 refuses a request without applying it (503 ServiceUnavailable, a body
S3 timed out reading, a skewed clock, a conflicting operation in progress, a body whose checksum did not match)."""


def is_retryable(exc: BaseException) -> bool:
    """Throttling, 5xx, timeouts, resets (and a refused connection, which may be a restarting endpoint)."""
    return isinstance(exc, (*RETRYABLE, EndpointUnreachableError))


def is_ambiguous(exc: BaseException) -> bool:
    """Whether a failed request may have taken effect in S3 with its answer lost.

    Yes for a 500/502/504, a read timeout and a connection dropped after the request was sent (the client
    cannot tell whether S3 got it: a reset before the request went out looks the same). No for throttling
    (503 SlowDown), a connection that was never made (refused, DNS, connect timeout), the refusals in
    :data:`NOT_APPLIED_CODES`, and any definite answer (404, 403, 412, 400...).
    """
    if isinstance(exc, (ThrottledError, EndpointUnreachableError)):
        return False
    if isinstance(exc, TransientError):
        return exc.code not in NOT_APPLIED_CODES
    return False


class Retry(enum.Enum):
    """How a store method's request may be retried; every :class:`~s3commit.store.s3store.S3Store` request declares
    one. Valid values are ``idempotent``, ``verified`` and ``recorded``."""

    IDEMPOTENT = "idempotent"
    """Sending it twice has the effect of sending it once (GET, HEAD, LIST, UploadPart, Abort, Delete, Copy, a
    plain PUT): retried after every retryable failure."""
    VERIFIED = "verified"
    """A repeat may meet the first attempt's own effect and be refused for it (a conditional PUT answered 412,
    a Complete answered NoSuchUpload): retried after every retryable failure, and the method reads back
    before it reports such a refusal as a failure. Only a refusal after an ambiguous attempt can be our own
    doing (NoSuchUpload on a Complete is read back always: an earlier commit may have completed it)."""
    RECORDED = "recorded"
    """Not idempotent: an attempt that took effect unseen leaves something S3 never named to us
    (CreateMultipartUpload: an upload nobody would complete or abort). Retried after a failure that did not
    reach S3; after an ambiguous one only if the caller records what may have been left (the store reports a
    :class:`~s3commit.model.object_info.CreateWindow`), so that the job's clean-up can find and abort it."""

    def may_retry(self, exc: BaseException, *, recorded: bool = False) -> bool:
        """Whether ``exc`` may be followed by another attempt (``recorded``: the caller records orphans)."""
        if not is_retryable(exc):
            return False
        return self is not Retry.RECORDED or recorded or not is_ambiguous(exc)


@dataclass
class Attempts:
    """What the attempts of one store call did: how many were made, and how many failed ambiguously (may
    have taken effect, see :func:`is_ambiguous`)."""

    made: int = 0
    ambiguous: int = 0
    first_sent: float = 0.0
    """``time.monotonic()`` when the first attempt was sent."""

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, StoreError) and is_ambiguous(exc):
            self.ambiguous += 1


def build_retrying(
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[RetryCallState], None] | None = None,
    retry_on: Callable[[BaseException], bool] = is_retryable,
    made: int = 0,
) -> Retrying:
    """A tenacity ``Retrying`` for ``policy``: jittered exponential backoff, re-raising the last error.

    Args:
        policy: attempts and delays.
        sleep: injectable for tests (no real sleeping).
        on_retry: called before each sleep (the store counts retries with it).
        retry_on: which failures are retried (default :func:`is_retryable`; the store passes its method's
            :meth:`Retry.may_retry`).
        made: attempts of the request already made, and failed, elsewhere (a Complete first sent from the event
            loop of ``UploadRequests.complete_many``): the loop goes on from there, its first attempt after the
            back-off that attempt earned, and the policy's ``max_attempts`` counts them.
    """

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None:
            on_retry(state)
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("retrying in %.2fs after attempt %d: %s", delay, state.attempt_number, exc)

    def backoff(number: int) -> float:  # wait_random_exponential's delay after the ``number``th attempt
        return random.uniform(0.0, min(policy.max_delay, policy.initial_delay * 2 ** (number - 1)))

    kwargs: dict[str, Any] = {
        "stop": stop_after_attempt(max(1, policy.max_attempts - made)),
        "wait": wait_random_exponential(multiplier=policy.initial_delay, max=policy.max_delay) if not made
        else (lambda state: backoff(made + state.attempt_number)),
        "retry": retry_if_exception(retry_on),
        "reraise": True,
        "sleep": sleep,
        "before_sleep": before_sleep,
    }
    if made:
        kwargs["before"] = lambda state: sleep(backoff(made)) if state.attempt_number == 1 else None
    return Retrying(**kwargs)
