"""Adaptive sampling: propose the next workloads to measure where the model is least sure.

Uncertainty is the spread (on the log scale) of a bootstrap forest's trees at each
candidate.  Points are chosen greedily, each time down-weighting candidates close to
what is already measured or chosen, so one uncertain corner does not take the whole
budget.  With too few measurements for a model, the choice is purely space-filling
(farthest point first).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor

from modeling.errors import InvalidInput
from modeling.features import compute_features
from modeling.workload_matrix import workload_matrix
from modeling.workload import METRICS, WORKLOAD_FIELDS, Workload

MIN_MODEL_ROWS = 8


def _scaled(X: np.ndarray, lo: np.ndarray, span: np.ndarray) -> np.ndarray:
    return (X - lo) / span


def propose_points(
    measurements: pd.DataFrame, candidates: list[Workload], n: int, metric: str = "iops"
) -> list[Workload]:
    """The ``n`` candidates (in choice order) where a model of ``metric`` is least certain."""
    if metric not in METRICS:
        raise InvalidInput(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    if n < 1 or not candidates:
        return []
    n = min(n, len(candidates))
    cand_w = np.array([[float(getattr(c, f)) for f in WORKLOAD_FIELDS] for c in candidates])
    Xc = compute_features(cand_w, "extended").astype(np.float64)
    usable = pd.DataFrame()
    if measurements is not None and len(measurements) and metric in measurements.columns:
        y_all = pd.to_numeric(measurements[metric], errors="coerce")
        usable = measurements.loc[np.isfinite(y_all) & (y_all > 0)]
    if len(usable):
        Xm = compute_features(workload_matrix(usable), "extended").astype(np.float64)
    else:
        Xm = np.empty((0, Xc.shape[1]))
    both = np.vstack([Xc, Xm])
    lo = both.min(axis=0)
    span = np.where(both.max(axis=0) > lo, both.max(axis=0) - lo, 1.0)
    Zc, Zm = _scaled(Xc, lo, span), _scaled(Xm, lo, span)
    if len(usable) >= MIN_MODEL_ROWS:
        y = np.log(usable[metric].to_numpy(dtype=np.float64))
        forest = RandomForestRegressor(n_estimators=50, min_samples_leaf=2, random_state=0, n_jobs=1).fit(
            Xm, y
        )
        per_tree = np.stack([t.predict(Xc) for t in forest.estimators_])
        uncertainty = per_tree.std(axis=0) + 1e-6
    else:
        uncertainty = np.ones(len(candidates))
    # distance of each candidate to the nearest measured (later: or chosen) point
    if len(Zm):
        dist = np.min(np.linalg.norm(Zc[:, None, :] - Zm[None, :, :], axis=2), axis=1)
    else:
        dist = np.full(len(candidates), np.inf)
    chosen: list[int] = []
    available = np.ones(len(candidates), dtype=bool)
    for _ in range(n):
        finite = np.where(np.isfinite(dist), dist, 1.0)
        score = (
            uncertainty * finite if len(usable) >= MIN_MODEL_ROWS else np.where(np.isfinite(dist), dist, 1.0)
        )
        score = np.where(available, score, -np.inf)
        best = int(np.argmax(score))
        chosen.append(best)
        available[best] = False
        dist = np.minimum(np.where(np.isfinite(dist), dist, np.inf), np.linalg.norm(Zc - Zc[best], axis=1))
    return [candidates[i] for i in chosen]


def propose_transfer_points(
    reference_log_pred: np.ndarray, candidates: list[Workload], n: int
) -> list[Workload]:
    """The ``n`` candidates that best calibrate a transfer from a reference model.

    A relative-fitness correction is a function of the workload and of where the
    reference puts it, so the points are spread (farthest point first) in the workload
    features plus the reference's predicted log value, given double weight so the
    reference's whole predicted range is covered before any corner of the feature space
    gets a second point.  ``reference_log_pred`` is the reference's log prediction at each
    candidate.
    """
    if n < 1 or not candidates:
        return []
    if len(reference_log_pred) != len(candidates):
        raise InvalidInput("one reference prediction per candidate is needed")
    n = min(n, len(candidates))
    cand_w = np.array([[float(getattr(c, f)) for f in WORKLOAD_FIELDS] for c in candidates])
    Z = np.column_stack([compute_features(cand_w, "extended").astype(np.float64), reference_log_pred])
    lo, span = Z.min(axis=0), np.ptp(Z, axis=0)
    Z = _scaled(Z, lo, np.where(span > 0, span, 1.0))
    Z[:, -1] *= 2.0
    # start from the lowest predicted value, so the choice is deterministic
    chosen = [int(np.argmin(Z[:, -1]))]
    dist = np.linalg.norm(Z - Z[chosen[0]], axis=1)
    while len(chosen) < n:
        best = int(np.argmax(dist))
        chosen.append(best)
        dist = np.minimum(dist, np.linalg.norm(Z - Z[best], axis=1))
    return [candidates[i] for i in chosen]
