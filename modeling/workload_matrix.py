"""The workload matrix: workloads as an ``(n, 9)`` float array of :data:`WORKLOAD_FIELDS`.

Batch prediction, training and evaluation all work on this one representation, so that
everything stays vectorised: :func:`workload_matrix` builds it from a DataFrame (filling
the extended fields' defaults), :func:`check_matrix` validates it with the limits of
the :class:`~modeling.workload.Workload` type, :func:`region_codes` names each row's
workload region, and the derived columns (mean request size, outstanding I/O) live here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput
from modeling.workload import MAX_REQUEST_SIZE, SMALL_REQUEST_MAX, WORKLOAD_FIELDS

FIELD_INDEX = {name: i for i, name in enumerate(WORKLOAD_FIELDS)}
"""Column of each workload field."""
_IDX = FIELD_INDEX
# (low, high) limits of each field, as the Workload type enforces them
_LIMITS = {
    "write_ratio": (0.0, 1.0),
    "queue_depth": (1, 4096),
    "request_size": (512, MAX_REQUEST_SIZE),
    "randomness": (0.0, 1.0),
    "numjobs": (1, 1024),
    "read_size": (512, MAX_REQUEST_SIZE),
    "write_size": (512, MAX_REQUEST_SIZE),
    "read_randomness": (0.0, 1.0),
    "write_randomness": (0.0, 1.0),
}


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


def fill_defaults(w: np.ndarray) -> np.ndarray:
    """Fill NaN extended fields in place: numjobs 1, per-direction values from the basic ones."""
    nj = w[:, _IDX["numjobs"]]
    nj[np.isnan(nj)] = 1.0
    for field, source in (
        ("read_size", "request_size"),
        ("write_size", "request_size"),
        ("read_randomness", "randomness"),
        ("write_randomness", "randomness"),
    ):
        col = w[:, _IDX[field]]
        gap = np.isnan(col)
        col[gap] = w[gap, _IDX[source]]
    return w


def mean_request_size(w: np.ndarray) -> np.ndarray:
    """Mean bytes per request of the read/write mix."""
    wr = w[:, _IDX["write_ratio"]]
    return (1.0 - wr) * w[:, _IDX["read_size"]] + wr * w[:, _IDX["write_size"]]


def outstanding_io(w: np.ndarray) -> np.ndarray:
    """Total I/Os in flight: queue_depth x numjobs."""
    return w[:, _IDX["queue_depth"]] * w[:, _IDX["numjobs"]]


def region_codes(w: np.ndarray) -> np.ndarray:
    """Index into REGION_NAMES of each row of a workload matrix."""
    write = w[:, _IDX["write_ratio"]] > 0.5
    seq = w[:, _IDX["randomness"]] < 0.5
    large = w[:, _IDX["request_size"]] > SMALL_REQUEST_MAX
    return write.astype(np.int64) * 4 + seq.astype(np.int64) * 2 + large.astype(np.int64)


def check_matrix(w: np.ndarray) -> None:
    """Raise ``InvalidInput`` naming the field and row of the first invalid value."""
    for name, (lo, hi) in _LIMITS.items():
        col = w[:, _IDX[name]]
        bad = ~((col >= lo) & (col <= hi))
        if name in ("queue_depth", "numjobs"):
            bad |= col != np.round(col)
        elif name.endswith("size"):
            bad |= np.mod(col, 512) != 0
        if bad.any():
            row = int(np.argmax(bad))
            raise InvalidInput(
                f"invalid workload in row {row + 1}: {name}={col[row]!r} (allowed {lo}..{hi})",
                details={"field": name, "row": row},
            )
