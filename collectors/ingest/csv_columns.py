"""Column-wise rules of a measurements CSV: the row-wise rules of :mod:`.csv_rows` on arrays.

Both CSV readers (:mod:`.csv_stream`, exact, and :mod:`.csv_fast`) turn a chunk of rows into
one array per column and hand it here; the rules that need no text (whole numbers, the
metric rule, required cells, at least one main metric, the workload limits) run on the
arrays, and find the first bad row.  Explaining that row is left to
:func:`~.csv_rows.parse_row`, so messages come from one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from collectors.ingest.csv_rows import INTEGER_FIELDS, metric_value, workload_value
from collectors.metric_values import valid_metric_mask
from modeling.errors import InvalidInput
from modeling.workload import BASIC_FIELDS, METRICS, SIZE_FIELDS, WORKLOAD_FIELDS
from modeling.workload_matrix import check_matrix, fill_defaults

INT_COLUMNS = frozenset(INTEGER_FIELDS | SIZE_FIELDS)


_BAD = object()


def cell_value(name: str, cell: str) -> Any:
    """A cell's value by the row-wise rules: NaN when empty, ``_BAD`` when invalid."""
    text = cell.strip()
    if not text:
        return math.nan
    try:
        return workload_value(name, text) if name in WORKLOAD_FIELDS else metric_value(name, text)
    except ValueError:
        return _BAD


def parse_column(name: str, raw: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(values with NaN for empty or bad cells, mask of bad cells) of one column of text."""
    n = len(raw)
    if name in SIZE_FIELDS:
        # Sizes may be written '16k'; a file holds few distinct ones, so parse each once.
        seen = {cell: cell_value(name, cell) for cell in set(raw)}
        bad = np.fromiter((seen[c] is _BAD for c in raw), bool, n)
        values = np.fromiter((math.nan if seen[c] is _BAD else seen[c] for c in raw), np.float64, n)
        return values, bad
    values = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(np.float64, copy=True)
    bad = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(~np.isfinite(values)):  # empty, non-numeric or non-finite: the slow rules
        value = cell_value(name, raw[int(i)])
        bad[i] = value is _BAD
        values[i] = math.nan if value is _BAD else value
    return values, bad


def first_bad_row(
    header: list[str], values: dict[str, np.ndarray], bad: np.ndarray
) -> tuple[int, np.ndarray]:
    """The column-wise rules: (index of the first bad row, or the row count; workload matrix)."""
    n = len(bad)
    for name in header:
        column = values[name]
        finite = np.isfinite(column)
        bad |= np.isinf(column)
        if name in BASIC_FIELDS:
            bad |= np.isnan(column)  # a required cell left empty
        if name in INTEGER_FIELDS:
            bad |= finite & (column != np.floor(column))
        elif name not in WORKLOAD_FIELDS:
            bad |= finite & ~valid_metric_mask(name, column)
    main = [values[m] for m in METRICS if m in values]
    bad |= np.all(np.isnan(np.vstack(main)), axis=0)  # no main metric in the row
    matrix = np.column_stack([values.get(f, np.full(n, np.nan)) for f in WORKLOAD_FIELDS])
    fill_defaults(matrix)
    first = int(np.argmax(bad)) if bad.any() else n
    while first:  # the workload limits, on the rows before the first bad one
        try:
            check_matrix(matrix[:first])
            break
        except InvalidInput as exc:
            first = int(exc.details["row"])
    return first, matrix


def values_frame(header: list[str], values: dict[str, np.ndarray], matrix: np.ndarray) -> pd.DataFrame:
    """The validated chunk: workload fields (defaults filled in) then the file's metric columns."""
    frame = pd.DataFrame(
        {
            f: matrix[:, i].astype(np.int64) if f in INT_COLUMNS else matrix[:, i]
            for i, f in enumerate(WORKLOAD_FIELDS)
        }
    )
    for name in header:
        if name not in WORKLOAD_FIELDS:
            frame[name] = values[name]
    return frame


__all__ = ["INT_COLUMNS", "cell_value", "first_bad_row", "parse_column", "values_frame"]
