"""Per-device, per-metric regressors that follow scikit-learn's estimator contract.

Three tree learners -- :class:`CartRegressor` (a single CART tree, the published method),
:class:`ExtraTreesModel` (a randomised tree ensemble) and :class:`XGBoostModel`
(gradient-boosted trees) -- share two options:

* ``log_target`` -- learn ``sign(y) log(1 + |y|)`` instead of ``y``.  Performance
  metrics span orders of magnitude and the error that matters is relative, so on a log
  scale a squared loss is (almost) a relative loss.
* ``linear_base`` -- first fit a ridge line on the features, then let the trees learn
  what it leaves.  Trees are piecewise constant and cannot interpolate a trend between
  swept points (IOPS growing with outstanding I/O, latency with request size); a linear
  term in log space carries those power laws and the trees fix the curvature.

After ``fit`` the learned parts are plain arrays (``trees_``: scikit-learn ``Tree``
objects, or ``booster_``: an XGBoost booster) so that :mod:`modeling.serialize` can store
them without pickle and :meth:`predict_fast` can run without validation overhead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xgboost as xgb
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.validation import check_is_fitted, validate_data


def forward_target(y: np.ndarray) -> np.ndarray:
    """The symmetric log transform ``sign(y) log1p(|y|)``."""
    return np.sign(y) * np.log1p(np.abs(y))


def inverse_target(z: np.ndarray) -> np.ndarray:
    """Inverse of :func:`forward_target`."""
    return np.sign(z) * np.expm1(np.abs(z))


class _TreeRegressorBase(RegressorMixin, BaseEstimator):
    """Shared fit/predict logic: target transform, linear base, fast prediction."""

    kind = "base"
    log_target: bool
    linear_base: bool

    def fit(self, X: Any, y: Any) -> _TreeRegressorBase:
        """Fit on a numeric feature matrix ``X`` and target ``y``; returns ``self``."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        target = forward_target(y) if self.log_target else y.astype(np.float64)
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        if self.linear_base:
            self.x_mean_, self.x_scale_, self.coef_, self.intercept_ = _ridge(X32.astype(np.float64), target)
        else:
            d = X.shape[1]
            self.x_mean_, self.x_scale_ = np.zeros(d), np.ones(d)
            self.coef_, self.intercept_ = np.zeros(d), 0.0
        resid = target - self._linear(X32)
        self._fit_trees(X32, resid)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predict the metric for each row of ``X``."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.predict_fast(np.ascontiguousarray(X, dtype=np.float32))

    def predict_fast(self, X32: np.ndarray) -> np.ndarray:
        """Predict from an already validated C-contiguous float32 matrix (no checks)."""
        z = self._linear(X32) + self._predict_trees(X32)
        return inverse_target(z) if self.log_target else z

    def _linear(self, X32: np.ndarray) -> np.ndarray:
        if not self.linear_base:
            return np.full(X32.shape[0], float(self.intercept_))
        return ((X32 - self.x_mean_) / self.x_scale_) @ self.coef_ + self.intercept_

    def _fit_trees(self, X32: np.ndarray, target: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_trees(self, X32: np.ndarray) -> np.ndarray:
        raise NotImplementedError


def _ridge(
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


def _tree_predict(trees: list[Any], X32: np.ndarray) -> np.ndarray:
    total = np.zeros(X32.shape[0])
    for tree in trees:
        total += tree.predict(X32)[:, 0]
    return total / len(trees)


class CartRegressor(_TreeRegressorBase):
    """One CART regression tree (scikit-learn ``DecisionTreeRegressor``)."""

    kind = "cart"

    def __init__(
        self,
        max_depth: int | None = None,
        min_samples_leaf: int = 1,
        log_target: bool = True,
        linear_base: bool = False,
        random_state: int = 0,
    ) -> None:
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.log_target = log_target
        self.linear_base = linear_base
        self.random_state = random_state

    def _fit_trees(self, X32: np.ndarray, target: np.ndarray) -> None:
        model = DecisionTreeRegressor(
            max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf, random_state=self.random_state
        ).fit(X32, target)
        self.trees_ = [model.tree_]

    def _predict_trees(self, X32: np.ndarray) -> np.ndarray:
        return _tree_predict(self.trees_, X32)


class ExtraTreesModel(_TreeRegressorBase):
    """Extremely randomised trees (scikit-learn ``ExtraTreesRegressor``)."""

    kind = "extra_trees"

    def __init__(
        self,
        n_estimators: int = 100,
        max_features: float = 1.0,
        min_samples_leaf: int = 1,
        log_target: bool = True,
        linear_base: bool = False,
        random_state: int = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.log_target = log_target
        self.linear_base = linear_base
        self.random_state = random_state

    def _fit_trees(self, X32: np.ndarray, target: np.ndarray) -> None:
        model = ExtraTreesRegressor(
            n_estimators=self.n_estimators,
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            random_state=self.random_state,
            n_jobs=1,
        ).fit(X32, target)
        self.trees_ = [est.tree_ for est in model.estimators_]

    def _predict_trees(self, X32: np.ndarray) -> np.ndarray:
        return _tree_predict(self.trees_, X32)


# absolute error on the log scale fits the median ratio: robust to the wild outliers of
# tail latencies, where a squared loss chases single spikes
_OBJECTIVES = {"squared": "reg:squarederror", "absolute": "reg:absoluteerror"}


class XGBoostModel(_TreeRegressorBase):
    """Gradient-boosted trees (XGBoost, histogram method, one thread)."""

    kind = "xgboost"

    def __init__(
        self,
        n_estimators: int = 300,
        max_depth: int = 4,
        learning_rate: float = 0.1,
        min_child_weight: float = 1.0,
        subsample: float = 1.0,
        reg_lambda: float = 1.0,
        objective: str = "squared",
        log_target: bool = True,
        linear_base: bool = False,
        random_state: int = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.reg_lambda = reg_lambda
        self.objective = objective
        self.log_target = log_target
        self.linear_base = linear_base
        self.random_state = random_state

    def _fit_trees(self, X32: np.ndarray, target: np.ndarray) -> None:
        if self.n_estimators < 1:
            raise ValueError(f"n_estimators must be >= 1, got {self.n_estimators}")
        if self.objective not in _OBJECTIVES:
            raise ValueError(f"objective must be one of {sorted(_OBJECTIVES)}, got {self.objective!r}")
        params = {
            "max_depth": self.max_depth,
            "eta": self.learning_rate,
            "min_child_weight": self.min_child_weight,
            "subsample": self.subsample,
            "lambda": self.reg_lambda,
            "seed": self.random_state,
            "tree_method": "hist",
            "nthread": 1,
            "objective": _OBJECTIVES[self.objective],
            # start from the centre: the default base score estimate is not what we want
            "base_score": float(np.mean(target) if self.objective == "squared" else np.median(target)),
        }
        dtrain = xgb.DMatrix(X32, label=target, nthread=1)
        self.booster_ = xgb.train(params, dtrain, num_boost_round=self.n_estimators)

    def _predict_trees(self, X32: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster_.inplace_predict(X32), dtype=np.float64)


ESTIMATORS: dict[str, type[_TreeRegressorBase]] = {
    cls.kind: cls for cls in (CartRegressor, ExtraTreesModel, XGBoostModel)
}
"""Estimator classes by kind, as named in model manifests."""


def make_estimator(kind: str, params: dict[str, Any]) -> _TreeRegressorBase:
    """A fresh (unfitted) estimator of ``kind`` with ``params``."""
    try:
        cls = ESTIMATORS[kind]
    except KeyError:
        raise ValueError(f"unknown estimator kind {kind!r}") from None
    return cls(**params)
