"""What the ``s3commit`` commands print: messages, errors, JSON, ages and sizes."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO


def say(message: str, *, quiet: bool = False, stream: TextIO | None = None) -> None:
    """A message on stdout (or ``stream``), unless ``quiet``."""
    if not quiet:
        print(message, file=stream or sys.stdout)


def error(message: str) -> None:
    """One error line on stderr: ``s3commit: error: <message>``."""
    print(f"s3commit: error: {message}", file=sys.stderr)


def json_text(data: Any) -> str:
    """``data`` as the commands' JSON output: indented, keys sorted, anything else as its ``str``."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def print_json(data: Any) -> None:
    print(json_text(data))


def format_age(seconds: float | None) -> str:
    """A short human age: ``45s``, ``12m``, ``5h``, ``3d``."""
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def format_bytes(n: int) -> str:
    """``512 B``, ``1.5 KiB``, ``3.0 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover
