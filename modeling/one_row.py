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

import itertools
import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from modeling.workload import LATENCY_METRICS, MIB, PERCENTILE_ORDER, WORKLOAD_FIELDS, region_code
from modeling.workload import PERCENTILE_ANCHOR as _ANCHOR
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import FRACTION_COLUMNS
from modeling.features import LOG_OUTSTANDING_COLUMN, LOG_QD_COLUMN, features_row

# -- physics (twins of modeling.serving.physics) -------------------------------------------

_QD, _NJ, _WR = _F["queue_depth"], _F["numjobs"], _F["write_ratio"]
_SIZE_COLUMNS = (_F["request_size"], _F["read_size"], _F["write_size"])
LOAD_LAWS = ("iops", "bandwidth_mib_s", "latency_mean_us")
"""The metrics bound by the load laws along queue depth: read off the monotone envelope
(``physics.settle`` and :func:`settle_row`)."""


@dataclass(frozen=True)
class RowLimits:
    """``PhysicsLimits`` in plain floats (``PhysicsLimits.row_limits``), read by the row twins."""

    lo: list[float]
    hi: list[float]
    max_outstanding: float
    caps: tuple[float, ...]  # per mix (read, write, mixed): the bandwidth cap, tolerance included
    depths: list[float]  # the measured queue depths, ascending; empty: no ladder
    log_depths: list[float]  # their log2
    interval_growth: float  # ``physics.INTERVAL_GROWTH``
    load_knee: float = 0.0  # K of the load law (``PhysicsLimits.load_knee``)
    size_knees: tuple[float, ...] = (0.0, 0.0, 0.0)  # per mix, s0 of the size law


def _mean_size(row: Sequence[float]) -> float:
    wr = row[_WR]
    return (1.0 - wr) * row[_F["read_size"]] + wr * row[_F["write_size"]]


def _field_factor(v: float, lo: float, hi: float) -> float:
    """Twin of ``physics._field_factors`` for one field."""
    above = v / max(hi, 1e-12) if v > hi else 1.0
    below = lo / max(v, 1e-12) if v < lo else 1.0
    return max(above, below, 1.0)


@dataclass
class RowStretch:
    """Twin of ``physics.Stretch`` for one workload."""

    row: list[float]  # the workload the models are evaluated at
    load: float
    size: float
    distance: float


def stretch_row(row: Sequence[float], lim: RowLimits) -> RowStretch:
    """Twin of ``physics.stretch``: sizes and load above the measured maximum clamped to it."""
    ev = list(row)
    for col in _SIZE_COLUMNS:
        ev[col] = min(ev[col], lim.hi[col])
    size = _mean_size(row) / max(_mean_size(ev), 1.0)
    jobs = min(ev[_NJ], lim.hi[_NJ])
    depth = min(ev[_QD], lim.hi[_QD])
    depth = min(depth, max(float(math.floor(lim.max_outstanding / jobs)), 1.0))
    ev[_NJ], ev[_QD] = jobs, depth
    load = row[_QD] * row[_NJ] / (depth * jobs)
    far = max(load, size)
    for v, lo, hi in zip(row, lim.lo, lim.hi, strict=True):
        if v > hi or v < lo:  # inside the range a field's factor is 1
            far = max(far, _field_factor(v, lo, hi))
    return RowStretch(ev, load, size, math.log(max(far, 1.0)))


def extrapolation_row(row: Sequence[float], lim: RowLimits | None) -> dict[str, float]:
    """Twin of ``physics.extrapolation`` for one workload: ``{field: factor}`` outside the range."""
    if lim is None:
        return {}
    out: dict[str, float] = {}
    for i, (v, lo, hi) in enumerate(zip(row, lim.lo, lim.hi, strict=True)):
        if i in FRACTION_COLUMNS:
            gap = max(v - hi, lo - v)
            f = 1.0 + gap if gap > 1e-9 else 1.0
        else:
            f = _field_factor(v, lo, hi)
        if f > 1.0 + 1e-9:
            out[WORKLOAD_FIELDS[i]] = round(f, 4)
    load = row[_QD] * row[_NJ] / lim.max_outstanding
    if load > 1.0 + 1e-9:
        out["outstanding_io"] = round(load, 4)
    return out


def ladder_position(logs: Sequence[float], depth: float) -> tuple[int, int, float]:
    """The twin of ``settle``'s position along the measured depths: (low, high, fraction).

    ``np.interp`` of log2 ``depth`` over the measured depths' log2 (``logs``), clamped
    at both ends.
    """
    n = len(logs)
    x = math.log2(depth)
    if x <= logs[0]:
        pos = 0.0
    elif x >= logs[-1]:
        pos = float(n - 1)
    else:
        j = bisect_right(logs, x) - 1
        pos = j + (x - logs[j]) * (1.0 / (logs[j + 1] - logs[j]))
    low = min(math.floor(pos), n - 1)
    return low, min(low + 1, n - 1), pos - low


def ladder_rows(at: tuple[int, int, float]) -> int:
    """How many measured depths, from the smallest, :func:`settle_row` reads at position ``at``.

    At a measured depth the envelope is read there (the next one weighs nothing).
    """
    low, high, frac = at
    return (high if frac > 0.0 else low) + 1


def settle_row(
    metric: str, steps: Sequence[float], row: Sequence[float], lim: RowLimits, at: tuple[int, int, float]
) -> float:
    """Twin of ``physics.settle`` for one load-law metric of one workload.

    ``steps`` are the metric at the first :func:`ladder_rows` measured depths (the
    workload ``row`` evaluated at each), ``at`` the row's :func:`ladder_position`.
    """
    low, high, frac = at
    nj = row[_NJ]
    if metric == "latency_mean_us":
        env = list(itertools.accumulate(steps, max))
        scale = 1.0
    else:  # IOPS and bandwidth per I/O in flight
        env = list(itertools.accumulate((v / (d * nj) for v, d in zip(steps, lim.depths, strict=False)), min))
        scale = row[_QD] * nj
    a = math.log(max(env[low], 1e-300))
    b = math.log(max(env[high], 1e-300)) if frac > 0.0 else a
    return math.exp(a * (1.0 - frac) + b * frac) * scale


def needed_rungs_row(
    metric: str, lo: Sequence[float], hi: Sequence[float], own: float, row: Sequence[float], lad: Any
) -> list[int]:
    """Twin of ``physics.needed_rungs`` for one workload: the ladder rows worth evaluating.

    ``lo`` and ``hi`` bound the metric at the ladder's measured depths ``lad.depths``
    (the first ``lad.rungs``), ``own`` is its value at the workload ``row``, ``lad.at``
    the row's :func:`ladder_position`.  The workload's own rung (at a measured depth)
    is never listed: its value is ``own``.
    """
    low, _, frac = lad.at
    nj = row[_NJ]
    own_rung = low if lad.own_included and frac == 0.0 else -1
    if metric == "latency_mean_us":  # a running maximum: the running minimum of its negative
        lo_key = [-v for v in hi[: lad.rungs]]
        hi_key = [-v for v in lo[: lad.rungs]]
        own_key = -own
    else:
        lo_key = [v / (d * nj) for v, d in zip(lo, lad.depths[: lad.rungs], strict=False)]
        hi_key = [v / (d * nj) for v, d in zip(hi, lad.depths[: lad.rungs], strict=False)]
        own_key = own / (row[_QD] * nj)
    bound = min([own_key if own_rung >= 0 else math.inf, *hi_key[: low + 1]])
    return [j for j in range(lad.rungs) if j != own_rung and not lo_key[j] > bound]


def apply_physics_row(values: dict[str, float], row: Sequence[float], st: RowStretch, lim: RowLimits) -> None:
    """Twin of ``physics.apply_physics`` for one workload, in place."""
    wr = row[_WR]
    mix = 0 if wr <= 0.0 else 1 if wr >= 1.0 else 2
    oio, size, knee = row[_QD] * row[_NJ], _mean_size(row), lim.load_knee
    gain = st.load * (oio / st.load + knee) / (oio + knee) if knee > 0 else 1.0
    s0 = lim.size_knees[mix]
    grow = (s0 + size) / (s0 + size / st.size)
    if "iops" in values:
        values["iops"] = values["iops"] * (gain / grow)
    if "bandwidth_mib_s" in values:
        values["bandwidth_mib_s"] = values["bandwidth_mib_s"] * (gain * st.size / grow)
    for metric in LATENCY_METRICS:
        if metric in values:
            values[metric] = values[metric] * (st.load / gain * grow)
    cap = lim.caps[mix]
    if "bandwidth_mib_s" in values:
        values["bandwidth_mib_s"] = min(values["bandwidth_mib_s"], cap)
    if "iops" in values:
        bw_implied = values["iops"] * size / MIB
        slow = min(1.0, cap / max(bw_implied, 1e-12))
        values["iops"] = values["iops"] * slow
        for metric in LATENCY_METRICS:
            if metric in values:
                values[metric] = values[metric] / slow
    order_percentiles_row(values)


def order_percentiles_row(values: dict[str, float]) -> None:
    """Twin of ``physics.order_percentiles``: anchored on p99, p99 >= mean."""
    present = [m for m in PERCENTILE_ORDER if m in values]
    if not present:
        return
    anchor = _ANCHOR if _ANCHOR in values else present[0]
    if anchor == _ANCHOR and "latency_mean_us" in values:
        values[anchor] = max(values[anchor], values["latency_mean_us"])
    at = present.index(anchor)
    for i in range(at + 1, len(present)):
        values[present[i]] = max(values[present[i]], values[present[i - 1]])
    for i in range(at - 1, -1, -1):
        values[present[i]] = min(values[present[i]], values[present[i + 1]])


def needed_metrics(wanted: Sequence[str], known: Sequence[str]) -> list[str]:
    """The metrics whose values the laws need to answer ``wanted``, in ``known``'s order.

    Latencies are slowed with IOPS under the bandwidth cap, and each percentile is ordered
    against the rungs between it and the p99, the p99 against the mean.
    """
    if wanted is known or set(wanted) >= set(known):  # every metric: the common request
        return list(known)
    need = set(wanted)
    for metric in wanted:
        if metric in LATENCY_METRICS:
            need.add("iops")
        if metric in PERCENTILE_ORDER:
            i, a = PERCENTILE_ORDER.index(metric), PERCENTILE_ORDER.index(_ANCHOR)
            need.update(PERCENTILE_ORDER[min(i, a) : max(i, a) + 1])
            need.add("latency_mean_us")
    return [m for m in known if m in need]


# -- a device model ------------------------------------------------------------------------


class Scope(Protocol):
    """What the row path reads of a :class:`~modeling.serving.metric_models.ScopeModel`."""

    q: float
    scale: float

    def predict(self, features: Any) -> np.ndarray: ...

    def bounds(self, features: Any) -> tuple[np.ndarray, np.ndarray] | None: ...

    def outside_row(self, row: list[float]) -> bool: ...


class Spec(Protocol):
    """What the row path reads of a :class:`~modeling.serving.metric_models.MetricSpec`."""

    mode: str
    scopes: Mapping[str, Any]


class Device(Protocol):
    """What :func:`predict_row` reads of a :class:`~modeling.serving.device_model.DeviceModel`."""

    @property
    def specs(self) -> Mapping[str, Any]: ...

    @property
    def metrics(self) -> tuple[str, ...]: ...

    @property
    def row_limits(self) -> RowLimits | None: ...

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


class _LadderFeatures:
    """Feature rows of the workload at the measured ``depths``, then of the workload itself.

    Only the load columns differ from the workload's own row (see :func:`features_row`),
    so each ladder row is a copy with those replaced.  When the workload sits at the
    last of the depths, that row is its own and is not repeated (``own_included``).
    """

    def __init__(self, own: _RowFeatures, depths: Sequence[float], at: tuple[int, int, float]) -> None:
        self.own = own
        self.at = at  # the workload's ladder_position
        self.rungs = len(depths)  # the measured depths among the rows
        self.own_included = depths[-1] == own.row[_QD]
        self.depths = list(depths) if self.own_included else [*depths, own.row[_QD]]
        self.sets: dict[str, np.ndarray] = {}

    def steps(self, values: np.ndarray) -> list[float]:
        """The values at the measured depths, of values at every ladder row."""
        return values.tolist() if self.own_included else values[:-1].tolist()

    def __getitem__(self, feature_set: str) -> np.ndarray:
        x = self.sets.get(feature_set)
        if x is None:
            x = np.repeat(self.own[feature_set], len(self.depths), axis=0)
            x[:, LOG_QD_COLUMN] = [math.log2(d) for d in self.depths]
            if feature_set == "extended":
                nj = self.own.row[_NJ]
                x[:, LOG_OUTSTANDING_COLUMN] = [math.log2(d * nj) for d in self.depths]
            self.sets[feature_set] = x
        return x


@dataclass
class _RowState:
    """Per-call state of one single-workload prediction."""

    asked: list[float]  # the workload asked for: its region and range flags
    features: _RowFeatures  # of the workload the models are evaluated at
    ladder: _LadderFeatures | None  # the same at the measured depths it needs
    code: int
    model: str
    cache: dict[tuple[str, str, bool], np.ndarray] = field(default_factory=dict)
    done: dict[str, tuple[np.ndarray, float, bool, str]] = field(default_factory=dict)


def predict_row(
    device: Device, row: list[float], metrics: Sequence[str] | None = None, model: str = "auto"
) -> dict[str, tuple[float, float, float, bool, str]]:
    """Twin of ``DeviceModel.predict_matrix`` for one workload (a list of the workload fields).

    The same models, scope choices, physics and intervals as the matrix path, without its
    arrays: the models run on one feature row, and the load-law metrics on the few rows of
    the measured depths up to the workload's (one call per model); only the metrics the
    wanted ones depend on through the laws are computed.
    """
    wanted = device._check_request(metrics, model)
    lim = device.row_limits
    code = int(region_code(row[_WR], row[_F["randomness"]], row[_F["request_size"]]))
    if lim is None:  # a model saved before the physics limits were recorded: no laws
        st = _RowState(row, _RowFeatures(row), None, code, model)
        out = {}
        for metric in wanted:
            v, q, extrap, scope = _metric_row(device, metric, st, False)
            value = max(float(v[-1]), 0.0)
            out[metric] = (value, value * math.exp(-q), value * math.exp(q), extrap, scope)
        return out
    stretch = stretch_row(row, lim)
    ev = stretch.row
    own = _RowFeatures(ev)
    at = ladder_position(lim.log_depths, ev[_QD]) if lim.depths else (0, 0, 0.0)
    depths = lim.depths[: ladder_rows(at)] if lim.depths else []
    if depths == [ev[_QD]]:
        # at the smallest measured depth the envelope is the workload's own value (up to
        # rounding: the matrix path divides by the load and multiplies back)
        depths = []
    st = _RowState(row, own, _LadderFeatures(own, depths, at) if depths else None, code, model)
    raw = {}
    values = {}
    for metric in needed_metrics(wanted, device.metrics):
        on_ladder = metric in LOAD_LAWS
        raw[metric] = _metric_row(device, metric, st, on_ladder)
        v = raw[metric][0]
        if on_ladder and st.ladder is not None:
            values[metric] = settle_row(metric, st.ladder.steps(v), ev, lim, at)
        else:
            values[metric] = float(v[-1])
    apply_physics_row(values, row, stretch, lim)
    out = {}
    for metric in wanted:
        _, q, extrap, scope = raw[metric]
        value = max(values[metric], 0.0)
        q = q + lim.interval_growth * stretch.distance
        # a load beyond the measured one can hide inside each field's own range
        extrap = extrap or stretch.distance > 0.0
        out[metric] = (value, value * math.exp(-q), value * math.exp(q), extrap, scope)
    return out


def _metric_row(
    device: Device, metric: str, st: _RowState, on_ladder: bool
) -> tuple[np.ndarray, float, bool, str]:
    """The model's (values, q, extrapolated, scope) of one metric before the laws.

    ``values`` ends with the workload's own value; on the ladder the values at the
    measured depths come first.
    """
    done = st.done.get(metric)
    if done is not None and (not on_ladder or len(done[0]) > 1):
        return done
    spec = device.specs[metric]
    base = device.specs["iops"] if spec.mode == "derived" else spec
    scope = device._scope_for(base, st.code, st.model, metric)
    sm, own = base.scopes[scope], spec.scopes.get(scope)
    source = "iops" if spec.mode == "derived" else metric
    value = _scope_values(sm, source, scope, st, on_ladder)
    q = own.q if own is not None else math.nan
    extrap = device._no_data_of(st.code) or sm.outside_row(st.asked)
    if spec.mode == "derived":
        factor = own.scale if own is not None else 1.0
        nj = st.features.row[_NJ]
        depths = st.ladder.depths if on_ladder and st.ladder else [st.features.row[_QD]]
        loads = [d * nj for d in depths]
        value = derive_row(metric, value, loads, st.features.row) * factor
    elif spec.mode == "ratio":
        mean = _metric_row(device, "latency_mean_us", st, False)
        value, extrap = value * mean[0][-1], extrap or mean[2]
    st.done[metric] = (value, q, extrap, scope)
    return st.done[metric]


def _scope_values(sm: Any, source: str, scope: str, st: _RowState, on_ladder: bool) -> np.ndarray:
    """A scope model's raw values: at the ladder's rows then the workload's, or the workload's."""
    if on_ladder and st.ladder is not None:
        key = (source, scope, True)
        hit = st.cache.get(key)
        if hit is None:
            hit = st.cache[key] = _ladder_values(sm, source, scope, st, st.ladder)
        return hit
    ladder_hit = st.cache.get((source, scope, True))
    if ladder_hit is not None:
        return ladder_hit[-1:]
    key = (source, scope, False)
    hit = st.cache.get(key)
    if hit is None:
        hit = st.cache[key] = np.asarray(sm.predict(st.features), dtype=np.float64)
    return hit


def _ladder_values(sm: Any, source: str, scope: str, st: _RowState, lad: _LadderFeatures) -> np.ndarray:
    """A scope model's raw values at the ladder's rows then the workload's.

    Where the model has cheap bounds (``ScopeModel.bounds``), only the rungs that can
    set the envelope are evaluated (:func:`needed_rungs_row`); the others are infinite,
    on the side that never sets it, as in the matrix path.
    """
    bounds = sm.bounds(lad)
    if bounds is None:
        return np.asarray(sm.predict(lad), dtype=np.float64)
    own = float(_scope_values(sm, source, scope, st, False)[0])
    rows = needed_rungs_row(source, bounds[0].tolist(), bounds[1].tolist(), own, st.features.row, lad)
    values = np.full(len(lad.depths), -math.inf if source == "latency_mean_us" else math.inf)
    values[-1] = own
    if rows:
        values[rows] = sm.predict(RowsOf(lad, rows))
    return values


class Features(Protocol):
    """Feature matrices by feature-set name (``ScopeModel.predict``'s argument)."""

    def __getitem__(self, feature_set: str) -> np.ndarray: ...


class RowsOf:
    """Some rows of another feature lookup's matrices (a ladder's rungs left to evaluate).

    Shared by the single-row path (a ladder's few rows) and the matrix path
    (``device_model``: a batch's rungs, a scope's rows); each set is sliced once.
    """

    def __init__(self, source: Features, rows: Any) -> None:
        self.source = source
        self.rows = rows
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        matrix = self.sets.get(feature_set)
        if matrix is None:
            matrix = self.sets[feature_set] = self.source[feature_set][self.rows]
        return matrix


def derive_row(metric: str, iops: np.ndarray, loads: list[float], row: Sequence[float]) -> np.ndarray:
    """Twin of ``metric_models.derive_metric`` (bandwidth law, Little's law) for one workload.

    ``iops`` at the ladder's rows then the workload's, ``loads`` their I/Os in flight.
    """
    if metric == "bandwidth_mib_s":
        return iops * _mean_size(row) / MIB
    if metric == "latency_mean_us":
        if len(loads) == 1:  # plain floats: numpy costs more than the arithmetic on one value
            return np.array([loads[0] / max(float(iops[0]), 1e-9) * 1e6])
        return np.asarray(loads) / np.maximum(iops, 1e-9) * 1e6
    raise ValueError(f"{metric} cannot be derived from IOPS")


__all__ = [
    "LOAD_LAWS",
    "RowsOf",
    "derive_row",
    "apply_physics_row",
    "extrapolation_row",
    "predict_row",
    "needed_rungs_row",
    "settle_row",
    "stretch_row",
]
