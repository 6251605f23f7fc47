"""Safe (pickle-free) export and import of fitted estimators.

scikit-learn trees are exported as their node arrays in JSON (children, split feature,
threshold, leaf value) and rebuilt as ``sklearn.tree._tree.Tree`` objects after the
arrays are checked (indices in range, children after parents so there are no cycles,
finite values).  XGBoost boosters are stored with XGBoost's own ``save_raw("ubj")`` and
loaded with ``load_model``.  A Gaussian process is its arrays (training inputs, dual
coefficients, length scales), checked for shape and finiteness.  Anything that does not
fit the schema raises ``CorruptModel``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xgboost as xgb
from sklearn.tree._tree import Tree

from modeling.errors import CorruptModel
from modeling.estimators.base import RegressorBase
from modeling.estimators.families import ESTIMATORS, make_estimator
from modeling.estimators.relative import CORRECTIONS, ReferenceFunction, RelativeFitnessModel
from modeling.features import FEATURE_NAMES

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


def export_estimator(est: Any, name: str = "model") -> tuple[dict[str, Any], dict[str, bytes]]:
    """JSON-ready description of a fitted estimator, plus its binary files by name.

    ``name`` prefixes the files (XGBoost boosters, ``<name>.ubj``); a composite model
    exports its parts under ``<name>-<part>``.
    """
    if isinstance(est, RelativeFitnessModel):
        return _export_relative(est, name)
    spec: dict[str, Any] = {
        "kind": est.kind,
        "params": est.get_params(),
        "n_features": int(est.n_features_in_),
        "x_mean": np.asarray(est.x_mean_, dtype=float).tolist(),
        "x_scale": np.asarray(est.x_scale_, dtype=float).tolist(),
        "coef": np.asarray(est.coef_, dtype=float).tolist(),
        "intercept": float(est.intercept_),
    }
    blobs: dict[str, bytes] = {}
    if hasattr(est, "booster_"):
        spec["file"] = f"{name}.ubj"
        blobs[spec["file"]] = bytes(est.booster_.save_raw("ubj"))
    elif hasattr(est, "gp_alpha_"):
        spec["gp"] = _export_gp(est)
    elif hasattr(est, "parts_"):
        spec["parts"] = {}
        for key, part in est.parts_.items():
            spec["parts"][key], part_blobs = export_estimator(part, f"{name}-{key}")
            blobs.update(part_blobs)
        spec["shift"] = np.asarray(est.shift_, dtype=float).tolist()
        spec["load_range"] = np.asarray(est.load_range_, dtype=float).tolist()
    else:
        spec["trees"] = [export_tree(t) for t in est.trees_]
    return spec, blobs


_PARTS = {"load_gated": {"direct": "xgboost", "per_load": "xgboost", "gate": "gp"}}


def import_estimator(spec: Any, blobs: Mapping[str, bytes]) -> RegressorBase:
    """Rebuild a fitted estimator from :func:`export_estimator` output."""
    if isinstance(spec, dict) and spec.get("kind") == RelativeFitnessModel.kind:
        return _import_relative(spec, blobs)  # type: ignore[return-value]
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
        blob = blobs.get(spec.get("file", ""))
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
    elif kind == "gp":
        _import_gp(est, spec.get("gp"), d)
    elif kind in _PARTS:
        _import_parts(est, spec, blobs, d)
    else:
        trees = spec.get("trees")
        if not isinstance(trees, list) or not trees:
            raise CorruptModel("tree model without trees")
        est.trees_ = [import_tree(t, d) for t in trees]
    est.prepare()
    return est


def _import_parts(est: Any, spec: Any, blobs: Mapping[str, bytes], d: int) -> None:
    """Set a composite model's parts, each of the kind and width it must have."""
    expected = _PARTS[est.kind]
    parts = spec.get("parts")
    if not isinstance(parts, dict) or set(parts) != set(expected):
        raise CorruptModel(f"{est.kind} model needs the parts {sorted(expected)}")
    est.parts_ = {}
    for key, kind in expected.items():
        part = import_estimator(parts[key], blobs)
        if part.kind != kind or int(part.n_features_in_) != d:
            raise CorruptModel(f"{est.kind} model: part {key!r} is not a {kind} model on {d} features")
        est.parts_[key] = part
    est.shift_ = _vector(spec.get("shift"), d)
    est.load_range_ = _vector(spec.get("load_range"), 2)
    if est.load_range_[0] > est.load_range_[1]:
        raise CorruptModel(f"{est.kind} model: empty load range")
    try:
        est.load_shift(d)
    except ValueError as exc:
        raise CorruptModel(f"{est.kind} model: {exc}") from exc


def _export_gp(est: Any) -> dict[str, Any]:
    return {
        "features": [int(i) for i in est.gp_features_],
        "mean": est.gp_mean_.tolist(),
        "scale": est.gp_scale_.tolist(),
        "length": est.gp_length_.tolist(),
        "X": est.gp_X_.tolist(),
        "alpha": est.gp_alpha_.tolist(),
        "amplitude": float(est.gp_amplitude_),
        "offset": float(est.gp_offset_),
    }


def _import_gp(est: Any, data: Any, n_features: int) -> None:
    """Set a Gaussian process's learned arrays from :func:`_export_gp` output, validated."""
    try:
        features = np.asarray(data["features"], dtype=np.int64)
        k = len(features)
        mean, scale, length = (_vector(data[key], k) for key in ("mean", "scale", "length"))
        alpha = np.asarray(data["alpha"], dtype=np.float64)
        X = np.asarray(data["X"], dtype=np.float64).reshape(len(alpha), k)
        amplitude, offset = float(data["amplitude"]), float(data["offset"])
    except CorruptModel:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptModel(f"bad Gaussian process export: {exc}") from exc
    ok = (
        features.ndim == 1
        and np.all((features >= 0) & (features < n_features))
        and np.all(np.diff(features) > 0)
        and np.all(scale > 0)
        and np.all(length > 0)
        and alpha.ndim == 1
        and all(np.all(np.isfinite(a)) for a in (X, alpha))
        and np.isfinite(amplitude)
        and np.isfinite(offset)
    )
    if not ok:
        raise CorruptModel("bad Gaussian process export: values out of range")
    est.gp_features_, est.gp_mean_, est.gp_scale_, est.gp_length_ = features, mean, scale, length
    est.gp_X_, est.gp_alpha_, est.gp_amplitude_, est.gp_offset_ = X, alpha, amplitude, offset


def _export_relative(est: RelativeFitnessModel, name: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A transferred model: its correction, and the reference's members exported in full."""
    ref = est.reference_
    blobs: dict[str, bytes] = {}
    members = []
    for i, (feature_set, member) in enumerate(ref.members):
        member_spec, member_blobs = export_estimator(member, f"{name}-ref{i}")
        blobs.update(member_blobs)
        members.append({"feature_set": feature_set, "estimator": member_spec})
    tree = est.correction_tree_
    spec = {
        "kind": est.kind,
        "params": {k: v for k, v in est.get_params().items() if k != "reference"},
        "n_features": int(est.n_features_in_),
        "x_mean": np.asarray(est.x_mean_, dtype=float).tolist(),
        "x_scale": np.asarray(est.x_scale_, dtype=float).tolist(),
        "coef": np.asarray(est.coef_, dtype=float).tolist(),
        "intercept": float(est.intercept_),
        "chosen": est.chosen_,
        "alpha_chosen": float(est.alpha_),
        "tree": None if tree is None else export_tree(tree),
        "reference": {"members": members, "weights": ref.weights, "scale": float(ref.scale),
                      "device": ref.device, "version": ref.version},
    }
    return spec, blobs


def _import_relative(spec: dict[str, Any], blobs: Mapping[str, bytes]) -> RelativeFitnessModel:
    """Rebuild a transferred model from :func:`_export_relative` output, validated."""
    try:
        params = dict(spec["params"])
        if set(params) - {"correction", "alpha", "max_depth"} or spec["chosen"] not in CORRECTIONS:
            raise CorruptModel("bad relative-fitness parameters")
        est = RelativeFitnessModel(**params)
        d = int(spec["n_features"])
        if d != len(FEATURE_NAMES["extended"]):
            raise CorruptModel("relative-fitness model not on the extended features")
        ref = spec["reference"]
        members = []
        for member in ref["members"]:
            feature_set = member["feature_set"]
            if feature_set not in FEATURE_NAMES:
                raise CorruptModel(f"unknown feature set {feature_set!r} in a reference member")
            part = import_estimator(member["estimator"], blobs)
            if int(part.n_features_in_) != len(FEATURE_NAMES[feature_set]) or part.kind == est.kind:
                raise CorruptModel("reference member of the wrong width or kind")
            members.append((feature_set, part))
        weights = None if ref["weights"] is None else [float(x) for x in ref["weights"]]
        scale = float(ref["scale"])
        if not members or (weights is not None and len(weights) != len(members)) or not (
            np.isfinite(scale) and scale > 0
        ):
            raise CorruptModel("bad reference in a relative-fitness model")
        est.reference = est.reference_ = ReferenceFunction(members, weights, scale, str(ref["device"]),
                                                           str(ref["version"]))
        est.x_mean_ = _vector(spec["x_mean"], d)
        est.x_scale_ = _vector(spec["x_scale"], d)
        est.coef_ = _vector(spec["coef"], d)
        est.intercept_ = float(spec["intercept"])
        est.n_features_in_ = d
        est.chosen_ = spec["chosen"]
        est.alpha_ = float(spec["alpha_chosen"])
        est.correction_tree_ = None if spec["tree"] is None else import_tree(spec["tree"], d)
    except CorruptModel:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptModel(f"bad relative-fitness model: {exc}") from exc
    if not np.isfinite(est.intercept_) or np.any(est.x_scale_ == 0):
        raise CorruptModel("bad relative-fitness coefficients")
    return est


def _vector(values: Any, n: int) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise CorruptModel("bad coefficient vector")
    return arr
