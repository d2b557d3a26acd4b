"""What a process keeps of the objects it saw (:class:`SeenObjects`): by ETag, bounded in count and in bytes."""

from __future__ import annotations

import pytest

from s3commit.commit.process_state import SeenObjects


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> SeenObjects:
    monkeypatch.setattr(SeenObjects, "BYTES", 100)
    monkeypatch.setattr(SeenObjects, "LIMIT", 4)
    return SeenObjects()


def test_bytes_are_kept_within_the_budget_the_oldest_forgotten_first(seen: SeenObjects) -> None:
    seen.put("e", "b", "k1", "t1", b"x" * 60)
    seen.put("e", "b", "k2", "t2", b"y" * 30)
    seen.put("e", "b", "k3", "t3", b"z" * 30)  # 120 bytes: k1 goes
    assert seen.get("e", "b", "k1") is None
    assert seen.get("e", "b", "k2") == ("t2", b"y" * 30) and seen.get("e", "b", "k3") == ("t3", b"z" * 30)
    seen.put("e", "b", "k2", "t2b", b"w" * 40)  # replaced: its old bytes no longer count
    assert seen.get("e", "b", "k3") is not None and seen.get("e", "b", "k2") == ("t2b", b"w" * 40)


def test_a_value_larger_than_the_budget_is_not_kept_and_what_was_seen_there_is_forgotten(seen: SeenObjects) -> None:
    seen.put("e", "b", "k", "t1", b"small")
    seen.put("e", "b", "k", "t2", b"x" * 101)
    assert seen.get("e", "b", "k") is None


def test_parsed_values_count_toward_the_limit_only(seen: SeenObjects) -> None:
    for i in range(5):
        seen.put("e", "b", f"k{i}", f"t{i}", {"parsed": i})
    assert seen.get("e", "b", "k0") is None and seen.get("e", "b", "k4") == ("t4", {"parsed": 4})
    seen.put("e", "b", "k9", "", b"no etag")
    assert seen.get("e", "b", "k9") is None
