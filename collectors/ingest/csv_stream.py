"""Read a measurements CSV in chunks of rows, validated per chunk, in bounded memory.

The rules are those of :mod:`.csv_rows` (one row at a time, with pydantic's messages),
run column-wise by :mod:`.csv_columns`, which is what makes a 200 MB file take seconds
instead of minutes.  Plain files go through :mod:`.csv_fast` (pandas' C parser); the rest
through the ``csv`` module here.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from collectors.ingest.csv_columns import first_bad_row, parse_column, values_frame
from collectors.ingest.csv_fast import NotPlain, fast_frames
from collectors.ingest.csv_rows import check_header, parse_row
from modeling.errors import InvalidInput
from modeling.workload import WORKLOAD_FIELDS

CHUNK_ROWS = 50_000


def iter_csv_frames(
    open_binary: Callable[[], BinaryIO], source: str, *, chunk_rows: int | None = None
) -> Iterator[pd.DataFrame]:
    """Validated rows of a measurements CSV, in chunks, as DataFrames.

    Columns: every workload field (defaults filled in), then the file's metric columns
    (NaN where a cell is empty).  The first bad row raises ``InvalidInput`` naming the
    source, its line and the reason; frames already yielded are then to be discarded.
    Plain files take :func:`~.csv_fast.fast_frames`; when it steps aside, the exact reader
    goes on from the row where it stopped (rows it gave are the exact reader's too).
    """
    done = 0
    try:
        for frame in fast_frames(open_binary, source):
            done += len(frame)
            yield frame
        return
    except NotPlain:
        pass
    for frame in exact_frames(open_binary, source, chunk_rows=chunk_rows):
        if done >= len(frame):
            done -= len(frame)
            continue
        yield frame.iloc[done:].reset_index(drop=True)
        done = 0


def exact_frames(
    open_binary: Callable[[], BinaryIO], source: str, *, chunk_rows: int | None = None
) -> Iterator[pd.DataFrame]:
    """The exact reader: the ``csv`` module, row-wise messages; see :func:`iter_csv_frames`."""
    chunk_rows = chunk_rows or CHUNK_ROWS
    with open_binary() as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        reader = csv.reader(text, strict=True)
        header: list[str] | None = None
        header_line = 0
        rows: list[list[str]] = []
        lines: list[int] = []
        n_rows = 0
        try:
            for cells in reader:
                if not "".join(cells).strip():
                    continue  # blank line
                line = reader.line_num
                if header is None:
                    header, header_line = check_header(cells, source, line), line
                    continue
                if len(cells) != len(header):
                    raise InvalidInput(
                        f"{source}, line {line}: {len(cells)} values for {len(header)} columns"
                    )
                rows.append(cells)
                lines.append(line)
                if len(rows) >= chunk_rows:
                    yield chunk_frame(header, rows, lines, source)
                    n_rows += len(rows)
                    rows, lines = [], []
        except csv.Error as exc:
            raise InvalidInput(f"{source}, line {reader.line_num}: malformed CSV: {exc}") from None
        except UnicodeDecodeError:
            raise utf8_error(open_binary, source) from None
    if header is None:
        raise InvalidInput(f"{source}: empty file (expected a CSV header line)")
    if rows:
        yield chunk_frame(header, rows, lines, source)
    elif not n_rows:
        raise InvalidInput(f"{source}, line {header_line}: header only, no data rows")


def parse_csv_measurements(
    text_or_path: str | bytes | Path, *, source: str | None = None
) -> list[dict[str, Any]]:
    """Parse a whole measurements CSV (a ``Path``, raw ``bytes`` or the text) into validated rows.

    An empty metric cell leaves its key out of the row.  Raises ``InvalidInput`` naming
    the source, the line number and the reason.
    """
    if isinstance(text_or_path, Path):
        path = text_or_path
        source = source or path.name
        opener: Callable[[], BinaryIO] = lambda: open(path, "rb")  # noqa: E731
    else:
        data = text_or_path if isinstance(text_or_path, bytes) else text_or_path.encode("utf-8")
        source = source or "CSV"
        opener = lambda: io.BytesIO(data)  # noqa: E731
    out: list[dict[str, Any]] = []
    for frame in iter_csv_frames(opener, source):
        metrics = [c for c in frame.columns if c not in WORKLOAD_FIELDS]
        for record in frame.to_dict("records"):
            out.append({k: v for k, v in record.items() if k not in metrics or not math.isnan(v)})
    return out


def utf8_error(open_binary: Callable[[], BinaryIO], source: str) -> InvalidInput:
    """The error naming the line and offset of the first byte that is not UTF-8."""
    offset = line = 0
    carry = b""
    with open_binary() as fh:
        while True:
            block = fh.read(1 << 20)
            buf = carry + block
            # A newline byte never sits inside a multi-byte sequence: cut there.
            cut = len(buf) if not block else buf.rfind(b"\n") + 1
            try:
                buf[:cut].decode("utf-8")
            except UnicodeDecodeError as exc:
                line += buf[: exc.start].count(b"\n") + 1
                return InvalidInput(
                    f"{source}, line {line}: not UTF-8 text "
                    f"(byte 0x{buf[exc.start]:02x} at offset {offset + exc.start})"
                )
            if not block:
                return InvalidInput(f"{source}: not UTF-8 text")
            line += buf[:cut].count(b"\n")
            offset += cut
            carry = buf[cut:]


def chunk_frame(header: list[str], rows: list[list[str]], lines: list[int], source: str) -> pd.DataFrame:
    """Validate a chunk of rows column-wise; the frame of their values, or the first bad row's error."""
    n = len(rows)
    bad = np.zeros(n, dtype=bool)
    values: dict[str, np.ndarray] = {}
    for name, raw in zip(header, zip(*rows, strict=True), strict=True):
        values[name], bad_cells = parse_column(name, raw)
        bad |= bad_cells
    first, matrix = first_bad_row(header, values, bad)
    if first < n:
        parse_row(header, rows[first], source, lines[first])  # raises the row-wise message
        raise InvalidInput(f"{source}, line {lines[first]}: invalid row")  # the two rule sets disagree
    return values_frame(header, values, matrix)


__all__ = ["CHUNK_ROWS", "chunk_frame", "iter_csv_frames", "parse_csv_measurements", "utf8_error"]
