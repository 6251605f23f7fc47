"""Every per-device, per-metric estimator, by kind: the registry model files name them by.

All follow scikit-learn's estimator contract (``__init__`` stores parameters, ``fit``
validates and returns ``self``, learned attributes end in ``_``):

* ``cart``, ``extra_trees``, ``xgboost`` -- tree learners (:mod:`modeling.estimators.trees`);
* ``gp`` -- a Gaussian process for devices smooth in the workload
  (:mod:`modeling.estimators.gaussian_process`);
* ``load_gated`` -- two boosted models blended by the metric's elasticity to load
  (:mod:`modeling.estimators.load_gated`).
"""

from __future__ import annotations

from typing import Any

from modeling.estimators.base import RegressorBase
from modeling.estimators.gaussian_process import GaussianProcessModel
from modeling.estimators.load_gated import LoadGatedModel
from modeling.estimators.trees import LOSSES, CartRegressor, ExtraTreesModel, XGBoostModel

__all__ = [
    "ESTIMATORS",
    "LOSSES",
    "CartRegressor",
    "ExtraTreesModel",
    "GaussianProcessModel",
    "LoadGatedModel",
    "XGBoostModel",
    "make_estimator",
]

ESTIMATORS: dict[str, type[RegressorBase]] = {
    cls.kind: cls
    for cls in (CartRegressor, ExtraTreesModel, XGBoostModel, GaussianProcessModel, LoadGatedModel)
}
"""Estimator classes by kind, as named in model manifests."""


def make_estimator(kind: str, params: dict[str, Any]) -> RegressorBase:
    """A fresh (unfitted) estimator of ``kind`` with ``params``."""
    try:
        cls = ESTIMATORS[kind]
    except KeyError:
        raise ValueError(f"unknown estimator kind {kind!r}") from None
    return cls(**params)
