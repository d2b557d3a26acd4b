"""The bridge's Java sources stay small enough to read: no ``.java`` file under ``jvm-bridge/src`` is over 500
lines (a class that grows past it is split by concern, as ``Sidecar`` was). No JVM needed."""

from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "jvm-bridge" / "src"
LIMIT = 500


def test_no_java_source_file_is_over_500_lines():
    files = sorted(SOURCES.rglob("*.java"))
    assert len(files) > 10, f"the bridge's Java sources were not found under {SOURCES}"
    lengths = {path.relative_to(SOURCES).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
               for path in files}
    over = {name: lines for name, lines in lengths.items() if lines > LIMIT}
    assert not over, f"Java files over {LIMIT} lines (split them by concern): {over}"
