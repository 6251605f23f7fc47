"""Safe (pickle-free) export and import of fitted estimators.

scikit-learn trees are exported as their node arrays in JSON (children, split feature,
threshold, leaf value) and rebuilt as ``sklearn.tree._tree.Tree`` objects after the
arrays are checked (indices in range, children after parents so there are no cycles,
finite values).  XGBoost boosters are stored with XGBoost's own ``save_raw("ubj")`` and
loaded with ``load_model``.  Anything that does not fit the schema raises
``CorruptModel``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xgboost as xgb
from sklearn.tree._tree import Tree

from modeling.errors import CorruptModel
from modeling.estimators import ESTIMATORS, _TreeRegressorBase, make_estimator

_NODE_DTYPE: np.dtype[Any] | None = None


def _node_dtype() -> np.dtype[Any]:
    global _NODE_DTYPE
    if _NODE_DTYPE is None:
        probe = Tree(1, np.array([1], dtype=np.intp), 1)
        _NODE_DTYPE = probe.__getstate__()["nodes"].dtype
    return _NODE_DTYPE


def export_tree(tree: Any) -> dict[str, Any]:
    """The node arrays of a fitted scikit-learn ``Tree`` as JSON-ready lists."""
    state = tree.__getstate__()
    nodes = state["nodes"]
    return {
        "max_depth": int(state["max_depth"]),
        "left": nodes["left_child"].tolist(),
        "right": nodes["right_child"].tolist(),
        "feature": nodes["feature"].tolist(),
        "threshold": nodes["threshold"].tolist(),
        "value": state["values"][:, 0, 0].tolist(),
    }


def import_tree(data: Any, n_features: int) -> Any:
    """Rebuild a ``Tree`` from :func:`export_tree` output, validating every array."""
    try:
        left = np.asarray(data["left"], dtype=np.int64)
        right = np.asarray(data["right"], dtype=np.int64)
        feature = np.asarray(data["feature"], dtype=np.int64)
        threshold = np.asarray(data["threshold"], dtype=np.float64)
        value = np.asarray(data["value"], dtype=np.float64)
        max_depth = int(data["max_depth"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptModel(f"bad tree export: {exc}") from exc
    n = len(left)
    if n == 0 or not all(a.ndim == 1 and len(a) == n for a in (right, feature, threshold, value)):
        raise CorruptModel("bad tree export: node arrays differ in length")
    leaf = left == -1
    idx = np.arange(n)
    inner_ok = (
        (left > idx) & (left < n) & (right > idx) & (right < n) & (feature >= 0) & (feature < n_features)
    )
    leaf_ok = (right == -1) & (feature == -2)
    if not np.all(np.where(leaf, leaf_ok, inner_ok)) or not np.all(np.isfinite(value)):
        raise CorruptModel("bad tree export: node indices or values out of range")
    if not 0 <= max_depth <= n:
        raise CorruptModel("bad tree export: max_depth out of range")
    nodes = np.zeros(n, dtype=_node_dtype())
    nodes["left_child"] = left
    nodes["right_child"] = right
    nodes["feature"] = feature
    nodes["threshold"] = np.where(leaf, -2.0, threshold)
    nodes["n_node_samples"] = 1
    nodes["weighted_n_node_samples"] = 1.0
    tree = Tree(n_features, np.array([1], dtype=np.intp), 1)
    tree.__setstate__(
        {"max_depth": max_depth, "node_count": n, "nodes": nodes, "values": value.reshape(n, 1, 1).copy()}
    )
    return tree


def export_estimator(est: _TreeRegressorBase) -> tuple[dict[str, Any], bytes | None]:
    """JSON-ready description of a fitted estimator, plus an XGBoost UBJ blob if any."""
    spec: dict[str, Any] = {
        "kind": est.kind,
        "params": est.get_params(),
        "n_features": int(est.n_features_in_),
        "x_mean": np.asarray(est.x_mean_, dtype=float).tolist(),
        "x_scale": np.asarray(est.x_scale_, dtype=float).tolist(),
        "coef": np.asarray(est.coef_, dtype=float).tolist(),
        "intercept": float(est.intercept_),
    }
    blob = None
    if hasattr(est, "booster_"):
        blob = bytes(est.booster_.save_raw("ubj"))
    else:
        spec["trees"] = [export_tree(t) for t in est.trees_]
    return spec, blob


def import_estimator(spec: Any, blob: bytes | None) -> _TreeRegressorBase:
    """Rebuild a fitted estimator from :func:`export_estimator` output."""
    try:
        kind = spec["kind"]
        if kind not in ESTIMATORS:
            raise CorruptModel(f"unknown estimator kind {kind!r}")
        est = make_estimator(kind, dict(spec["params"]))
        d = int(spec["n_features"])
        est.n_features_in_ = d
        est.x_mean_ = _vector(spec["x_mean"], d)
        est.x_scale_ = _vector(spec["x_scale"], d)
        est.coef_ = _vector(spec["coef"], d)
        est.intercept_ = float(spec["intercept"])
    except CorruptModel:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptModel(f"bad estimator description: {exc}") from exc
    if kind == "xgboost":
        if blob is None:
            raise CorruptModel("XGBoost model file missing")
        booster = xgb.Booster()
        try:
            booster.load_model(bytearray(blob))
        except xgb.core.XGBoostError as exc:
            raise CorruptModel(f"not an XGBoost model: {exc}") from exc
        if booster.num_features() != d:
            raise CorruptModel("XGBoost model has the wrong number of features")
        booster.set_param({"nthread": 1})
        est.booster_ = booster
    else:
        trees = spec.get("trees")
        if not isinstance(trees, list) or not trees:
            raise CorruptModel("tree model without trees")
        est.trees_ = [import_tree(t, d) for t in trees]
    return est


def _vector(values: Any, n: int) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise CorruptModel("bad coefficient vector")
    return arr
