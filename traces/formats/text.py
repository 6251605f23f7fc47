"""Helpers for line-oriented trace formats: blocks of whole lines, fast numeric tables."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from modeling.errors import TraceFormatError

BLOCK_BYTES = 16 << 20


def iter_blocks(
    path: Path, block_bytes: int = BLOCK_BYTES, skip_lines: int = 0
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number of the block's first line, block of whole lines)``.

    A last line without a newline is yielded too; the caller decides if it is complete.
    """
    line_no = 1
    carry = b""
    with open(path, "rb") as fh:
        for _ in range(skip_lines):
            if not fh.readline():
                return
            line_no += 1
        while True:
            data = fh.read(block_bytes)
            buf = carry + data
            if not data:
                if buf:
                    yield line_no, buf
                return
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                carry = buf
                continue
            block, carry = buf[:cut], buf[cut:]
            yield line_no, block
            line_no += block.count(b"\n")


def first_bad_line(block: bytes, first_line: int, ok: Callable[[list[str]], bool]) -> int | None:
    """Line number of the first non-blank line whose fields ``ok`` rejects (slow; errors only)."""
    for i, line in enumerate(block.decode("utf-8", "replace").splitlines()):
        fields = line.replace(",", " ").split()
        if fields and not ok(fields):
            return first_line + i
    return None


def numeric_table(
    block: bytes,
    first_line: int,
    ncols: int,
    *,
    path: Path,
    what: str,
    sep: str = r"\s+",
    min_cols: int | None = None,
) -> np.ndarray:
    """Parse a block of numeric rows into a float64 array of shape (rows, ncols)."""
    min_cols = ncols if min_cols is None else min_cols

    def ok(fields: list[str]) -> bool:
        if not min_cols <= len(fields) <= ncols:
            return False
        try:
            [float(f) for f in fields[:ncols]]
        except ValueError:
            return False
        return True

    try:
        df = pd.read_csv(
            io.BytesIO(block),
            sep=sep,
            header=None,
            names=range(ncols),
            dtype=np.float64,
            engine="c",
            skip_blank_lines=True,
            comment=None,
        )
    except (ValueError, pd.errors.ParserError):
        df = None
    if df is not None:
        values = df.to_numpy(dtype=np.float64)
        if not np.isnan(values[:, :min_cols]).any():
            return values
    bad = first_bad_line(block, first_line, ok)
    line = f"line {bad}" if bad is not None else f"lines {first_line}+"
    raise TraceFormatError(
        f"{path}: {line}: not a valid {what} record (expected {min_cols}"
        + (f"-{ncols}" if ncols != min_cols else "")
        + " numeric fields; truncated or corrupt?)"
    )
