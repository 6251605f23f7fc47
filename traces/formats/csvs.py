"""Comma-separated trace formats: MSR Cambridge, UMass/SPC and the generic CSV.

* MSR Cambridge (SNIA IOTTA): ``Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime``;
  timestamp and response time in Windows 100 ns ticks, offset and size in bytes, type
  ``Read``/``Write``; no header line (one is tolerated).  Latency = ResponseTime.
* UMass / SPC (Storage Performance Council): ``ASU,LBA,Size,Opcode,Timestamp[,...]``; LBA in
  512-byte blocks, size in bytes, opcode ``r``/``w``, timestamp in seconds.  Requests of all
  ASUs are one stream (the ASU number is not part of the offset).
* Generic CSV (this project's own, also what ``trace capture`` writes): a header line naming
  ``timestamp_s,op,offset,size`` and optionally ``latency_us`` (per-request response time) or
  ``complete_s`` (completion time; issue/completion pairs).  ``op`` is ``read``/``write``
  (or ``R``/``W``); ``trim``, ``discard``, ``flush`` and ``sync`` rows are skipped.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from modeling.errors import TraceFormatError
from traces.formats.fields import Locate, float_field, int_field, lines_locator, request_chunk
from traces.formats.text import iter_blocks, read_line
from traces.chunks import SECTOR, LatencySource, Trace, TraceChunk, TraceInfo

MSR_COLUMNS = ("timestamp", "hostname", "disk", "type", "offset", "size", "response_time")
SPC_COLUMNS = ("asu", "lba", "size", "opcode", "timestamp")
GENERIC_REQUIRED = ("timestamp_s", "op", "offset", "size")
GENERIC_OPTIONAL = ("latency_us", "complete_s")
SKIPPED_OPS = frozenset({"trim", "discard", "flush", "sync", "t", "d", "f"})
TICK = 1e-7  # Windows filetime tick, seconds


def _frame(
    block: bytes,
    names: list[str] | tuple[str, ...],
    first_line: int,
    path: Path,
    what: str,
    numeric: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Read a block of CSV rows; any malformed row is an error naming its line.

    ``numeric`` columns must hold a number in every row, ``optional`` ones a number or nothing.
    """
    try:
        df = pd.read_csv(
            io.BytesIO(block),
            header=None,
            names=list(names),
            dtype=str,
            skip_blank_lines=True,
            skipinitialspace=True,
            index_col=False,
            on_bad_lines="error",
            engine="c",
            # only an empty field is missing: "NaN", "NA" or "null" is a value, and refused
            keep_default_na=False,
            na_values=[""],
        )
    except (pd.errors.ParserError, ValueError) as exc:
        raise TraceFormatError(f"{path}: lines {first_line}+: not valid {what}: {exc}") from exc
    for col in (*numeric, *optional):
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna().to_numpy()
        if col in optional:
            bad = bad & (df[col].fillna("").str.strip().to_numpy(dtype=str) != "")
        if bad.any():
            i = int(np.argmax(bad))
            where = lines_locator(block, first_line)(i)
            text = df[col].iloc[i]
            if isinstance(text, str) and _is_nan(text):
                # one rule with inf and negative values: a number that is not finite is refused
                raise TraceFormatError(
                    f"{path}: {where}: {col} {text.strip()} is not a finite, non-negative number"
                )
            raise TraceFormatError(
                f"{path}: {where}: not valid {what}: bad or missing {col!r} (truncated or corrupt?)"
            )
        df[col] = values
    return df


def _is_nan(text: str) -> bool:
    try:
        return bool(np.isnan(float(text)))
    except ValueError:
        return False


def _ops(series: pd.Series, locate: Locate, path: Path, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, is_write) from an op column; unknown ops are an error."""
    op = series.fillna("").str.strip().str.lower().to_numpy(dtype=str)
    is_w = np.isin(op, ("w", "write"))
    is_r = np.isin(op, ("r", "read"))
    skip = np.isin(op, list(SKIPPED_OPS))
    bad = ~(is_w | is_r | skip)
    if bad.any():
        i = int(np.argmax(bad))
        raise TraceFormatError(f"{path}: {locate(i)}: unknown operation {op[i]!r} in {what}")
    return is_w | is_r, is_w


class _Requests(NamedTuple):
    """A block's read and write rows: positions, write flags, line locator, times since ``t0``."""

    kept: np.ndarray
    is_write: np.ndarray
    locate: Locate
    time: np.ndarray
    t0: float


def _requests(
    df: pd.DataFrame, block: bytes, first_line: int, path: Path, what: str, op: str, time: str,
    t0: float | None,
) -> _Requests | None:
    """The rows of ``df`` whose ``op`` is a read or a write (None when there is none).

    Times count from ``t0``, or from this block's first request when ``t0`` is None.
    """
    keep, is_w = _ops(df[op], lines_locator(block, first_line), path, what)
    if not keep.any():
        return None
    kept = np.flatnonzero(keep)
    locate = lines_locator(block, first_line, kept)
    ts = float_field(df[time].to_numpy()[kept], time, path, locate)
    start = float(ts[0]) if t0 is None else t0
    return _Requests(kept, is_w[kept], locate, ts - start, start)


def _msr(path: Path) -> Iterator[TraceChunk]:
    t0: float | None = None
    for first_line, block in iter_blocks(path):
        if first_line == 1 and block.lower().startswith(b"timestamp"):
            first_line, block = 2, block.split(b"\n", 1)[1] if b"\n" in block else b""
        if not block.strip():
            continue
        df = _frame(
            block,
            MSR_COLUMNS,
            first_line,
            path,
            "MSR Cambridge CSV",
            ("timestamp", "disk", "offset", "size", "response_time"),
        )
        rows = _requests(df, block, first_line, path, "MSR Cambridge CSV", "type", "timestamp", t0)
        if rows is None:
            continue
        kept, locate, t0 = rows.kept, rows.locate, rows.t0
        yield request_chunk(
            path,
            locate,
            rows.time * TICK,
            rows.is_write,
            int_field(df["offset"].to_numpy()[kept], "offset", path, locate),
            int_field(df["size"].to_numpy()[kept], "size", path, locate),
            float_field(df["response_time"].to_numpy()[kept], "response time", path, locate, scale=TICK),
        )


def _spc(path: Path) -> Iterator[TraceChunk]:
    t0: float | None = None
    for first_line, block in iter_blocks(path):
        raw = pd.read_csv(io.BytesIO(block), header=None, nrows=1, dtype=str) if block.strip() else None
        if raw is None:
            continue
        extra = [f"extra{i}" for i in range(raw.shape[1] - len(SPC_COLUMNS))]
        df = _frame(
            block, (*SPC_COLUMNS, *extra), first_line, path, "SPC CSV", ("asu", "lba", "size", "timestamp")
        )
        rows = _requests(df, block, first_line, path, "SPC CSV", "opcode", "timestamp", t0)
        if rows is None:
            continue
        kept, locate, t0 = rows.kept, rows.locate, rows.t0
        yield request_chunk(
            path,
            locate,
            rows.time,
            rows.is_write,
            int_field(df["lba"].to_numpy()[kept], "lba", path, locate, scale=SECTOR),
            int_field(df["size"].to_numpy()[kept], "size", path, locate),
        )


def generic_header(path: Path) -> list[str]:
    """The column names of a generic CSV; raises if a required one is missing."""
    with open(path, "rb") as fh:
        header = read_line(fh, path, 1).decode("utf-8", "replace").strip()
    names = [n.strip().lower() for n in header.split(",")]
    missing = [c for c in GENERIC_REQUIRED if c not in names]
    if missing:
        raise TraceFormatError(
            f"{path}: line 1: generic CSV header lacks {', '.join(missing)} "
            f"(need {','.join(GENERIC_REQUIRED)}[,latency_us|complete_s])"
        )
    return names


def _generic(path: Path, names: list[str]) -> Iterator[TraceChunk]:
    numeric = tuple(n for n in names if n in ("timestamp_s", "offset", "size"))
    optional = tuple(n for n in names if n in GENERIC_OPTIONAL)
    for first_line, block in iter_blocks(path, skip_lines=1):
        if not block.strip():
            continue
        df = _frame(block, names, first_line, path, "generic trace CSV", numeric, optional)
        # the generic CSV's times are taken as written (t0 = 0: no shift)
        rows = _requests(df, block, first_line, path, "generic trace CSV", "op", "timestamp_s", 0.0)
        if rows is None:
            continue
        kept, locate, t = rows.kept, rows.locate, rows.time
        lat = None
        if "complete_s" in names:
            lat = df["complete_s"].to_numpy(np.float64)[kept] - t
        elif "latency_us" in names:
            lat = df["latency_us"].to_numpy(np.float64)[kept] / 1e6
        yield request_chunk(
            path,
            locate,
            t,
            rows.is_write,
            int_field(df["offset"].to_numpy()[kept], "offset", path, locate),
            int_field(df["size"].to_numpy()[kept], "size", path, locate),
            lat,
        )


def read(path: Path, fmt: str) -> Trace:
    """Open an MSR (``msr``), SPC (``spc``) or generic (``csv``) trace."""
    path = Path(path)
    if fmt == "msr":
        return Trace(TraceInfo("msr", [str(path)], latency_source="response_time"), _msr(path))
    if fmt == "spc":
        return Trace(TraceInfo("spc", [str(path)]), _spc(path))
    names = generic_header(path)
    source: LatencySource = (
        "pairs" if "complete_s" in names else "response_time" if "latency_us" in names else None
    )
    return Trace(TraceInfo("csv", [str(path)], latency_source=source), _generic(path, names))
