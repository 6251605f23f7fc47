"""One-row fast paths: the twins of vectorised code, for the service's common case.

A served prediction is usually one workload. Through the matrix path each metric costs a
dozen numpy calls on length-1 arrays, which cost more than the models themselves (about
0.1 ms per call before these paths existed). Every function here is the twin of one
vectorised function, named in its docstring, and returns the same numbers in plain
floats; ``tests/modeling/test_one_row.py`` holds each one equal to its twin, over every
estimator family.

This module sits beside :mod:`modeling.workload` at the bottom of the package: the
features, the estimators and the serving code all call into it, so it imports none of
them. The objects it works on (a packed forest, a Gaussian process, a device model) are
described by the protocols below, which list exactly the attributes a twin reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from modeling.workload import MIB, region_code
from modeling.workload_matrix import FIELD_INDEX as _F

LN2 = math.log(2.0)


# -- features and physics ------------------------------------------------------------------


def features_row(row: Sequence[float], feature_set: str) -> np.ndarray:
    """Twin of :func:`modeling.features.compute_features` for one workload (a 1 x k matrix)."""
    wr, qd, size = row[_F["write_ratio"]], row[_F["queue_depth"]], row[_F["request_size"]]
    out = [wr, math.log2(qd), math.log2(size), row[_F["randomness"]]]
    if feature_set == "extended":
        nj, rs, ws = row[_F["numjobs"]], row[_F["read_size"]], row[_F["write_size"]]
        out += [
            math.log2(nj),
            math.log2(qd * nj),
            math.log2(rs),
            math.log2(ws),
            row[_F["read_randomness"]],
            row[_F["write_randomness"]],
            math.log2((1.0 - wr) * rs + wr * ws),
        ]
    return np.array([out], dtype=np.float32)


def derive_row(metric: str, iops: float, row: Sequence[float]) -> float:
    """Twin of :func:`modeling.serving.metric_models.derive_metric` (bandwidth law, Little's law)."""
    if metric == "bandwidth_mib_s":
        wr = row[_F["write_ratio"]]
        return iops * ((1.0 - wr) * row[_F["read_size"]] + wr * row[_F["write_size"]]) / MIB
    if metric == "latency_mean_us":
        return row[_F["queue_depth"]] * row[_F["numjobs"]] / max(iops, 1e-9) * 1e6
    raise ValueError(f"{metric} cannot be derived from IOPS")


def outside_row(lo: Sequence[float], hi: Sequence[float], row: Sequence[float]) -> bool:
    """Twin of :meth:`ScopeModel.outside`: a field outside ``[lo, hi]`` (bounds already widened)."""
    return any(v < a or v > b for v, a, b in zip(row, lo, hi, strict=True))


# -- estimators --------------------------------------------------------------------------


class PackedTrees(Protocol):
    """What :func:`forest_leaves_row` reads of a :class:`~modeling.estimators.packed_forest.PackedForest`."""

    left: np.ndarray
    right_step: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    roots: np.ndarray
    depth: int
    value: np.ndarray


def forest_leaves_row(forest: PackedTrees, X32: np.ndarray) -> np.ndarray:
    """Twin of ``PackedForest.leaf_values`` for one row: ``(n_trees, 1)`` leaf values.

    The row's next node is decided from every node at once (a leaf steps to itself), then
    each level is one gather, instead of a compare and a gather per level and tree.
    """
    x = X32[0].astype(np.float64)
    step = forest.left + forest.right_step * (x[forest.feature] > forest.threshold)
    node = forest.roots
    for _ in range(forest.depth):
        node = step[node]
    return forest.value[node][:, None]


class MaternProcess(Protocol):
    """What :func:`matern_slope_row` reads of a fitted Gaussian process."""

    nu: float
    gp_features_: Any
    gp_factor_: np.ndarray
    gp_shift_: np.ndarray
    gp_X_: np.ndarray
    gp_train_sq_: np.ndarray
    gp_alpha_: np.ndarray
    gp_amplitude_: float


def matern_slope_row(gp: MaternProcess, x32: np.ndarray, v: np.ndarray, weighted: np.ndarray) -> float:
    """Twin of ``GaussianProcessModel.slope`` for one row, with vectors instead of matrices."""
    q = x32[gp.gp_features_] * gp.gp_factor_
    q -= gp.gp_shift_
    d2 = gp.gp_X_ @ q
    d2 *= -2.0
    d2 += gp.gp_train_sq_
    d2 += q @ q
    np.maximum(d2, 0.0, out=d2)
    r = np.sqrt(d2, out=d2)
    if gp.nu == 1.5:  # k'(r)/r = -3 exp(-sqrt(3) r)
        r *= -np.sqrt(3.0)
        g = np.exp(r, out=r)
        g *= -3.0
    else:  # k'(r)/r = -5/3 (1 + sqrt(5) r) exp(-sqrt(5) r)
        s = r * np.sqrt(5.0)
        g = np.exp(-s)
        g *= s + 1.0
        g *= -5.0 / 3.0
    return gp.gp_amplitude_ * (float(q @ v) * float(g @ gp.gp_alpha_) - float(g @ weighted))


class Fast(Protocol):
    """An estimator's prediction without input validation."""

    def predict_fast(self, X32: np.ndarray) -> np.ndarray: ...


class Sloped(Protocol):
    """An estimator with an analytic slope (the load gate's Gaussian process)."""

    def slope(self, X32: np.ndarray, direction: np.ndarray) -> np.ndarray: ...


class LoadGate(Protocol):
    """What :func:`elasticity_row` and :func:`load_gated_row` read of a load-gated model."""

    n_col: int
    read_range_: tuple[Any, Any]
    unit_: np.ndarray
    parts_: Mapping[str, Any]


def elasticity_row(model: LoadGate, X32: np.ndarray) -> float:
    """Twin of ``LoadGatedModel.elasticity`` for one row."""
    t = float(X32[0, model.n_col])
    lo, hi = float(model.read_range_[0]), float(model.read_range_[1])
    if not lo <= t <= hi:  # read the gate at the nearer end of the load range
        X32 = X32 + (min(max(t, lo), hi) - t) * model.unit_
    slope = float(model.parts_["gate"].slope(X32, model.unit_)[0]) / LN2
    return min(max(slope, 0.0), 1.0)


def load_gated_row(model: LoadGate, X32: np.ndarray, runners: Mapping[str, Fast]) -> np.ndarray:
    """Twin of ``LoadGatedModel._predict_core`` for one row: the elasticity-weighted blend."""
    e = elasticity_row(model, X32)
    ln_n = float(X32[0, model.n_col]) * LN2
    direct = float(runners["direct"].predict_fast(X32)[0])
    per_load = float(runners["per_load"].predict_fast(X32)[0]) + ln_n
    return np.array([math.exp((1.0 - e) * direct + e * per_load)])


# -- a device model ------------------------------------------------------------------------


class Scope(Protocol):
    """What the row path reads of a :class:`~modeling.serving.metric_models.ScopeModel`."""

    q: float
    scale: float

    def predict(self, features: Any) -> np.ndarray: ...

    def outside_row(self, row: list[float]) -> bool: ...


class Spec(Protocol):
    """What the row path reads of a :class:`~modeling.serving.metric_models.MetricSpec`."""

    mode: str
    scopes: Mapping[str, Any]


class Device(Protocol):
    """What :func:`predict_row` reads of a :class:`~modeling.serving.device_model.DeviceModel`."""

    @property
    def specs(self) -> Mapping[str, Any]: ...

    def _check_request(self, metrics: Sequence[str] | None, model: str) -> tuple[str, ...]: ...

    def _scope_for(self, base: Any, code: int, model: str, metric: str) -> str: ...

    def _no_data_of(self, code: int) -> bool: ...


class _RowFeatures:
    """The feature rows of one workload, computed once each, when first needed."""

    def __init__(self, row: list[float]) -> None:
        self.row = row
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        x = self.sets.get(feature_set)
        if x is None:
            x = self.sets[feature_set] = features_row(self.row, feature_set)
        return x


@dataclass
class _RowState:
    """Per-call state of one single-workload prediction."""

    row: list[float]
    code: int
    features: _RowFeatures
    model: str
    cache: dict[tuple[str, str], float] = field(default_factory=dict)
    done: dict[str, tuple[float, float, float, bool, str]] = field(default_factory=dict)


def predict_row(
    device: Device, row: list[float], metrics: Sequence[str] | None = None, model: str = "auto"
) -> dict[str, tuple[float, float, float, bool, str]]:
    """Twin of ``DeviceModel.predict_matrix`` for one workload (a list of the workload fields).

    The same models, scope choices, physics and intervals as the matrix path.
    """
    wanted = device._check_request(metrics, model)
    code = region_code(row[_F["write_ratio"]], row[_F["randomness"]], row[_F["request_size"]])
    state = _RowState(row, int(code), _RowFeatures(row), model)
    return {metric: _metric_row(device, metric, state) for metric in wanted}


def _metric_row(device: Device, metric: str, st: _RowState) -> tuple[float, float, float, bool, str]:
    if metric in st.done:
        return st.done[metric]
    spec = device.specs[metric]
    base = device.specs["iops"] if spec.mode == "derived" else spec
    scope = device._scope_for(base, st.code, st.model, metric)
    sm, own = base.scopes[scope], spec.scopes.get(scope)
    key = ("iops" if spec.mode == "derived" else metric, scope)
    value = st.cache.get(key)
    if value is None:
        value = st.cache[key] = float(sm.predict(st.features)[0])
    q = own.q if own is not None else math.nan
    extrap = device._no_data_of(st.code) or sm.outside_row(st.row)
    if spec.mode == "derived":
        factor = own.scale if own is not None else 1.0
        value = derive_row(metric, value, st.row) * factor
    elif spec.mode == "ratio":
        mean = _metric_row(device, "latency_mean_us", st)
        value, extrap = value * mean[0], extrap or mean[3]
    value = max(value, 0.0)
    st.done[metric] = (value, value * math.exp(-q), value * math.exp(q), extrap, scope)
    return st.done[metric]


__all__ = [
    "derive_row",
    "elasticity_row",
    "features_row",
    "forest_leaves_row",
    "load_gated_row",
    "matern_slope_row",
    "outside_row",
    "predict_row",
]
