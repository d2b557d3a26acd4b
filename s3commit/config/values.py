"""Configuration values as users write them: sizes (``64M``), booleans, durations (``90s``, ``10m``), seconds;
numbers and text. The ``parse_*`` functions take ``what`` (the key, named in an error): options' fields read keys
through them (:func:`s3commit.config.options.setting`).

May import: :mod:`s3commit.errors` only.
"""

from __future__ import annotations

import re

from s3commit.errors import ConfigError

MIB = 1024 * 1024


def parse_size(text: str | int, *, what: str) -> int:
    """Parse ``64M``, ``5m``, ``1G``, ``1048576`` into bytes."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)[bB]?\s*", str(text))
    if not match:
        raise ConfigError(f"{what}: {text!r} is not a size (examples: 64M, 128m, 1G, 8388608)")
    number, unit = int(match.group(1)), match.group(2).lower()
    return number * {"": 1, "k": 1024, "m": MIB, "g": 1024 * MIB, "t": 1024 * 1024 * MIB}[unit]


def parse_int(text: str, *, what: str) -> int:
    return int(text)


def parse_float(text: str, *, what: str) -> float:
    return float(text)


def parse_text(text: str, *, what: str) -> str:
    return text


def parse_optional(text: str, *, what: str) -> str | None:
    """Text, or None where empty (nothing set: boto3's own resolution, or no such setting)."""
    return text or None


def parse_bool(text: str | bool, *, what: str) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ConfigError(f"{what}: {text!r} is not a boolean. Valid values are: true, false")


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``2d``, ``1w``, ``1d12h`` -> seconds.

    Raises:
        ConfigError: not a duration.
    """
    value = str(text).strip().lower()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if value[pos:match.start()].strip():
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not value or pos == 0 or value[pos:].strip():
        raise ConfigError(f"{text!r} is not a duration (examples: 90s, 30m, 12h, 2d, 1w, 1d12h)")
    return total


def parse_seconds(text: str | float, *, what: str) -> float:
    """A non-negative number of seconds (``90``, ``0.5``) or a duration with units (``90s``, ``10m``, ``1h``)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        try:
            value = parse_duration(str(text))
        except ConfigError:
            raise ConfigError(f"{what}: {text!r} is neither a number of seconds nor a duration (90s, 10m, 1h)"
                              ) from None
    if value < 0:
        raise ConfigError(f"{what}: {text!r} is negative")
    return value
