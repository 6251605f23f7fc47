"""Measurement quality: preconditioning, steady state and the spread between repeats.

Following SNIA's PTS: a device is preconditioned by writing it sequentially (twice by
default), and a point is measured until steady state -- within a window of 5 rounds the
range (max - min) of the metric is at most 20 % of the window mean and the change along
the best-fit line across the window is at most 10 % of the mean; at most 25 rounds.
fio's own ``steadystate`` option is the cheaper alternative (one fio run per point).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collectors.fio.jobs import JobSettings, build_fill_job
from collectors.fio.runner import run_fio
from modeling.workload import METRICS

STEADY_RULES = ("fio", "pts")
FIO_STEADY_CRITERION = "iops:20%"
"""fio's ``steadystate`` criterion for ``--steady-state-rule fio``: IOPS within 20 % of the mean."""


@dataclass(frozen=True)
class SteadyStateRule:
    """The PTS steady-state rule: window, range and slope limits, round cap."""

    window: int = 5
    max_range: float = 0.20
    max_slope: float = 0.10
    max_rounds: int = 25
    metric: str = "iops"


def is_steady(values: Sequence[float], rule: SteadyStateRule = SteadyStateRule()) -> bool:
    """Whether the last ``rule.window`` values satisfy the PTS range and slope limits."""
    if len(values) < rule.window:
        return False
    window = np.asarray(values[-rule.window:], dtype=float)
    mean = float(window.mean())
    if not math.isfinite(mean) or mean <= 0:
        return False
    if float(window.max() - window.min()) > rule.max_range * mean:
        return False
    slope = float(np.polyfit(np.arange(len(window)), window, 1)[0])
    # the best-fit line's excursion across the window, as PTS states it
    return abs(slope) * (len(window) - 1) <= rule.max_slope * mean


def run_until_steady(run_round: Callable[[], tuple[dict[str, Any], str]],
                     rule: SteadyStateRule = SteadyStateRule()) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Run rounds of one point until the PTS rule holds; return the last round and a summary."""
    values: list[float] = []
    row: dict[str, Any] = {}
    raw = ""
    for _ in range(rule.max_rounds):
        row, raw = run_round()
        values.append(float(row.get(rule.metric, float("nan"))))
        if is_steady(values, rule):
            break
    attained = is_steady(values, rule)
    window = values[-rule.window:]
    summary = {
        "steady_state_rule": "pts",
        "steady_state_rounds": len(values),
        "steady_state_attained": attained,
        f"steady_state_{rule.metric}_window_mean": float(np.mean(window)),
    }
    return row, raw, summary


def fio_steady_fields(fio_json: Mapping[str, Any]) -> dict[str, Any]:
    """The steady-state outcome fio reports for a job that used ``steadystate``."""
    jobs = fio_json.get("jobs") or fio_json.get("client_stats") or []
    for job in jobs:
        ss = job.get("steadystate") if isinstance(job, dict) else None
        if isinstance(ss, dict):
            return {
                "steady_state_rule": "fio",
                "steady_state_criterion": ss.get("ss"),
                "steady_state_attained": bool(ss.get("attained")),
            }
    return {}


def precondition(settings: JobSettings, *, passes: int = 2, remote: str | None = None,
                 runner: Callable[..., str] = run_fio, timeout: float = 24 * 3600.0) -> dict[str, Any]:
    """Fill the target's span sequentially ``passes`` times (PTS "write the device twice")."""
    started = time.monotonic()
    runner(build_fill_job(settings, passes=passes), remote=remote, timeout=timeout)
    return {"passes": passes, "bytes": settings.size * passes,
            "seconds": round(time.monotonic() - started, 3)}


def coefficient_of_variation(values: Sequence[float]) -> float:
    """Sample standard deviation over mean; NaN for fewer than two finite values."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(arr) < 2 or arr.mean() == 0:
        return float("nan")
    return float(arr.std(ddof=1) / abs(arr.mean()))


def repeat_cv(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = METRICS) -> dict[str, float]:
    """Per-metric coefficient of variation between repeats of one point."""
    return {m: coefficient_of_variation([float(r.get(m, float("nan"))) for r in rows]) for m in metrics}


def spread_summary(per_point: Sequence[Mapping[str, float]], metrics: Sequence[str] = METRICS
                   ) -> dict[str, dict[str, float]]:
    """Mean, median and max of the per-point CVs, per metric (the sweep's noise floor)."""
    out: dict[str, dict[str, float]] = {}
    for m in metrics:
        vals = np.asarray([p[m] for p in per_point if m in p and math.isfinite(p[m])], dtype=float)
        if len(vals):
            out[m] = {"mean": float(vals.mean()), "median": float(np.median(vals)),
                      "max": float(vals.max()), "points": int(len(vals))}
    return out
