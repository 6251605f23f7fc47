"""The one set of field checks every trace parser applies before building a chunk.

A request's offset and size are whole bytes with ``0 <= offset``, ``0 < size`` and
``offset + size < 2**63`` (they are int64 downstream, and an overflow there would wrap
silently); its timestamp is finite, ``>= 0``, not before the trace's first request and less than
:data:`MAX_SPAN_S` after it (window numbers and replay timestamps are int64 downstream:
a timestamp of 1e30 s would wrap to a window at -9.2e18 s);
a latency, where the format has one, is finite and ``>= 0`` (NaN means "not known").
The first bad request raises :class:`TraceFormatError` naming its position (a line
number or a byte offset), which each parser supplies through a ``locate`` function.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from modeling.errors import TraceFormatError
from traces.chunks import TraceChunk

INT64_LIMIT = float(2**63)
MAX_SPAN_S = 1e9
"""Longest trace accepted, in seconds (about 32 years; real block traces span days)."""
Locate = Callable[[int], str]
"""Position of row ``i`` of the arrays being checked, e.g. ``"line 12"`` or ``"byte 4096"``."""


def lines_locator(block: bytes, first_line: int, rows: np.ndarray | None = None) -> Locate:
    """Locate row ``i`` of a block's non-blank lines (or of ``rows``, indices into them).

    The line numbers are only worked out when a bad row is reported.
    """

    def locate(i: int) -> str:
        index = int(rows[i]) if rows is not None else i
        seen = -1
        for n, line in enumerate(block.split(b"\n")):
            if line.strip():
                seen += 1
                if seen == index:
                    return f"line {first_line + n}"
        return f"lines {first_line}+"

    return locate


def _show(value: object) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else repr(value)


def _fail(path: Path, locate: Locate, bad: np.ndarray, message: Callable[[int], str]) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        raise TraceFormatError(f"{path}: {locate(i)}: {message(i)}")


def int_field(
    values: np.ndarray, name: str, path: Path, locate: Locate, *, scale: int = 1
) -> np.ndarray:
    """Whole, non-negative int64 values of ``values`` x ``scale`` (bytes), below 2**63.

    ``values`` may hold digit strings (``S`` dtype), integers or floats; the bound is checked
    before any conversion that could overflow.
    """
    as_float = values.astype(np.float64) * scale
    with np.errstate(invalid="ignore"):
        bad = ~((as_float >= 0) & (as_float < INT64_LIMIT))
    _fail(path, locate, bad, lambda i: f"{name} {_show(values[i])} is out of range (0 to 2**63)")
    if values.dtype.kind == "f":
        fractional = as_float != np.floor(as_float)
        _fail(path, locate, fractional, lambda i: f"{name} {_show(values[i])} is not whole")
    return values.astype(np.int64) * scale


def float_field(
    values: np.ndarray, name: str, path: Path, locate: Locate, *, scale: float = 1.0
) -> np.ndarray:
    """Finite, non-negative float64 values of ``values`` x ``scale`` (times, latencies)."""
    out = values.astype(np.float64) * scale
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(out) & (out >= 0))
    _fail(path, locate, bad, lambda i: f"{name} {_show(values[i])} is not a finite, non-negative number")
    return out


def request_chunk(
    path: Path,
    locate: Locate,
    time_s: np.ndarray,
    is_write: np.ndarray,
    offset: np.ndarray,
    size: np.ndarray,
    latency_s: np.ndarray | None = None,
) -> TraceChunk:
    """Check requests (times already relative to the trace start) and build their chunk."""
    with np.errstate(invalid="ignore"):
        _fail(
            path, locate, ~(np.isfinite(time_s) & (time_s >= 0)),
            lambda i: f"timestamp {time_s[i]:g} s is before the trace's first request or not finite",
        )
        _fail(
            path, locate, time_s >= MAX_SPAN_S,
            lambda i: f"timestamp {time_s[i]:g} s is {MAX_SPAN_S:g} s or more after the trace's first "
                      "request",
        )
        _fail(path, locate, size <= 0, lambda i: f"request size {size[i]} is not > 0")
        _fail(
            path, locate, offset > np.iinfo(np.int64).max - size,
            lambda i: f"request end {offset[i]} + {size[i]} passes 2**63 bytes",
        )
        if latency_s is not None:
            _fail(
                path, locate, ~np.isnan(latency_s) & ~(np.isfinite(latency_s) & (latency_s >= 0)),
                lambda i: f"latency {latency_s[i]:g} s is not a finite, non-negative number",
            )
    return TraceChunk.build(time_s, is_write, offset, size, latency_s)


__all__ = [
    "INT64_LIMIT", "MAX_SPAN_S", "Locate", "float_field", "int_field", "lines_locator", "request_chunk",
]
