"""Compile a fitted tree model into a lookup table, for microsecond predictions.

A tree ensemble is piecewise constant: its output only changes where some tree splits.
Device sweeps measure few distinct levels per dimension, so the split thresholds of all
trees together cut the feature space into a small grid of cells (a few thousand on the
fio-plot data).  Evaluating the model once on one point inside each cell gives a table;
predicting is then one ``searchsorted`` per feature and one lookup, independent of the
number and depth of the trees (XGBoost with 600 deep trees costs ~0.1 s per 10k rows; the
table costs ~1 ms).  A linear base term is continuous, so it is added outside the table.

Split semantics differ: scikit-learn goes left when ``x <= t``, XGBoost when ``x < t``;
each table remembers which rule it follows.  Every compiled table is checked against the
model itself on sample points, and a model whose grid would be too large is not compiled
(:func:`compile_estimator` returns ``None`` and prediction uses the model directly).
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from typing import Any, Literal

import numpy as np

from modeling.estimators.base import RegressorBase, inverse_target

MAX_CELLS = 1 << 16
SMALL_ROWS = 8
"""Rows up to which a plain-Python search beats numpy's per-call cost (one workload's ladder)."""


class CompiledEstimator:
    """A lookup-table version of a fitted estimator with the same ``predict_fast``."""

    def __init__(
        self,
        est: RegressorBase,
        thresholds: list[np.ndarray],
        side: Literal["left", "right"],
        table: np.ndarray,
    ) -> None:
        self.est = est
        self.used = [i for i, th in enumerate(thresholds) if len(th)]
        self.thresholds = [thresholds[i] for i in self.used]
        self.side = side
        self.table = table
        sizes = [len(th) + 1 for th in self.thresholds]
        self.strides = (
            np.cumprod([1] + sizes[::-1])[:-1][::-1].astype(np.int64) if sizes else np.array([], np.int64)
        )
        # the same search in plain Python, for one row (bisect_left is searchsorted's "left")
        bisect = bisect_left if side == "left" else bisect_right
        self._scalar = [
            (th.tolist(), col, int(stride), bisect)
            for th, col, stride in zip(self.thresholds, self.used, self.strides, strict=True)
        ]

    def cell_index(self, X32: np.ndarray) -> np.ndarray:
        """Flat table index of each row."""
        if X32.shape[0] <= SMALL_ROWS:  # a workload, or the few rows of its load ladder
            cells = []
            for row in X32.tolist():  # float32 values, exactly, as Python floats
                i = 0
                for th, col, stride, find in self._scalar:  # a plain loop: a third cheaper than sum(genexpr)
                    i += find(th, row[col]) * stride
                cells.append(i)
            return np.array(cells, dtype=np.int64)
        idx = np.zeros(X32.shape[0], dtype=np.int64)
        for th, col, stride in zip(self.thresholds, self.used, self.strides, strict=True):
            idx += np.searchsorted(th, X32[:, col].astype(np.float64), side=self.side) * stride
        return idx

    def predict_fast(self, X32: np.ndarray) -> np.ndarray:
        """Same output as the estimator's ``predict_fast``."""
        z = self.table[self.cell_index(X32)]
        if self.est.linear_base:
            z = z + self.est.linear_part(X32)
        return inverse_target(z) if self.est.log_target else z


def _sklearn_thresholds(trees: list[Any], n_features: int) -> list[np.ndarray]:
    out: list[set[float]] = [set() for _ in range(n_features)]
    for tree in trees:
        inner = tree.feature >= 0
        for f, t in zip(tree.feature[inner], tree.threshold[inner], strict=True):
            out[int(f)].add(float(t))
    return [np.array(sorted(s), dtype=np.float64) for s in out]


def _xgboost_thresholds(booster: Any, n_features: int) -> list[np.ndarray]:
    model = json.loads(bytes(booster.save_raw("json")))
    out: list[set[float]] = [set() for _ in range(n_features)]
    for tree in model["learner"]["gradient_booster"]["model"]["trees"]:
        left = tree["left_children"]
        for node, f in enumerate(tree["split_indices"]):
            if left[node] != -1:
                # XGBoost compares in float32: keep the exact float32 value
                out[int(f)].add(float(np.float32(tree["split_conditions"][node])))
    return [np.array(sorted(s), dtype=np.float64) for s in out]


def _representatives(th: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
    """One float32 point inside each cell of a sorted threshold list."""
    if side == "right":  # x < t goes left: cell k is [t[k-1], t[k])
        reps = np.concatenate([[th[0] - 1.0], th])
        return reps.astype(np.float32)
    # x <= t goes left: cell k is (t[k-1], t[k]]; the largest float32 not above t[k] is inside
    inner = th.astype(np.float32)
    too_big = inner.astype(np.float64) > th
    inner[too_big] = np.nextafter(inner[too_big], np.float32(-np.inf))
    return np.concatenate([inner, [np.float32(th[-1] + 1.0)]]).astype(np.float32)


def compile_estimator(
    est: RegressorBase, *, check_rows: np.ndarray | None = None
) -> CompiledEstimator | None:
    """A lookup table equivalent to ``est``, or ``None`` when its grid is too large."""
    d = int(est.n_features_in_)
    side: Literal["left", "right"]
    if hasattr(est, "parts_"):
        # a composite: tabulate its tree parts; the composite itself keeps predicting
        est.runners_ = {key: compile_estimator(part) or part for key, part in est.parts_.items()}
        return None
    if not hasattr(est, "booster_") and not hasattr(est, "trees_"):
        return None  # not piecewise constant (a Gaussian process): nothing to tabulate
    if hasattr(est, "booster_"):
        thresholds, side = _xgboost_thresholds(est.booster_, d), "right"
    else:
        thresholds, side = _sklearn_thresholds(est.trees_, d), "left"
    sizes = [len(th) + 1 for th in thresholds if len(th)]
    if int(np.prod(sizes, dtype=np.float64)) > MAX_CELLS:
        return None
    reps = [_representatives(th, side) for th in thresholds if len(th)]
    used = [i for i, th in enumerate(thresholds) if len(th)]
    grid = np.zeros((int(np.prod(sizes)) if sizes else 1, d), dtype=np.float32)
    if sizes:
        mesh = np.meshgrid(*reps, indexing="ij")
        for col, m in zip(used, mesh, strict=True):
            grid[:, col] = m.ravel()
    table = np.asarray(est.predict_core(np.ascontiguousarray(grid)), dtype=np.float64)
    compiled = CompiledEstimator(est, thresholds, side, table)
    sample = np.vstack([grid[:2000], _probe_rows(thresholds, d)])
    if check_rows is not None:
        sample = np.vstack([sample, check_rows.astype(np.float32)])
    sample = np.ascontiguousarray(sample, dtype=np.float32)
    if not np.allclose(compiled.predict_fast(sample), est.predict_fast(sample), rtol=1e-6, atol=1e-9):
        return None  # never trade correctness for speed
    return compiled


def _probe_rows(thresholds: list[np.ndarray], d: int, n: int = 512) -> np.ndarray:
    """Check points: exactly on thresholds (where split rules differ) and in between."""
    rng = np.random.default_rng(0)
    rows = np.zeros((n, d), dtype=np.float32)
    for col, th in enumerate(thresholds):
        if not len(th):
            continue
        on = rng.choice(th, n).astype(np.float32)
        between = rng.uniform(th[0] - 1.0, th[-1] + 1.0, n).astype(np.float32)
        rows[:, col] = np.where(rng.random(n) < 0.5, on, between)
    return rows
