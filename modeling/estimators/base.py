"""The shared base of every per-device regressor: target transform, linear base, fast path.

Two options every estimator has:

* ``log_target`` -- learn ``sign(y) log(1 + |y|)`` instead of ``y``.  Performance
  metrics span orders of magnitude and the error that matters is relative, so on a log
  scale a squared loss is (almost) a relative loss.
* ``linear_base`` -- first fit a ridge line on the features, then let the learner fit
  what it leaves.  Trees are piecewise constant and cannot interpolate a trend between
  swept points (IOPS growing with outstanding I/O, latency with request size); a linear
  term in log space carries those power laws and the trees fix the curvature.

Subclasses implement ``_fit_core`` / ``predict_core`` on the (transformed, de-trended)
target.  After ``fit`` every learned part is a plain array or a library model with a safe
export, so :mod:`modeling.estimators.serialize` can store it without pickle, and ``predict_fast``
skips scikit-learn's input validation on the serving path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data


def forward_target(y: np.ndarray) -> np.ndarray:
    """The symmetric log transform ``sign(y) log1p(|y|)``."""
    return np.sign(y) * np.log1p(np.abs(y))


def inverse_target(z: np.ndarray) -> np.ndarray:
    """Inverse of :func:`forward_target`."""
    return np.sign(z) * np.expm1(np.abs(z))


class FastPredictor(RegressorMixin, BaseEstimator):
    """``predict`` = scikit-learn's checks, then ``predict_fast`` (what serving calls directly)."""

    def prepare(self) -> None:
        """Build the derived lookup structures of the fast path (after ``fit`` or loading)."""

    def predict(self, X: Any) -> np.ndarray:
        """Predict the metric for each row of ``X``."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.predict_fast(np.ascontiguousarray(X, dtype=np.float32))

    def predict_fast(self, X32: np.ndarray) -> np.ndarray:
        """Predict from an already validated C-contiguous float32 matrix (no checks)."""
        raise NotImplementedError


class RegressorBase(FastPredictor):
    """Shared fit/predict logic: target transform, linear base, fast prediction."""

    kind = "base"
    log_target: bool
    linear_base: bool

    def fit(self, X: Any, y: Any) -> RegressorBase:
        """Fit on a numeric feature matrix ``X`` and target ``y``; returns ``self``."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        y = y.astype(np.float64)
        target = forward_target(y) if self.log_target else y
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        if self.linear_base:
            self.x_mean_, self.x_scale_, self.coef_, self.intercept_ = ridge(X32.astype(np.float64), target)
        else:
            d = X.shape[1]
            self.x_mean_, self.x_scale_ = np.zeros(d), np.ones(d)
            self.coef_, self.intercept_ = np.zeros(d), 0.0
        resid = target - self.linear_part(X32)
        self._fit_core(X32, resid, self._sample_weight(y))
        self.prepare()
        return self

    def predict_fast(self, X32: np.ndarray) -> np.ndarray:
        """Predict from an already validated C-contiguous float32 matrix (no checks)."""
        z = self.linear_part(X32) + self.predict_core(X32)
        return inverse_target(z) if self.log_target else z

    def linear_part(self, X32: np.ndarray) -> np.ndarray:
        """The linear base's value at each row (the intercept alone without ``linear_base``)."""
        if not self.linear_base:
            return np.full(X32.shape[0], float(self.intercept_))
        return ((X32 - self.x_mean_) / self.x_scale_) @ self.coef_ + self.intercept_

    def _sample_weight(self, y: np.ndarray) -> np.ndarray | None:
        """Per-row weights of the loss (None: all equal)."""
        return None

    def _fit_core(self, X32: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> None:
        raise NotImplementedError

    def predict_core(self, X32: np.ndarray) -> np.ndarray:
        """The learner's part of the (transformed) prediction, added to :meth:`linear_part`."""
        raise NotImplementedError


def ridge(
    X: np.ndarray, y: np.ndarray, alpha: float = 1e-3
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature gets a zero coefficient anyway
    Z = (X - mean) / scale
    intercept = float(y.mean())
    gram = Z.T @ Z + alpha * len(y) * np.eye(Z.shape[1])
    coef = np.linalg.solve(gram, Z.T @ (y - intercept))
    return mean, scale, coef, intercept
