"""The store's adaptive concurrency limit (s3commit.store.concurrency): decrease once per generation on a burst of
throttles, additive increase while none and while the limit is in use, floor 1, ceiling, slots freed however an
attempt ends, one limit shared by the threads and stores of a process. Nothing sleeps: the clock is the test's."""

from __future__ import annotations

import threading
import time

import pytest

from s3commit.config.options import StoreOptions
from s3commit.errors import NotFoundError, ThrottledError, translate_client_error
from s3commit.store.concurrency import ConcurrencyLimit, ConcurrencyLimits, limit_partition
from s3commit.store.retry import Retry
from s3commit.testing.memory import MemoryS3, s3_error
from tests.clocks import ManualClock

SETTLE = 10.0
"""Seconds a test waits at most for another thread (never reached when the code is right)."""


def fill(limit: ConcurrencyLimit, n: int) -> list[int]:
    """Take ``n`` slots (each returns its generation)."""
    return [limit.acquire() for _ in range(n)]


def test_a_burst_of_throttles_from_one_overload_decreases_the_limit_once():
    limit = ConcurrencyLimit(100)
    slots = fill(limit, 100)
    for generation in slots[:50]:  # every attempt sent before the decrease met the same overload
        limit.release(generation, throttled=True)
    state = limit.state()
    assert (state.limit, state.decreases, state.throttles) == (70, 1, 50)  # 0.7 x the 100 then in flight
    newer = limit.acquire()
    limit.release(newer, throttled=True)  # an attempt sent after the decrease: the overload persists
    assert (limit.limit, limit.state().decreases) == (35, 2)  # 0.7 x the 51 in flight, once more


def test_the_decrease_is_from_the_requests_in_flight_not_from_an_unused_limit():
    limit = ConcurrencyLimit(256)
    slots = fill(limit, 10)
    limit.release(slots[0], throttled=True)
    assert limit.limit == 7


def test_the_limit_never_falls_below_one():
    limit = ConcurrencyLimit(4)
    for _ in range(10):
        limit.release(limit.acquire(), throttled=True)
    assert limit.limit == 1 and limit.state().low == 1
    generation = limit.acquire()  # one slot still there
    limit.release(generation, throttled=False)


def test_the_limit_grows_by_one_per_limits_worth_of_answers_while_in_use_up_to_the_ceiling():
    limit = ConcurrencyLimit(6)
    limit.release(fill(limit, 4)[0], throttled=True)  # 0.7 x 4 in flight: 2 (3 slots still held)
    assert limit.limit == 2
    for _ in range(3):
        limit.release(0, throttled=False)  # the old attempts end unthrottled while the limit is not in use
    assert limit.limit == 2 and limit.in_flight == 0

    def round_at_limit() -> None:
        """Fill the limit, then answer every attempt unthrottled."""
        for generation in fill(limit, limit.limit):
            limit.release(generation, throttled=False)

    grown = []
    for _ in range(6):
        round_at_limit()
        grown.append(limit.limit)
    assert grown == [3, 4, 5, 6, 6, 6]  # one a round, never past the ceiling
    assert limit.state().increases == 4 and limit.state().high == 6


def test_a_limit_not_in_use_does_not_grow():
    limit = ConcurrencyLimit(10)
    limit.release(fill(limit, 5)[0], throttled=True)
    for _ in range(4):
        limit.release(1, throttled=False)
    assert limit.limit == 3
    for _ in range(50):  # one request at a time: nothing learnt of what the store would take
        limit.release(limit.acquire(), throttled=False)
    assert limit.limit == 3


def test_a_fixed_limit_counts_throttles_and_does_not_move():
    limit = ConcurrencyLimit(8, adaptive=False)
    slots = fill(limit, 8)
    for generation in slots:
        limit.release(generation, throttled=True)
    assert (limit.limit, limit.state().throttles, limit.state().decreases) == (8, 8, 0)


def test_a_request_waits_for_a_slot_and_takes_the_one_freed_the_wait_timed_on_the_clock():
    clock = ManualClock()
    limit = ConcurrencyLimit(2, clock=clock.monotonic)
    held = fill(limit, 2)
    got = threading.Event()

    def third() -> None:
        limit.release(limit.acquire(), throttled=False)
        got.set()

    waiter = threading.Thread(target=third)
    waiter.start()
    until(lambda: limit.state().waits == 1)
    assert not got.is_set() and limit.in_flight == 2
    clock.advance(3.0)
    limit.release(held[0], throttled=True)  # a throttled attempt frees its slot too (the limit is now 1)
    assert not got.is_set() and limit.in_flight == 1  # 1 in flight, limit 1: the waiter still waits
    limit.release(held[1], throttled=False)
    assert got.wait(SETTLE)
    waiter.join(SETTLE)
    state = limit.state()
    assert state.in_flight == 0 and state.waits == 1 and state.waited_seconds == 3.0


def test_the_limit_is_shared_between_threads():
    limit = ConcurrencyLimit(3)
    release = threading.Event()
    most = [0]
    lock = threading.Lock()

    def request() -> None:
        generation = limit.acquire()
        with lock:
            most[0] = max(most[0], limit.in_flight)
        release.wait(SETTLE)
        limit.release(generation, throttled=False)

    threads = [threading.Thread(target=request) for _ in range(8)]
    for thread in threads:
        thread.start()
    until(lambda: limit.state().attempts == 3)
    assert limit.in_flight == 3  # the other five wait
    release.set()
    for thread in threads:
        thread.join(SETTLE)
    assert most[0] == 3 and limit.in_flight == 0 and limit.state().attempts == 8


def test_a_watch_records_low_high_final_and_throttles_while_it_runs():
    limit = ConcurrencyLimit(10)
    for generation in fill(limit, 10):
        limit.release(generation, throttled=False)
    watch = limit.watch()
    assert (watch.low, watch.high) == (10, 10)
    slots = fill(limit, 7)
    limit.release(slots[0], throttled=True)  # 0.7 x 7 in flight: 4
    limit.release(slots[1], throttled=True)  # the same overload: counted, no decrease
    for generation in slots[2:]:
        limit.release(generation, throttled=False)
    limit.release(limit.acquire(), throttled=True)  # a newer generation: 0.7 x 1, at least 1
    limit.unwatch(watch)
    limit.release(limit.acquire(), throttled=True)  # not watched any more
    assert (watch.low, watch.high, watch.final, watch.throttles, watch.decreases) == (1, 10, 1, 3, 2)
    assert limit.state().throttles == 4


@pytest.mark.parametrize(("key", "partition"), [("warehouse/t/part-0", "warehouse"), ("plain", ""), (None, ""),
                                                ("t/", "t")])
def test_a_limit_is_per_first_path_element(key, partition):
    assert limit_partition(key) == partition


def test_stores_of_a_process_share_one_limit_per_endpoint_bucket_and_prefix():
    limits = ConcurrencyLimits()
    s3 = MemoryS3()
    s3.create_bucket("b")
    one, other = s3.store(), s3.store()
    other.requests.limits = one.requests.limits = limits  # two stores of one process
    assert one.requests.limit("b", "t/x") is other.requests.limit("b", "t/y")
    assert one.requests.limit("b", "t/x") is not one.requests.limit("b", "u/x")
    assert one.requests.limit("b", "t/x") is not one.requests.limit("c", "t/x")


@pytest.mark.parametrize(("code", "status"), [("SlowDown", 503), ("RequestLimitExceeded", 503),
                                              ("TooManyRequests", 429), ("Whatever", 429), ("503", 503)])
def test_throttling_answers_are_throttled_errors(code, status):
    assert isinstance(translate_client_error(s3_error(code, status), operation="PutObject", bucket="b"),
                      ThrottledError)


def test_a_store_request_takes_a_slot_per_attempt_and_a_throttle_lowers_the_limit():
    s3 = MemoryS3()
    s3.create_bucket("b")
    throttled = iter([True, True, False])
    store = s3.store(fail=lambda r: s3_error("SlowDown", 503, "Slow Down") if next(throttled, False) else None,
                     options=StoreOptions(concurrency_max=16))
    store.objects.put_object("b", "t/k", b"x")
    limit = store.requests.limit("b", "t/k")
    state = limit.state()
    # Two throttled attempts then one answered: each attempt took and freed a slot; each throttle (the second sent
    # after the first's decrease) lowered the limit, to 0.7 x the 1 in flight, at least 1; the answer, the limit of 1
    # full, was a limit's worth of answers: one more.
    assert (state.attempts, state.in_flight, state.throttles, state.decreases, state.limit) == (3, 0, 2, 2, 2)
    counted = store.counters.snapshot()
    assert counted["throttles"] == {"PutObject": 2} and counted["retries"] == {"PutObject": 2}
    assert s3.objects("b", "t/") == {"t/k": b"x"}


def test_a_failed_attempt_frees_its_slot():
    s3 = MemoryS3()
    s3.create_bucket("b")
    store = s3.store()
    with pytest.raises(NotFoundError):
        store.requests.call("GetObject", lambda: store.requests.client.get_object(Bucket="b", Key="t/none"),
                            retry=Retry.IDEMPOTENT, bucket="b", key="t/none")
    state = store.requests.limit("b", "t/none").state()
    assert (state.in_flight, state.attempts, state.throttles, state.limit) == (0, 1, 0, 256)


def until(condition) -> None:
    """Return once ``condition()`` holds (another thread makes it so), failing past SETTLE seconds."""
    limit = time.monotonic() + SETTLE
    while not condition():
        assert time.monotonic() < limit, "the other threads never got there"
        time.sleep(0.001)


def test_a_lowered_limit_goes_back_to_its_ceiling_after_a_quiet_while_and_not_before():
    clock = ManualClock()
    limit = ConcurrencyLimit(256, clock=clock.monotonic)
    slots = fill(limit, 2)  # an overwrite's deletes: two heavy requests in flight, both throttled
    for generation in slots:
        limit.release(generation, throttled=True)
    assert limit.limit == 1
    clock.advance(9.9)
    limit.release(limit.acquire(), throttled=False)
    assert limit.limit == 2 and limit.state().recoveries == 0  # within the quiet while: one answer, one slot more
    clock.advance(0.1)
    first = limit.try_acquire()  # the next job's first Complete
    assert first is not None
    state = limit.state()
    assert (state.limit, state.recoveries, state.low) == (256, 1, 1)
    generation = limit.try_acquire()
    limit.release(generation, throttled=True)  # the store still throttles: down again at once, from what is in flight
    assert limit.limit == 1  # 0.7 x the 2 in flight
    limit.release(first, throttled=False)
    clock.advance(5)
    assert limit.try_acquire() is not None
    assert limit.limit <= 2 and limit.state().recoveries == 1  # a throttle 5 s ago: no recovery yet


def test_a_limit_that_is_not_adaptive_never_recovers_what_it_never_lowered():
    clock = ManualClock()
    limit = ConcurrencyLimit(8, adaptive=False, clock=clock.monotonic)
    limit.release(limit.acquire(), throttled=True)
    clock.advance(60)
    limit.acquire()
    assert limit.limit == 8 and limit.state().recoveries == 0
