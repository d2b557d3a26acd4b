"""The size of the bridge's Java sources, reported, not limited (a concept is not cut in two to meet a number):
``pytest -s`` prints the largest ``.java`` files under ``jvm-bridge/src``. No JVM needed."""

from __future__ import annotations

from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "jvm-bridge" / "src"


def test_java_source_sizes_are_reported():
    files = sorted(SOURCES.rglob("*.java"))
    assert len(files) > 10, f"the bridge's Java sources were not found under {SOURCES}"
    lengths = {path.relative_to(SOURCES).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
               for path in files}
    print("largest Java sources (lines):")
    for name, lines in sorted(lengths.items(), key=lambda item: -item[1])[:15]:
        print(f"  {lines:5d}  {name}")
