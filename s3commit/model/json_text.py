"""JSON read as the standard library reads it, faster where it counts. Pure: no I/O.

A job commit parses every pendingset before its first Complete (about 70 MB of JSON for 100,000 files: 0.5 s of CPU
with the standard library on the reference machine, 0.25 s with orjson), and the sidecar the task commit messages of
a job. :func:`loads` uses orjson (a dependency) and gives what it refuses to the standard library, so that what is
accepted, and the message of what is not, are the standard library's. One difference: an integer past 64 bits is
read as a float (orjson's rule), which no field of these formats may hold (a length, a time, a size): their checks
refuse it as a number of the wrong type, where the standard library would have passed it on.
"""

from __future__ import annotations

import json
from typing import Any

try:
    from orjson import JSONDecodeError as _FastDecodeError
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - a platform without its wheel
    _fast_loads = None  # type: ignore[assignment]


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``: the same values (what orjson refuses and the standard library accepts, such as ``NaN``,
    is read by the latter; integers past 64 bits are floats) and the same ``json.JSONDecodeError`` for what neither
    reads."""
    if _fast_loads is not None:
        try:
            return _fast_loads(data)
        except _FastDecodeError:
            pass
    return json.loads(data)
