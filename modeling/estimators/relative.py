"""Relative fitness (Mesnier et al., 2007): a new device as a reference device's model, corrected.

:class:`RelativeFitnessModel` predicts ``ref(x) * exp(c(x))``: ``ref`` is the reference
device's fitted model of the metric, a fixed function of the workload features (it is not
refitted), and ``c`` is a learned model of the log-ratio new/reference.  With a handful of
measurements of the new device only a heavily regularised correction can be learned, so
``c`` is, in increasing freedom, a constant log-ratio, a ridge line on the features, or
that line plus a shallow tree on what it leaves; ``correction="auto"`` picks the one with
the least leave-one-out relative error on the new device's points.

The reference is held in a :class:`ReferenceFunction` -- deliberately not an estimator,
so scikit-learn's ``clone`` copies it as a fixed function instead of resetting it.  The
model's features are the ``extended`` set; a reference member trained on ``basic``
features reads its first columns (``basic`` is a prefix of ``extended``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.validation import validate_data

from modeling.estimators.base import FastPredictor, RegressorBase, ridge
from modeling.features import FEATURE_NAMES

CORRECTIONS = ("constant", "linear", "tree")
"""The corrections ``auto`` chooses between, least free first (ties go to the simpler one)."""

_FLOOR = 1e-12


@dataclass
class ReferenceFunction:
    """A reference device's fitted model of one metric: blended members, times ``scale``."""

    members: list[tuple[str, RegressorBase]]
    weights: list[float] | None = None
    scale: float = 1.0
    device: str = ""
    version: str = ""

    def log_predict(self, X32: np.ndarray) -> np.ndarray:
        """Log of the reference prediction from ``extended`` features."""
        weights = self.weights or [1.0 / len(self.members)] * len(self.members)
        total = np.zeros(X32.shape[0])
        for (feature_set, est), weight in zip(self.members, weights, strict=True):
            cols = np.ascontiguousarray(X32[:, : len(FEATURE_NAMES[feature_set])])
            total += weight * np.log(np.maximum(est.predict_fast(cols), _FLOOR))
        return total + np.log(self.scale)


class RelativeFitnessModel(FastPredictor):
    """``reference(x) x exp(correction(x))``, the correction learned from few points."""

    kind = "relative"

    def __init__(
        self,
        reference: ReferenceFunction | None = None,
        correction: str = "auto",
        alpha: float = 1.0,
        max_depth: int = 2,
    ) -> None:
        self.reference = reference
        self.correction = correction
        self.alpha = alpha
        self.max_depth = max_depth

    def fit(self, X: Any, y: Any) -> RelativeFitnessModel:
        """Learn the log-ratio of ``y`` to the reference's prediction; returns ``self``."""
        if self.reference is None:
            raise ValueError("RelativeFitnessModel needs a reference function")
        if self.correction not in CORRECTIONS + ("auto",):
            raise ValueError(f"unknown correction {self.correction!r}; use auto or one of {CORRECTIONS}")
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        ratio = np.log(np.maximum(y.astype(np.float64), _FLOOR)) - self.reference.log_predict(X32)
        self.reference_ = self.reference
        self.cv_mre_: dict[str, float] = {}
        kind, alpha = self.correction, float(self.alpha)
        if kind == "auto":
            # least free first: a tie (within rounding) keeps the simpler correction
            alphas = (alpha, alpha / 10, alpha / 100)
            grid = [("constant", alpha)] + [(k, a) for k in CORRECTIONS[1:] for a in alphas]
            errs = [_loo_mre(X32, ratio, k, a, self.max_depth) for k, a in grid]
            self.cv_mre_ = {f"{k} alpha={a:g}": e for (k, a), e in zip(grid, errs, strict=True)}
            kind, alpha = grid[int(np.argmin(np.round(errs, 4)))]
        self.chosen_, self.alpha_ = kind, alpha
        self._set_correction(*_fit_correction(X32, ratio, kind, alpha, self.max_depth))
        return self

    def _set_correction(
        self, parts: tuple[np.ndarray, np.ndarray, np.ndarray, float], tree: Any
    ) -> None:
        self.x_mean_, self.x_scale_, self.coef_, self.intercept_ = parts
        self.n_features_in_ = len(self.coef_)
        self.correction_tree_ = tree

    def predict_fast(self, X32: np.ndarray) -> np.ndarray:
        """Predict from an already validated C-contiguous float32 matrix (no checks)."""
        return np.exp(self.reference_.log_predict(X32) + _correction(self, X32))


def _correction(est: Any, X32: np.ndarray) -> np.ndarray:
    z = ((X32 - est.x_mean_) / est.x_scale_) @ est.coef_ + est.intercept_
    if est.correction_tree_ is not None:
        z = z + est.correction_tree_.predict(np.ascontiguousarray(X32, dtype=np.float32)).reshape(-1)
    return np.asarray(z, dtype=np.float64)


def _fit_correction(
    X32: np.ndarray, ratio: np.ndarray, kind: str, alpha: float, max_depth: int
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, float], Any]:
    """(mean, scale, coef, intercept) of the linear part, and the tree (or None)."""
    d = X32.shape[1]
    if kind == "constant" or len(ratio) < 3:
        return (np.zeros(d), np.ones(d), np.zeros(d), float(np.mean(ratio))), None
    # alpha scales with the row count in ridge: a strong pull to the constant at any K
    parts = ridge(X32.astype(np.float64), ratio, alpha=alpha)
    if kind == "linear":
        return parts, None
    mean, scale, coef, intercept = parts
    left = ratio - (((X32 - mean) / scale) @ coef + intercept)
    leaf = max(2, len(ratio) // 4)
    tree = DecisionTreeRegressor(max_depth=max_depth, min_samples_leaf=leaf, random_state=0)
    return parts, tree.fit(X32, left).tree_


def _loo_mre(X32: np.ndarray, ratio: np.ndarray, kind: str, alpha: float, max_depth: int) -> float:
    """Leave-one-out (or 10-fold beyond 40 points) relative error of one correction."""
    n = len(ratio)
    folds = np.arange(n) % 10 if n > 40 else np.arange(n)
    errors = np.empty(n)
    for f in np.unique(folds):
        test = folds == f
        parts, tree = _fit_correction(X32[~test], ratio[~test], kind, alpha, max_depth)
        probe = _Probe(parts, tree)
        errors[test] = np.abs(np.expm1(_correction(probe, X32[test]) - ratio[test]))
    return float(np.mean(errors))


class _Probe:
    """The fitted-correction attributes :func:`_correction` reads, for a fold's fit."""

    def __init__(self, parts: tuple[np.ndarray, np.ndarray, np.ndarray, float], tree: Any) -> None:
        self.x_mean_, self.x_scale_, self.coef_, self.intercept_ = parts
        self.correction_tree_ = tree


def reference_function(
    members: Sequence[tuple[str, RegressorBase]], weights: list[float] | None, scale: float,
    device: str = "", version: str = "",
) -> ReferenceFunction:
    """A :class:`ReferenceFunction` of a scope's members (copied list, shared fitted estimators)."""
    return ReferenceFunction(list(members), weights, float(scale), device, version)
