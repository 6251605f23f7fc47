"""The workload matrix: workloads as an ``(n, 9)`` float array of :data:`WORKLOAD_FIELDS`.

Batch prediction, training and evaluation all work on this one representation, so that
everything stays vectorised: :func:`workload_matrix` builds it from a DataFrame (filling
the extended fields' defaults with :func:`~modeling.workload.fill_defaults`),
:func:`check_matrix` validates it with the workload's limits table, :func:`region_codes`
names each row's workload region, and the derived columns (mean request size, outstanding I/O) live here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from collections.abc import Mapping, Sequence
from typing import Any

from modeling.errors import InvalidInput
from modeling.workload import BASIC_FIELDS, WORKLOAD_FIELDS, WORKLOAD_LIMITS, fill_defaults, region_code

FIELD_INDEX = {name: i for i, name in enumerate(WORKLOAD_FIELDS)}
"""Column of each workload field."""
_IDX = FIELD_INDEX
_WR, _READ_SIZE, _WRITE_SIZE = _IDX["write_ratio"], _IDX["read_size"], _IDX["write_size"]
FRACTION_COLUMNS = tuple(i for i, f in enumerate(WORKLOAD_FIELDS) if "ratio" in f or "randomness" in f)
"""Columns of the fields that are fractions (0 to 1): write ratio and the randomness fields."""


def workload_matrix(frame: pd.DataFrame) -> np.ndarray:
    """The ``(n, 9)`` float64 matrix of workload fields, extended defaults filled in."""
    n = len(frame)
    out = np.empty((n, len(WORKLOAD_FIELDS)), dtype=np.float64)
    for name, i in _IDX.items():
        if name in frame.columns:
            out[:, i] = pd.to_numeric(frame[name], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            out[:, i] = np.nan
    fill_defaults(out)
    return out


def columns_matrix(columns: Mapping[str, Any]) -> np.ndarray:
    """The checked workload matrix of workloads given as columns by field name (NaN: left out).

    The four basic fields are required; the others default as in ``Workload``.  Every value
    is checked against the workload limits (``InvalidInput`` names the field and row).
    """
    missing = [f for f in BASIC_FIELDS if f not in columns]
    if missing:
        raise InvalidInput(f"missing workload column(s): {', '.join(missing)}")
    n = len(columns["write_ratio"])
    w = np.empty((n, len(WORKLOAD_FIELDS)), dtype=np.float64)
    for name, i in _IDX.items():
        if name not in columns:
            w[:, i] = np.nan
            continue
        try:
            w[:, i] = np.asarray(columns[name], dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInput(f"column {name!r} holds non-numeric values", details={"field": name}) from None
    for name in BASIC_FIELDS:
        gap = np.isnan(w[:, _IDX[name]])
        if gap.any():
            row = int(np.argmax(gap))
            raise InvalidInput(
                f"invalid workload in row {row + 1}: {name} is missing", details={"field": name}
            )
    fill_defaults(w)
    check_matrix(w)
    return w


def mean_request_size(w: np.ndarray) -> np.ndarray:
    """Mean bytes per request of the read/write mix."""
    wr = w[:, _IDX["write_ratio"]]
    return (1.0 - wr) * w[:, _IDX["read_size"]] + wr * w[:, _IDX["write_size"]]


def mean_request_size_row(row: Sequence[float]) -> float:
    """:func:`mean_request_size` of one workload (a list of the fields), in plain floats."""
    wr = row[_WR]
    return (1.0 - wr) * row[_READ_SIZE] + wr * row[_WRITE_SIZE]


def outstanding_io(w: np.ndarray) -> np.ndarray:
    """Total I/Os in flight: queue_depth x numjobs."""
    return w[:, _IDX["queue_depth"]] * w[:, _IDX["numjobs"]]


def region_codes(w: np.ndarray) -> np.ndarray:
    """Index into REGION_NAMES of each row of a workload matrix."""
    return region_code(w[:, _IDX["write_ratio"]], w[:, _IDX["randomness"]], w[:, _IDX["request_size"]])


def check_matrix(w: np.ndarray) -> None:
    """Raise ``InvalidInput`` naming the field and row of the first invalid value.

    The limits are :data:`~modeling.workload.WORKLOAD_LIMITS`, the ones the
    :class:`~modeling.workload.Workload` type and the API schemas enforce.
    """
    for i, limit in enumerate(WORKLOAD_LIMITS):
        col = w[:, i]
        bad = ~((col >= limit.low) & (col <= limit.high))
        if limit.step is not None:
            bad |= np.mod(col, limit.step) != 0
        if bad.any():
            row = int(np.argmax(bad))
            raise InvalidInput(
                f"invalid workload in row {row + 1}: {limit.name}={col[row]!r} (allowed {limit.allowed})",
                details={"field": limit.name, "row": row},
            )
