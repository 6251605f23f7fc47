"""Helpers for line-oriented trace formats: blocks of whole lines, fast numeric tables."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd

from modeling.errors import TraceFormatError

BLOCK_BYTES = 16 << 20
# A trace line is a few dozen bytes; a "line" of a megabyte is a file without newlines
# (binary data, a sparse file), and carrying it whole would hold the file in memory.
MAX_LINE_BYTES = 1 << 20


def line_too_long(path: Path, line_no: int, limit: int = MAX_LINE_BYTES) -> TraceFormatError:
    """The error for a line over ``limit`` bytes (a file without newlines, or not text)."""
    return TraceFormatError(
        f"{path}: line {line_no}: longer than {limit} bytes without a newline (not a text trace?)"
    )


def read_line(fh: BinaryIO, path: Path, line_no: int, limit: int = MAX_LINE_BYTES) -> bytes:
    """One line of ``fh`` (with its newline), refusing one over ``limit`` bytes."""
    line = fh.readline(limit + 1)
    if len(line) > limit and not line.endswith(b"\n"):
        raise line_too_long(path, line_no, limit)
    return line


def iter_blocks(
    path: Path, block_bytes: int = BLOCK_BYTES, skip_lines: int = 0, max_line: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line number of the block's first line, block of whole lines)``.

    A last line without a newline is yielded too; the caller decides if it is complete.
    A line over ``max_line`` bytes is an error naming it, so memory stays bounded.
    """
    line_no = 1
    carry = b""
    with open(path, "rb") as fh:
        for _ in range(skip_lines):
            if not read_line(fh, path, line_no, max_line):
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
                if len(buf) > max_line:
                    raise line_too_long(path, line_no, max_line)
                carry = buf
                continue
            block, carry = buf[:cut], buf[cut:]
            del buf
            lines = block.count(b"\n")
            if len(carry) > max_line:
                raise line_too_long(path, line_no + lines, max_line)
            if lines and len(block) > max_line * lines:
                _check_line_lengths(block, path, line_no, max_line)
            yield line_no, block
            line_no += lines


def _check_line_lengths(block: bytes, path: Path, first_line: int, max_line: int) -> None:
    """Raise for the first line of ``block`` over ``max_line`` bytes (called only when one may be)."""
    start = 0
    for i in range(block.count(b"\n")):
        end = block.index(b"\n", start)
        if end - start > max_line:
            raise line_too_long(path, first_line + i, max_line)
        start = end + 1


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
