"""The tree learners: :class:`CartRegressor` (a single CART tree, the published method),
:class:`ExtraTreesModel` (a randomised tree ensemble) and :class:`XGBoostModel`
(gradient-boosted trees), with the options of
:class:`~modeling.estimators.base.RegressorBase` (``log_target``, ``linear_base``).

The tree learners also take ``loss``: ``"squared"`` (the usual) or ``"relative"``, which
fits the mean *relative* error directly -- absolute error weighted by ``1 / y``, whose
minimiser is a weighted median, with trees combined by their median.  Tail latencies jump
tenfold between neighbouring workloads (a slow mode crossing the 1 % line); a squared
loss chases those spikes, a relative loss does not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xgboost as xgb
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.tree import DecisionTreeRegressor

from modeling.estimators.base import RegressorBase
from modeling.estimators.packed_forest import SMALL_BATCH_LANES, ForestCells, PackedForest, tree_by_tree

LOSSES = ("squared", "relative")
CELL_MIN_ROWS = 512
"""Rows from which a forest is evaluated once per distinct cell (:class:`ForestCells`)."""


def _criterion(loss: str) -> str:
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    return "squared_error" if loss == "squared" else "absolute_error"


def _relative_weight(y: np.ndarray) -> np.ndarray:
    """``1 / |y|`` normalised to mean 1 (the weights that turn absolute into relative error)."""
    mag = np.abs(y)
    floor = max(float(mag.max()) * 1e-9, 1e-300) if len(mag) else 1.0
    w = 1.0 / np.maximum(mag, floor)
    return w / w.mean()


def _tree_predict(est: Any, X32: np.ndarray, median: bool = False) -> np.ndarray:
    """Mean (or median) over ``est.trees_`` of each tree's prediction."""
    trees = est.trees_
    combine = _median if median else _mean
    packed = getattr(est, "packed_", None)
    if packed is not None and X32.shape[0] * len(trees) <= SMALL_BATCH_LANES:
        return combine(packed.leaf_values(X32))
    cells = getattr(est, "cells_", None)
    if cells is not None and X32.shape[0] >= CELL_MIN_ROWS:
        found = cells.representatives(X32)
        if found is not None:  # one row per distinct cell, then copied to its rows
            first, inverse = found
            return _tree_predict(est, np.ascontiguousarray(X32[first]), median)[inverse]
    return tree_by_tree(trees, X32, combine)


def _mean(values: np.ndarray) -> np.ndarray:
    return values.mean(axis=0)  # type: ignore[no-any-return]


def _median(values: np.ndarray) -> np.ndarray:
    """Median over axis 0 (one partition instead of ``np.median``'s generic path).

    ``values`` is scratch: it is partitioned in place.
    """
    k = values.shape[0]
    if values.shape[1] == 1:  # one workload: a sort of plain floats beats any array call
        ordered = sorted(values[:, 0].tolist())
        return np.array([0.5 * (ordered[(k - 1) // 2] + ordered[k // 2])])
    mid = [(k - 1) // 2, k // 2]
    values.partition(mid, axis=0)
    return 0.5 * (values[mid[0]] + values[mid[1]])


class _LossTrees(RegressorBase):
    """A tree learner with ``loss``: the relative loss weights each row by ``1 / |y|``."""

    loss: str

    def _sample_weight(self, y: np.ndarray) -> np.ndarray | None:
        return _relative_weight(y) if self.loss == "relative" else None


class CartRegressor(_LossTrees):
    """One CART regression tree (scikit-learn ``DecisionTreeRegressor``)."""

    kind = "cart"

    def __init__(
        self,
        max_depth: int | None = None,
        min_samples_leaf: int = 1,
        loss: str = "squared",
        log_target: bool = True,
        linear_base: bool = False,
        random_state: int = 0,
    ) -> None:
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.loss = loss
        self.log_target = log_target
        self.linear_base = linear_base
        self.random_state = random_state

    def _fit_core(self, X32: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> None:
        model = DecisionTreeRegressor(
            criterion=_criterion(self.loss),
            max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf,
            random_state=self.random_state,
        ).fit(X32, target, sample_weight=weight)
        self.trees_ = [model.tree_]

    def predict_core(self, X32: np.ndarray) -> np.ndarray:
        return _tree_predict(self, X32)


class ExtraTreesModel(_LossTrees):
    """Extremely randomised trees (scikit-learn ``ExtraTreesRegressor``)."""

    kind = "extra_trees"

    def __init__(
        self,
        n_estimators: int = 100,
        max_features: float = 1.0,
        min_samples_leaf: int = 1,
        loss: str = "squared",
        log_target: bool = True,
        linear_base: bool = False,
        random_state: int = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.loss = loss
        self.log_target = log_target
        self.linear_base = linear_base
        self.random_state = random_state

    def prepare(self) -> None:
        """Pack the trees for fast small-batch prediction, and find their cells for large ones."""
        self.packed_ = PackedForest(self.trees_)
        self.cells_ = ForestCells(self.trees_)

    def _fit_core(self, X32: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> None:
        model = ExtraTreesRegressor(
            n_estimators=self.n_estimators,
            criterion=_criterion(self.loss),
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            random_state=self.random_state,
            n_jobs=1,
        ).fit(X32, target, sample_weight=weight)
        self.trees_ = [est.tree_ for est in model.estimators_]

    def predict_core(self, X32: np.ndarray) -> np.ndarray:
        # the median of weighted-median trees keeps the relative loss's robustness
        return _tree_predict(self, X32, median=self.loss == "relative")


# absolute error on the log scale fits the median ratio: robust to the wild outliers of
# tail latencies, where a squared loss chases single spikes
_OBJECTIVES = {"squared": "reg:squarederror", "absolute": "reg:absoluteerror"}


class XGBoostModel(RegressorBase):
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

    def _fit_core(self, X32: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> None:
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

    def predict_core(self, X32: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster_.inplace_predict(X32), dtype=np.float64)
