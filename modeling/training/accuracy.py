"""Accuracy figures shared by training and evaluation: error summaries and the noise floor.

Training stores, with every model version, the errors of its own cross-validation
(:func:`oof_evaluation`); ``ssdpredict evaluate`` computes the same figures from a nested
cross-validation (:mod:`modeling.training.evaluate`).  Both use these functions, so a
number means the same thing wherever it is shown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from modeling.training.selection import relative_errors, workload_groups
from modeling.workload import METRICS
from modeling.workload_matrix import workload_matrix


def error_summary(pred: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """MRE, median and p90 relative error, R² and n of predictions against truth."""
    re = relative_errors(pred, y)
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return {
        "mre": float(re.mean()),
        "n": int(len(y)),
        "median_re": float(np.median(re)),
        "p90_re": float(np.percentile(re, 90)),
        "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
    }


def noise_floor(frame: pd.DataFrame) -> dict[str, Any] | None:
    """Run-to-run spread of repeated workloads: mean CV and mean relative deviation per metric."""
    w = workload_matrix(frame)
    groups = workload_groups(w)
    counts = np.bincount(groups)
    repeated = counts[groups] >= 2
    if not repeated.any():
        return None
    out: dict[str, Any] = {"n_workloads": int((counts >= 2).sum()), "n_rows": int(repeated.sum())}
    # the metrics the data has (training trains only those): measured, finite and > 0 in every run
    metrics = [m for m in METRICS if m in frame.columns]
    sub = frame.loc[repeated, metrics].apply(pd.to_numeric, errors="coerce").astype(float)
    metrics = [m for m in metrics if bool((np.isfinite(sub[m]) & (sub[m] > 0)).all())]
    sub = sub.assign(_g=groups[repeated])
    for metric in metrics:
        g = sub.groupby("_g")[metric]
        cv = (g.std(ddof=1) / g.mean()).mean()
        dev = (np.abs(sub[metric] - g.transform("mean")) / sub[metric]).mean()
        # what even a perfect model of each workload's typical value scores against single runs
        floor = (np.abs(sub[metric] - g.transform("median")) / sub[metric]).mean()
        out[metric] = {"cv": float(cv), "mre_vs_mean": float(dev), "mre_vs_median": float(floor)}
    return out


def oof_evaluation(
    oof: dict[str, np.ndarray], ys: dict[str, np.ndarray], *, folds: int, runs: pd.DataFrame
) -> dict[str, Any]:
    """The evaluation stored with a model version: its out-of-fold errors, per metric.

    ``oof`` are the out-of-fold predictions of each metric as the version serves it
    (``auto``: the region models where they won), one per distinct workload, and ``ys``
    the workloads' (median) measurements.  These are the errors of the configuration
    training chose; the choice saw the same folds, so they lean optimistic, by little
    for a handful of candidates -- ``ssdpredict evaluate`` gives the nested estimate.
    """
    n = len(next(iter(ys.values())))
    return {
        "method": (
            f"out-of-fold errors of the chosen models in training's {folds}-fold cross-validation "
            f"over {n} workloads"
        ),
        "folds": folds,
        "metrics": {m: error_summary(oof[m], ys[m]) for m in METRICS if m in oof},
        "noise_floor": noise_floor(runs),
    }
