"""One grammar for sizes and durations, for every entry point.

Sizes are bytes or a number with a binary suffix, as fio reads them: ``512``, ``4k``,
``4KiB``, ``1m``, ``1MiB``, ``2g``.  Durations are a number with a unit, ``200us``,
``1ms``, ``2s``, ``1.5m``, ``1min``, ``1h``; a bare number is seconds.  The sweep's
``--runtime``, the trace commands' ``--window``/``--duration``, a CSV's ``request_size``
cell, the API's size strings and a capacity SLO (``p99<=1ms``) all read through here, so
``4k`` and ``1ms`` mean the same thing wherever they are typed.

Parsers raise :class:`UnitError`, both an :class:`~modeling.errors.InvalidInput` (the CLI
prints one line and exits 2, the API answers 422) and a ``ValueError`` (so a pydantic
validator that calls them reports a field error).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any, Final

from modeling.errors import InvalidInput



class UnitError(InvalidInput, ValueError):
    """A size or duration that does not parse."""


KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB
TIB: Final = 1024 * GIB

SIZE_PATTERN: Final = r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)([iI]?[bB]?)\s*$"
"""A size string (``16k``, ``4KiB``, ``1m``): what :func:`parse_size` reads and the API schema says."""
_SIZE_RE: Final = re.compile(SIZE_PATTERN)
_SIZE_MULT: Final = {"": 1, "k": KIB, "m": MIB, "g": GIB, "t": TIB}

DURATION_PATTERN: Final = r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(us|ms|s|m|min|h)?\s*$"
"""A duration string (``200us``, ``1ms``, ``2s``, ``1.5m``); no unit means seconds."""
_DURATION_RE: Final = re.compile(DURATION_PATTERN, re.IGNORECASE)
_DURATION_SECONDS: Final = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION_US: Final = {
    "us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000, "h": 3_600_000_000,
}


def parse_size(value: Any) -> int:
    """Bytes from an int or a string like ``4096``, ``16k``, ``4KiB``, ``1MiB``."""
    if isinstance(value, bool):
        raise UnitError("size must be a number of bytes or a string like '16k'")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise UnitError(f"size must be a whole number of bytes, got {value}")
        return int(value)
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if not match:
            raise UnitError(f"not a size: {value!r} (use bytes or a suffix k, m, g: '16k', '1MiB')")
        number, unit, _ = match.groups()
        size = float(number) * _SIZE_MULT[unit.lower()]
        if not size.is_integer():
            raise UnitError(f"size {value!r} is not a whole number of bytes")
        return int(size)
    raise UnitError(f"size must be a number of bytes or a string like '16k', got {type(value).__name__}")


def format_size(size: int) -> str:
    """Format a byte count the way fio accepts it (``4k``, ``1m``, ``1536``)."""
    for suffix, mult in (("g", GIB), ("m", MIB), ("k", KIB)):
        if size >= mult and size % mult == 0:
            return f"{size // mult}{suffix}"
    return str(size)


def _duration_parts(value: Any) -> tuple[str, str]:
    if isinstance(value, bool):
        raise UnitError("a duration must be like '1ms', '500ms' or '2s'")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise UnitError(f"a duration must be a finite number of seconds >= 0, got {value}")
        return repr(float(value)), "s"
    match = _DURATION_RE.match(str(value))
    if not match:
        raise UnitError(f"not a duration: {value!r} (use e.g. '200us', '1ms', '2s', '1.5m')")
    return match.group(1), (match.group(2) or "s").lower()


def _finite(result: float, value: Any) -> float:
    """``result`` unless a 400-digit number overflowed it to infinity."""
    if not math.isfinite(result):
        raise UnitError(f"duration {value!r} is too large")
    return result


def parse_duration(value: Any) -> float:
    """Seconds from ``200us``, ``1ms``, ``2s``, ``1.5m``, ``1h`` or a number of seconds."""
    number, unit = _duration_parts(value)
    return _finite(float(number) * _DURATION_SECONDS[unit], value)


def parse_duration_us(value: Any) -> float:
    """Microseconds from a duration (``1ms`` -> 1000.0), for latency thresholds."""
    number, unit = _duration_parts(value)
    return _finite(float(number) * _DURATION_US[unit], value)


def parse_duration_ms(value: Any) -> int:
    """Whole milliseconds from a duration (``1.5s`` -> 1500); fio's job time resolution."""
    number, unit = _duration_parts(value)
    ms = Decimal(number) * _DURATION_US[unit] / 1000  # exact: "0.3s" is 300 ms, not 299.99...
    if ms != ms.to_integral_value():
        raise UnitError(f"invalid duration {value!r}: not a whole number of milliseconds")
    return int(ms)


def format_duration_ms(ms: int) -> str:
    """A whole number of milliseconds the way fio reads it (``2s``, ``1500ms``)."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"
