"""Bounded parallel work (``s3commit.transfer.parallel``): windows, order, failures collected, stopping early; the
collector kept quiet through a burst."""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest

from s3commit.transfer.parallel import gather, map_ordered, quiet_collector, run_each, window_for


class Gauge:
    """Counts calls running at once, and the most there ever were."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Gauge:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.now -= 1


def test_run_each_calls_every_item_once_and_returns_no_failures():
    seen: list[int] = []
    lock = threading.Lock()

    def record(item: int) -> None:
        with lock:
            seen.append(item)

    with ThreadPoolExecutor(4) as pool:
        assert run_each(pool, range(1000), record, window=8) == []
    assert sorted(seen) == list(range(1000))


def test_run_each_never_has_more_than_the_window_queued_or_running():
    # Given: a pool of 8 threads and a window of 3.
    gauge = Gauge()
    drawn: list[int] = []

    def items():
        for i in range(60):
            drawn.append(i)
            yield i

    def slow(_item: int) -> None:
        with gauge:
            time.sleep(0.002)

    # When: 60 items run through it.
    with ThreadPoolExecutor(8) as pool:
        run_each(pool, items(), slow, window=3)

    # Then: never more than 3 ran at once, and every item was drawn (lazily).
    assert gauge.peak <= 3
    assert drawn == list(range(60))


@pytest.mark.slow  # in the slow tier for the default tier's time budget (README, Tests)
def test_run_each_keeps_memory_flat_however_many_items():
    # A finished call leaves nothing behind: 50,000 items cost no more than 5,000.
    def peak(count: int) -> int:
        with ThreadPoolExecutor(4) as pool:
            tracemalloc.start()
            run_each(pool, range(count), lambda _i: None, window=16)
            _, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        return top

    small, large = peak(5_000), peak(50_000)
    assert large < small * 2 + 64 * 1024, (small, large)


def test_run_each_collects_every_failure_with_its_item_and_raises_none():
    def fail_on_odd(item: int) -> None:
        if item % 2:
            raise ValueError(f"odd {item}")

    with ThreadPoolExecutor(4) as pool:
        failures = run_each(pool, range(10), fail_on_odd, window=4)
    assert sorted(f.item for f in failures) == [1, 3, 5, 7, 9]
    assert all(isinstance(f.error, ValueError) and str(f.error) == f"odd {f.item}" for f in failures)


def test_run_each_stops_at_the_first_failure_when_asked():
    # Given: item 5 fails; one thread, so items run one after another.
    started: list[int] = []

    def work(item: int) -> None:
        started.append(item)
        if item == 5:
            raise RuntimeError("boom")

    # When: it runs with stop_on_failure.
    with ThreadPoolExecutor(1) as pool:
        failures = run_each(pool, range(1000), work, window=2, stop_on_failure=True)

    # Then: one failure is reported, and at most the window's worth ran after it (queued, then skipped).
    assert [(f.item, str(f.error)) for f in failures] == [(5, "boom")]
    assert started[:6] == [0, 1, 2, 3, 4, 5]
    assert max(started) <= 5 + 2


def test_run_each_waits_for_running_calls_before_it_returns():
    done: list[int] = []

    def slow(item: int) -> None:
        time.sleep(0.01)
        done.append(item)

    with ThreadPoolExecutor(4) as pool:
        run_each(pool, range(8), slow, window=8)
        assert sorted(done) == list(range(8))


def test_map_ordered_yields_in_the_order_of_the_items_whatever_order_they_finish_in():
    def late_for_small(item: int) -> int:
        time.sleep(0.001 * (10 - item))
        return item * item

    with ThreadPoolExecutor(4) as pool:
        got = [(item, future.result()) for item, future in map_ordered(pool, range(10), late_for_small, window=4)]
    assert got == [(i, i * i) for i in range(10)]


def test_map_ordered_runs_at_most_the_window_ahead_of_its_consumer():
    # Given: a consumer that has read nothing yet.
    submitted: list[int] = []

    def items():
        for i in range(100):
            submitted.append(i)
            yield i

    with ThreadPoolExecutor(4) as pool:
        results = map_ordered(pool, items(), lambda i: i, window=5)
        # When: it reads the first result.
        first = next(results)
        # Then: only the window's worth was drawn from the items.
        assert first[0] == 0
        assert len(submitted) == 5
        assert [item for item, _ in results] == list(range(1, 100))


def test_gather_returns_every_result_in_order_and_every_failure():
    def half(item: int) -> int:
        if item == 3:
            raise KeyError(item)
        return item // 2

    with ThreadPoolExecutor(3) as pool:
        results, failures = gather(pool, range(6), half, window=2)
    assert results == [0, 0, 1, 2, 2]
    assert [(f.item, type(f.error)) for f in failures] == [(3, KeyError)]


@pytest.mark.parametrize("call", [run_each, lambda *a, **k: list(map_ordered(*a, **k)), gather])
def test_a_window_below_one_is_refused(call):
    with ThreadPoolExecutor(1) as pool, pytest.raises(ValueError, match="window must be >= 1"):
        call(pool, [1], lambda i: i, window=0)


def test_the_window_for_a_pool_keeps_four_calls_per_thread():
    assert window_for(8) == 32
    assert window_for(0) == 4


def test_quiet_collector_freezes_what_was_there_and_puts_it_back():
    # (The frozen count falls when a frozen object is freed, by any thread: counts are compared with a margin far
    # below what a second freeze would add.)
    assert gc.get_freeze_count() == 0
    before = [[] for _ in range(10)]  # noqa: F841  (alive on entry)
    with quiet_collector():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        made = [[] for _ in range(20_000)]  # tracked, made within: a second freeze would add them
        with quiet_collector():  # nested (a commit inside another's beside work): one freeze
            assert gc.get_freeze_count() <= frozen < gc.get_freeze_count() + len(made)
        assert gc.get_freeze_count() <= frozen
    assert gc.get_freeze_count() == 0


def test_quiet_collector_collects_cycles_made_within_and_puts_back_on_failure():
    class Node:
        pass

    with pytest.raises(RuntimeError), quiet_collector():
        node = Node()
        node.self = node  # a cycle made within: not frozen, collected as usual
        gone = weakref.ref(node)
        del node
        gc.collect()
        assert gone() is None
        raise RuntimeError("the commit failed")
    assert gc.get_freeze_count() == 0


def test_quiet_collector_frees_young_garbage_before_it_freezes():
    class Node:
        pass

    node = Node()
    node.self = node  # young cyclic garbage, there on entry: freed, not frozen to wait for a full pass
    gone = weakref.ref(node)
    del node
    with quiet_collector():
        assert gone() is None


def test_quiet_collector_leaves_a_heap_someone_else_froze_as_it_is():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        made = [[] for _ in range(20_000)]  # a freeze of ours would add them
        with quiet_collector():
            assert frozen - len(made) < gc.get_freeze_count() <= frozen
        assert frozen - len(made) < gc.get_freeze_count() <= frozen  # not unfrozen: it was not ours
    finally:
        gc.unfreeze()
