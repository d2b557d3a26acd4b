"""The retry policy: one owner of retries for every S3 request (tenacity).

botocore's own retries are switched off (one attempt) so that attempts can be counted, sleeps injected in
tests, and every error reported with how many attempts it took. Callers of the store must not add
another retry layer on top.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from s3commit.config import RetryPolicy
from s3commit.errors import RETRYABLE, EndpointUnreachableError

log = logging.getLogger(__name__)


def is_retryable(exc: BaseException) -> bool:
    """Throttling, 5xx, timeouts, resets (and a refused connection, which may be a restarting endpoint)."""
    return isinstance(exc, (*RETRYABLE, EndpointUnreachableError))


def build_retrying(
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[RetryCallState], None] | None = None,
) -> Retrying:
    """A tenacity ``Retrying`` for ``policy``: jittered exponential backoff, re-raising the last error.

    Args:
        policy: attempts and delays.
        sleep: injectable for tests (no real sleeping).
        on_retry: called before each sleep (the store counts retries with it).
    """

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None:
            on_retry(state)
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("retrying in %.2fs after attempt %d: %s", delay, state.attempt_number, exc)

    kwargs: dict[str, Any] = {
        "stop": stop_after_attempt(policy.max_attempts),
        "wait": wait_random_exponential(multiplier=policy.initial_delay, max=policy.max_delay),
        "retry": retry_if_exception(is_retryable),
        "reraise": True,
        "sleep": sleep,
        "before_sleep": before_sleep,
    }
    return Retrying(**kwargs)
