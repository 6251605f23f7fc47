"""The matrix path: a batch of workloads (an ``(n, 9)`` workload matrix), vectorised.

Per metric the scope models answer for their rows (:meth:`MetricSpec.scope_rows`), the
load-bound metrics are read off the ladder's envelope (:mod:`modeling.serving.physics.ladder`),
and the laws of :mod:`modeling.serving.physics` extend and cap the answers.  It reads the
device's models only through their public state
(:class:`~modeling.serving.metric_models.ModelSet`); the single-row path
(:mod:`modeling.serving.row_path`) answers the same numbers for one workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modeling.serving.physics.extrapolation import stretch, widen
from modeling.serving.feature_lookup import FeatureLookup, RowsOf, RungFeatures, WorkloadFeatures
from modeling.serving.physics.ladder import LOAD_LAWS, Ladder, ladder, needed_rungs, settle
from modeling.serving.metric_models import MEAN_MODES, ModelSet, ScopeModel, derive_metric
from modeling.serving.physics.laws import apply_physics, needed_metrics
from modeling.workload import METRICS
from modeling.workload_matrix import FIELD_INDEX, region_codes

_QD = FIELD_INDEX["queue_depth"]
MatrixAnswer = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
"""Per metric: (value, lower, upper, extrapolated, scope name) arrays, one entry per workload."""


def predict_matrix(models: ModelSet, w: np.ndarray, wanted: tuple[str, ...], model: str) -> MatrixAnswer:
    """The ``wanted`` metrics (checked) of every workload of the matrix ``w``."""
    st = stretch(w, models.limits)
    codes = region_codes(w)
    features = WorkloadFeatures(st.w_eval)
    ctx = _Context(models, st.w_eval, w, codes, features, model)
    ctx.no_data = models.no_data[codes]
    # the load-bound metrics always (the laws tie them together), a further percentile
    # only when it is asked for or orders one that is (anchored on p99)
    need = set(needed_metrics(wanted, models.metrics))
    raw = {m: _predict_metric(m, ctx) for m in models.metrics if m in METRICS or m in need}
    lad = ladder(st.w_eval, models.limits)
    own = {m: np.asarray(r[0], dtype=np.float64) for m, r in raw.items()}
    values = settle(own, rung_values(lad, ctx, features, own), lad, st.w_eval)
    apply_physics(values, w, st, models.limits)
    out = {}
    for metric in wanted:
        value = np.maximum(values[metric], 0.0)
        q = widen(raw[metric][1], st.distance)
        # a load beyond the measured one can hide inside each field's own range
        extrap = raw[metric][2] | (st.distance > 0.0)
        out[metric] = (value, value * np.exp(-q), value * np.exp(q), extrap, raw[metric][3])
    return out


def rung_values(
    lad: Ladder | None, ctx: _Context, features: WorkloadFeatures, values: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The load-bound metrics with their own estimators, at the ladder's rung rows.

    The derived ones (bandwidth, Little's law) follow IOPS in :func:`settle`, so for
    most devices this is one model on the few rungs below each workload; and where
    the model has cheap bounds, only on the rungs that can set the envelope
    (:func:`needed_rungs`; the others are infinite, on the side that never sets it).
    """
    if lad is None:
        return {}
    specs = ctx.models.specs
    direct = [m for m in LOAD_LAWS if m in specs and specs[m].mode == "direct"]
    if lad.empty or not direct:
        return {m: np.zeros(0) for m in direct}
    w = ctx.w[lad.owner]
    w[:, _QD] = lad.depths[lad.rung]
    rctx = ctx.rows(lad.owner, w, RungFeatures(features, lad.owner, lad.depths[lad.rung]))
    out = {}
    for m in direct:
        bounds = _bounds(m, rctx)
        if bounds is None:
            out[m] = np.asarray(_predict_metric(m, rctx)[0], dtype=np.float64)
            continue
        rows = np.flatnonzero(needed_rungs(m, lad, ctx.w, values[m], *bounds))
        out[m] = np.full(len(w), -np.inf if m == "latency_mean_us" else np.inf)
        if len(rows):
            sub = rctx.rows(rows, w[rows], RowsOf(rctx.features, rows))
            out[m][rows] = _predict_metric(m, sub)[0]
    return out


def _bounds(metric: str, ctx: _Context) -> tuple[np.ndarray, np.ndarray] | None:
    """Cheap bounds on a direct metric's model value at ``ctx.w`` (``ScopeModel.bounds``).

    Rows whose scope model has no bounds get (0, inf); None when no row has any.
    """
    spec = ctx.models.specs[metric]
    n = len(ctx.w)
    lo, hi = np.zeros(n), np.full(n, np.inf)
    found = False
    for scope, rows in spec.scope_rows(ctx.codes, ctx.model, ctx.models.device, metric).items():
        b = ctx.bounds(spec.scopes[scope], None if isinstance(rows, slice) else rows)
        if b is not None:
            lo[rows], hi[rows] = b
            found = True
    return (lo, hi) if found else None


def _predict_metric(metric: str, ctx: _Context) -> tuple[np.ndarray, Any, np.ndarray, np.ndarray]:
    """The model's (value, q, extrapolated, scope) of one metric at ``ctx.w``, before the laws."""
    if metric in ctx.done:
        return ctx.done[metric]
    w = ctx.w
    n = len(w)
    specs = ctx.models.specs
    spec = specs[metric]
    base = specs["iops"] if spec.mode == "derived" else spec
    scope_of_row = base.scope_rows(ctx.codes, ctx.model, ctx.models.device, metric)
    source = "iops" if spec.mode == "derived" else metric
    if len(scope_of_row) == 1:  # the common case: one model for every row, no masks
        ((scope, _),) = scope_of_row.items()
        sm, own = base.scopes[scope], spec.scopes.get(scope)
        value = ctx.predict(source, sm)
        q: Any = own.q if own is not None else np.nan
        factor: Any = own.scale if spec.mode == "derived" and own is not None else 1.0
        extrap = ctx.no_data | ctx.outside(sm)
        names = np.empty(n, dtype=object)
        names.fill(scope)  # 20x faster than np.full for an object array
    else:
        value, q, factor = np.empty(n), np.empty(n), np.ones(n)
        extrap = ctx.no_data.copy()
        names = np.empty(n, dtype=object)
        for scope, rows in scope_of_row.items():
            sm, own = base.scopes[scope], spec.scopes.get(scope)
            value[rows] = ctx.predict(source, sm, rows)
            q[rows] = own.q if own is not None else np.nan
            if spec.mode == "derived" and own is not None:
                factor[rows] = own.scale
            extrap[rows] |= ctx.outside(sm, rows)
            names[rows] = scope
    if spec.mode == "derived":
        value = derive_metric(metric, value, w) * factor
    elif spec.mode in MEAN_MODES:
        # the model predicts the ratio to the mean latency (tail / mean), or a blend's share of it
        mean, _, mean_extrap, _ = _predict_metric("latency_mean_us", ctx)
        value = value * (mean if spec.mean_power == 1.0 else mean**spec.mean_power)
        extrap = extrap | mean_extrap
    ctx.done[metric] = (value, q, extrap, names)
    return ctx.done[metric]


@dataclass
class _Context:
    """Per-call state of one batch prediction."""

    models: ModelSet
    w: np.ndarray  # the workloads the models are evaluated at (see extrapolation.stretch)
    asked: np.ndarray  # the workloads asked for: the extrapolation flag is about these
    codes: np.ndarray
    features: FeatureLookup
    model: str
    no_data: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cache: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    done: dict[str, Any] = field(default_factory=dict)
    ranges: dict[int, np.ndarray] = field(default_factory=dict)

    def rows(self, rows: np.ndarray, w: np.ndarray, features: FeatureLookup) -> _Context:
        """A context of some of these rows, evaluated at ``w`` with ``features``."""
        sub = _Context(self.models, w, self.asked[rows], self.codes[rows], features, self.model)
        sub.no_data = self.no_data[rows]
        return sub

    def predict(self, metric: str, sm: ScopeModel, rows: np.ndarray | None = None) -> np.ndarray:
        """A scope model's raw prediction for every row, or for the rows it answers for.

        Each model runs once per call, on its own rows only: a scope's rows are the same
        whichever metric asks (they follow the base metric's scope choice).
        """
        key = (metric, sm.scope)
        if key not in self.cache:
            self.cache[key] = sm.predict(self.features if rows is None else RowsOf(self.features, rows))
        return self.cache[key]

    def bounds(self, sm: ScopeModel, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`ScopeModel.bounds` at every row, or at the rows the scope answers for."""
        return sm.bounds(self.features if rows is None else RowsOf(self.features, rows))

    def outside(self, sm: ScopeModel, rows: np.ndarray | None = None) -> np.ndarray:
        """Rows with a field outside the range the scope's model was trained on (of ``rows``)."""
        hit = self.ranges.get(id(sm))
        if hit is None:
            hit = self.ranges[id(sm)] = sm.outside(self.asked if rows is None else self.asked[rows])
        return hit
