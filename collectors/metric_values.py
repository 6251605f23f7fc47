"""The one rule for a measured metric value, shared by every import path (CSV and fio JSON).

A value is a finite number below :data:`MAX_METRIC`; the four main metrics
(:data:`~modeling.workload.METRICS`) must be > 0, every other metric (per direction,
percentiles) >= 0: a direction that did no I/O legitimately has zero IOPS and bandwidth.
``NaN`` is never a value; the parsers use it (or leave the cell out) for "not measured".
"""

from __future__ import annotations

import math

import numpy as np

from modeling.workload import METRICS

MAX_METRIC = 1e15
"""Above any real IOPS, MiB/s or microseconds (31 years); larger values overflow sums."""

PERCENTILE_METRICS = ("latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p99_9_us")
EXTRA_METRICS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [m for m in PERCENTILE_METRICS if m not in METRICS]
        + [f"{d}_{m}" for d in ("read", "write") for m in (*METRICS, *PERCENTILE_METRICS)]
    )
)
"""Further metric columns accepted (and stored) besides :data:`METRICS`."""

_MAIN = frozenset(METRICS)


def valid_metric_mask(name: str, values: np.ndarray) -> np.ndarray:
    """Which of ``values`` (float64) are valid for metric ``name``; NaN counts as invalid."""
    with np.errstate(invalid="ignore"):
        low_ok = values > 0 if name in _MAIN else values >= 0
        return low_ok & (values < MAX_METRIC)


def check_metric(name: str, value: float) -> float:
    """``value`` when it is a valid value of metric ``name``; otherwise ``ValueError`` saying why."""
    if valid_metric_mask(name, np.array([value], dtype=np.float64))[0]:
        return value
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    if value >= MAX_METRIC:
        raise ValueError(f"{value:g} is not a plausible measurement (limit {MAX_METRIC:g})")
    raise ValueError(f"must be {'> 0' if name in _MAIN else '>= 0'}, got {value:g}")


__all__ = ["EXTRA_METRICS", "MAX_METRIC", "PERCENTILE_METRICS", "check_metric", "valid_metric_mask"]
