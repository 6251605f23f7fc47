"""The fast path of the CSV reader: pandas' C parser on blocks of plain numeric lines.

Most measurement files are plain: unquoted numbers, one row per line, sizes in bytes.
For those, pandas parses a block of lines ten times faster than the ``csv`` module plus
Python's ``float``.  Anything else — a quote, a letter (``4k``, ``nan``, ``inf``), a line
with the wrong number of fields, a whitespace-only line, bytes that are not UTF-8, a bad
row — raises :class:`NotPlain`, and the caller reads the file again with the exact,
row-wise reader, which accepts what the rules accept and names the first bad line.  So
this path decides nothing: it either gives the exact reader's values or steps aside.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import pandas as pd

from collectors.ingest.csv_columns import cell_value, first_bad_row, values_frame
from collectors.ingest.csv_rows import check_header
from modeling.errors import InvalidInput
from modeling.workload import SIZE_FIELDS

BLOCK_BYTES = 8 << 20
# Bytes a plain numeric line never holds: letters but the exponent's e, quotes, non-ASCII.
_NOT_PLAIN = np.zeros(256, dtype=bool)
_NOT_PLAIN[np.frombuffer(b"abcdfghijklmnopqrstuvwxyzABCDFGHIJKLMNOPQRSTUVWXYZ_\"'", dtype=np.uint8)] = True
_NOT_PLAIN[128:] = True


class NotPlain(Exception):
    """The file needs the exact reader."""


def _blocks(fh: BinaryIO) -> Iterator[bytes]:
    carry = b""
    while True:
        data = fh.read(BLOCK_BYTES)
        buf = carry + data
        if not data:
            if buf:
                yield buf if buf.endswith(b"\n") else buf + b"\n"
            return
        cut = buf.rfind(b"\n") + 1
        block, carry = buf[:cut], buf[cut:]
        if block:
            yield block


def _header(fh: BinaryIO, source: str) -> list[str]:
    line_no = 0
    while True:
        line = fh.readline()
        line_no += 1
        if not line:
            raise NotPlain("no header")
        if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if line.strip():
            break
    if b'"' in line:
        raise NotPlain("quoted header")
    try:
        return check_header(line.decode("utf-8").rstrip("\r\n").split(","), source, line_no)
    except (UnicodeDecodeError, InvalidInput):
        raise NotPlain("header") from None


def _check_block(block: bytes, n_fields: int) -> None:
    """Plain lines only: ASCII without quotes or letters but e/E, each empty or of ``n_fields`` fields."""
    arr = np.frombuffer(block, dtype=np.uint8)
    if _NOT_PLAIN[arr].any():
        raise NotPlain("letters, quotes or non-ASCII")
    ends = np.flatnonzero(arr == 10)
    per_line = np.diff(np.searchsorted(np.flatnonzero(arr == 44), ends), prepend=0)
    starts = np.concatenate(([0], ends[:-1] + 1))
    empty = ends == starts + (arr[np.maximum(ends - 1, 0)] == 13)  # "" or "\r"
    if ((per_line != n_fields - 1) & ~empty).any():
        raise NotPlain("field count or blank line")


def fast_frames(open_binary: Callable[[], BinaryIO], source: str) -> Iterator[pd.DataFrame]:
    """Validated frames of a plain CSV, a block at a time; raises :class:`NotPlain` otherwise."""
    with open_binary() as fh:
        header = _header(fh, source)
        sizes = [name for name in header if name in SIZE_FIELDS]
        any_rows = False
        for block in _blocks(fh):
            _check_block(block, len(header))
            try:
                parsed = pd.read_csv(
                    io.BytesIO(block),
                    header=None,
                    names=header,
                    dtype={name: str if name in SIZE_FIELDS else np.float64 for name in header},
                    engine="c",
                    skip_blank_lines=True,
                    keep_default_na=False,
                    na_values=[""],
                )
            except (ValueError, pd.errors.ParserError):
                raise NotPlain("not numbers") from None
            if not len(parsed):
                continue
            any_rows = True
            values = {name: parsed[name].to_numpy(np.float64) for name in header if name not in SIZE_FIELDS}
            for name in sizes:
                seen = {c: cell_value(name, c) for c in parsed[name].fillna("").unique()}
                if any(not isinstance(v, (int, float)) for v in seen.values()):
                    raise NotPlain("bad size")
                values[name] = parsed[name].fillna("").map(seen).to_numpy(np.float64)
            first, matrix = first_bad_row(header, values, np.zeros(len(parsed), dtype=bool))
            if first < len(parsed):
                raise NotPlain("bad row")
            yield values_frame(header, values, matrix)
        if not any_rows:
            raise NotPlain("no rows")
