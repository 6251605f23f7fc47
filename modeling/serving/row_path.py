"""The single-row path: one workload's prediction without the matrix path's arrays.

A served prediction is usually one workload. Through the matrix path
(:mod:`modeling.serving.matrix_path`) each metric costs a dozen numpy calls on length-1
arrays, which cost more than the models themselves.  This path makes the same choices
with the same code where it can: the scope choice (:meth:`MetricSpec.scope_for`), the
scope models and their estimators (each estimator's own one-row branch), the physics
(:func:`~modeling.serving.physics.laws.apply_physics_row`, the same laws as the matrix path's);
and the single-row forms that sit beside their matrix forms for the rest (the stretch,
the ladder).  It reads the device's models only through their public state
(:class:`~modeling.serving.metric_models.ModelSet`).  ``tests/modeling/test_fast_paths.py``
holds its answers equal to the matrix path's, over every estimator family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modeling.serving.physics.extrapolation import stretch_row, widen
from modeling.serving.feature_lookup import LadderFeatures, RowFeatures, RowsOf
from modeling.serving.physics.ladder import (
    LOAD_LAWS,
    ladder_position,
    ladder_rows,
    needed_rungs_row,
    settle_row,
)
from modeling.serving.metric_models import MEAN_MODES, ModelSet, ScopeModel, derive_from_iops
from modeling.serving.physics.laws import apply_physics_row, needed_metrics
from modeling.workload import region_code
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import mean_request_size_row

_QD, _NJ, _WR = _F["queue_depth"], _F["numjobs"], _F["write_ratio"]
_RANDOM, _SIZE = _F["randomness"], _F["request_size"]
RowAnswer = dict[str, tuple[float, float, float, bool, str]]
"""Per metric: (value, lower, upper, extrapolated, scope name) of one workload."""


@dataclass
class _RowState:
    """Per-call state of one single-workload prediction."""

    models: ModelSet
    asked: list[float]  # the workload asked for: its region and range flags
    features: RowFeatures  # of the workload the models are evaluated at
    ladder: LadderFeatures | None  # the same at the measured depths it needs
    code: int
    model: str
    cache: dict[tuple[str, str, bool], np.ndarray] = field(default_factory=dict)
    done: dict[str, tuple[np.ndarray, float, bool, str]] = field(default_factory=dict)


def predict_row(models: ModelSet, row: list[float], wanted: tuple[str, ...], model: str) -> RowAnswer:
    """The ``wanted`` metrics (checked) of one workload (a list of the workload fields).

    The models run on one feature row, and the load-law metrics on the few rows of the
    measured depths up to the workload's (one call per model); only the metrics the
    wanted ones depend on through the laws are computed.
    """
    lim = models.row_limits
    code = int(region_code(row[_WR], row[_RANDOM], row[_SIZE]))
    if lim is None:  # a model saved before the physics limits were recorded: no laws
        st = _RowState(models, row, RowFeatures(row), None, code, model)
        out = {}
        for metric in wanted:
            v, q, extrap, scope = _metric_row(metric, st, False)
            value = max(float(v[-1]), 0.0)
            out[metric] = (value, value * math.exp(-q), value * math.exp(q), extrap, scope)
        return out
    stretch = stretch_row(row, lim)
    ev = stretch.row
    own = RowFeatures(ev)
    at = ladder_position(lim.log_depths, ev[_QD]) if lim.depths else (0, 0, 0.0)
    depths = lim.depths[: ladder_rows(at)] if lim.depths else []
    if depths == [ev[_QD]]:
        # at the smallest measured depth the envelope is the workload's own value (up to
        # rounding: the matrix path divides by the load and multiplies back)
        depths = []
    st = _RowState(models, row, own, LadderFeatures(own, depths, at) if depths else None, code, model)
    raw = {}
    values = {}
    for metric in needed_metrics(wanted, models.metrics):
        on_ladder = metric in LOAD_LAWS
        raw[metric] = _metric_row(metric, st, on_ladder)
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
        q = widen(q, stretch.distance)
        # a load beyond the measured one can hide inside each field's own range
        extrap = extrap or stretch.distance > 0.0
        out[metric] = (value, value * math.exp(-q), value * math.exp(q), extrap, scope)
    return out


def _metric_row(metric: str, st: _RowState, on_ladder: bool) -> tuple[np.ndarray, float, bool, str]:
    """The model's (values, q, extrapolated, scope) of one metric before the laws.

    ``values`` ends with the workload's own value; on the ladder the values at the
    measured depths come first.
    """
    done = st.done.get(metric)
    if done is not None and (not on_ladder or len(done[0]) > 1):
        return done
    specs = st.models.specs
    spec = specs[metric]
    base = specs["iops"] if spec.mode == "derived" else spec
    scope = base.scope_for(st.code, st.model, st.models.device, metric)
    sm, own = base.scopes[scope], spec.scopes.get(scope)
    source = "iops" if spec.mode == "derived" else metric
    value = _scope_values(sm, source, scope, st, on_ladder)
    q = own.q if own is not None else math.nan
    extrap = bool(st.models.no_data[st.code]) or sm.outside_row(st.asked)
    if spec.mode == "derived":
        factor = own.scale if own is not None else 1.0
        ev = st.features.row
        depths = st.ladder.depths if on_ladder and st.ladder else [ev[_QD]]
        loads = np.array([d * ev[_NJ] for d in depths])
        value = derive_from_iops(metric, value, mean_request_size_row(ev), loads) * factor
    elif spec.mode in MEAN_MODES:
        mean = _metric_row("latency_mean_us", st, False)
        factor = mean[0][-1] if spec.mean_power == 1.0 else mean[0][-1] ** spec.mean_power
        value, extrap = value * factor, extrap or mean[2]
    st.done[metric] = (value, q, extrap, scope)
    return st.done[metric]


def _scope_values(sm: ScopeModel, source: str, scope: str, st: _RowState, on_ladder: bool) -> np.ndarray:
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


def _ladder_values(sm: ScopeModel, source: str, scope: str, st: _RowState, lad: LadderFeatures) -> Any:
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
