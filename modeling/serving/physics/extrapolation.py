"""How far a workload is outside the measured range, and the nearest workload inside it.

:func:`stretch` pulls sizes and load above the measured maximum back to it (the models are
evaluated there, and :mod:`modeling.serving.physics` extends the answer back with its
laws); :func:`extrapolation` says along which fields a workload is outside, and how many
times; :func:`widen` grows an interval with that distance.  Each has its single-workload
form beside it (``*_row``: a list of the fields, plain floats, no arrays), answering the
same numbers; ``tests/modeling/test_fast_paths.py`` holds the two equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from modeling.serving.physics.limits import PhysicsLimits, RowLimits
from modeling.workload import WORKLOAD_FIELDS
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import (
    FRACTION_COLUMNS,
    mean_request_size,
    mean_request_size_row,
    outstanding_io,
)

INTERVAL_GROWTH = 0.5
"""Extra log half-width of an interval per e-fold of distance outside the measured range."""
_QD, _NJ = _F["queue_depth"], _F["numjobs"]
_SIZE_COLUMNS = (_F["request_size"], _F["read_size"], _F["write_size"])


@dataclass
class Stretch:
    """How a workload matrix was pulled into the measured range, and what that changes."""

    w_eval: np.ndarray  # the workloads the models are evaluated at
    load: np.ndarray  # outstanding I/O asked / evaluated (>= 1)
    size: np.ndarray  # mean request size asked / evaluated (>= 1)
    distance: np.ndarray  # log of the largest factor outside the measured range (>= 0)


@dataclass
class RowStretch:
    """:class:`Stretch` of one workload, in plain floats."""

    row: list[float]  # the workload the models are evaluated at
    load: float
    size: float
    distance: float


def stretch(w: np.ndarray, limits: PhysicsLimits | None) -> Stretch:
    """Clamp sizes and load above the measured maximum to it; the factors to extend back with.

    Below the measured range nothing is clamped: trees are flat there, and smaller
    requests or fewer I/Os in flight cannot break the bandwidth or load laws.
    """
    ones = np.ones(len(w))
    if limits is None:
        return Stretch(w, ones, ones, np.zeros(len(w)))
    w_eval = w.copy()
    for col in _SIZE_COLUMNS:
        np.minimum(w_eval[:, col], limits.hi[col], out=w_eval[:, col])
    size = mean_request_size(w) / np.maximum(mean_request_size(w_eval), 1.0)
    jobs = np.minimum(w_eval[:, _NJ], limits.hi[_NJ])
    # the nearest measured load: at most the deepest queue and the most jobs measured,
    # and at most the most I/Os in flight measured
    depth = np.minimum(w_eval[:, _QD], limits.hi[_QD])
    depth = np.minimum(depth, np.maximum(np.floor(limits.max_outstanding / jobs), 1.0))
    w_eval[:, _NJ] = jobs
    w_eval[:, _QD] = depth
    load = outstanding_io(w) / outstanding_io(w_eval)
    factors = np.vstack([_field_factors(w, limits).max(axis=1), load, size])
    return Stretch(w_eval, load, size, np.log(np.maximum(factors.max(axis=0), 1.0)))


def stretch_row(row: Sequence[float], lim: RowLimits) -> RowStretch:
    """:func:`stretch` of one workload (a list of the fields)."""
    ev = list(row)
    for col in _SIZE_COLUMNS:
        ev[col] = min(ev[col], lim.hi[col])
    size = mean_request_size_row(row) / max(mean_request_size_row(ev), 1.0)
    jobs = min(ev[_NJ], lim.hi[_NJ])
    depth = min(ev[_QD], lim.hi[_QD])
    depth = min(depth, max(float(math.floor(lim.max_outstanding / jobs)), 1.0))
    ev[_NJ], ev[_QD] = jobs, depth
    load = row[_QD] * row[_NJ] / (depth * jobs)
    far = max(load, size)
    for v, lo, hi in zip(row, lim.lo, lim.hi, strict=True):
        if v > hi or v < lo:  # inside the range a field's factor is 1
            far = max(far, _field_factor(v, lo, hi))
    return RowStretch(ev, load, size, math.log(max(far, 1.0)))


def _field_factors(w: np.ndarray, limits: PhysicsLimits) -> np.ndarray:
    """Per row and field, how many times beyond the measured range (1 inside)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        above = np.where(w > limits.hi, w / np.maximum(limits.hi, 1e-12), 1.0)
        below = np.where(w < limits.lo, limits.lo / np.maximum(w, 1e-12), 1.0)
    # a ratio field (0..1) that was constant in training: distance, not a ratio, says how far
    return np.maximum(np.maximum(above, below), 1.0)


def _field_factor(v: float, lo: float, hi: float) -> float:
    """:func:`_field_factors` of one field of one workload."""
    above = v / max(hi, 1e-12) if v > hi else 1.0
    below = lo / max(v, 1e-12) if v < lo else 1.0
    return max(above, below, 1.0)


def extrapolation(w: np.ndarray, limits: PhysicsLimits | None) -> list[dict[str, float]]:
    """Per workload, ``{field: factor}`` for each field outside the measured range.

    The factor is how many times above the largest (or below the smallest) measured value;
    ``outstanding_io`` is listed when queue depth x numjobs exceeds what was measured,
    even where each field alone was measured.  Ratio fields measured at 0 only count as
    ``1 + distance``.
    """
    if limits is None:
        return [{} for _ in range(len(w))]
    factors = _field_factors(w, limits)
    for i in FRACTION_COLUMNS:
        gap = np.maximum(w[:, i] - limits.hi[i], limits.lo[i] - w[:, i])
        factors[:, i] = np.where(gap > 1e-9, 1.0 + gap, 1.0)
    load = outstanding_io(w) / limits.max_outstanding
    out: list[dict[str, float]] = []
    for r in range(len(w)):
        row = {WORKLOAD_FIELDS[i]: round(float(f), 4) for i, f in enumerate(factors[r]) if f > 1.0 + 1e-9}
        if load[r] > 1.0 + 1e-9:
            row["outstanding_io"] = round(float(load[r]), 4)
        out.append(row)
    return out


def extrapolation_row(row: Sequence[float], lim: RowLimits | None) -> dict[str, float]:
    """:func:`extrapolation` of one workload (a list of the fields)."""
    if lim is None:
        return {}
    out: dict[str, float] = {}
    for i, (v, lo, hi) in enumerate(zip(row, lim.lo, lim.hi, strict=True)):
        if i in FRACTION_COLUMNS:
            gap = max(v - hi, lo - v)
            f = 1.0 + gap if gap > 1e-9 else 1.0
        else:
            f = _field_factor(v, lo, hi)
        if f > 1.0 + 1e-9:
            out[WORKLOAD_FIELDS[i]] = round(f, 4)
    load = row[_QD] * row[_NJ] / lim.max_outstanding
    if load > 1.0 + 1e-9:
        out["outstanding_io"] = round(load, 4)
    return out


def widen(q: Any, distance: Any) -> Any:
    """The interval half-width ``q`` (log scale) at ``distance`` e-folds outside the range.

    Arrays on the matrix path, floats on the single-row path.
    """
    return q + INTERVAL_GROWTH * distance
