"""A device's trained models, ready to predict: :class:`DeviceModel`.

Per metric a :class:`~modeling.serving.metric_models.MetricSpec` says how it is predicted (its
own estimators, derived from IOPS by physics, or a ratio to the mean latency) with a
global model and, where a region had enough data, one per workload region.

Every prediction carries a split-conformal interval (``value * exp(-+q)``, ``q`` the
quantile of out-of-fold absolute log errors) and an extrapolation flag: set when any
workload field is outside the range the scope's model was trained on, or when the
workload's region had no measurements at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput, NotFound
from modeling.features import LOG_OUTSTANDING_COLUMN, LOG_QD_COLUMN, compute_features
from modeling.one_row import RowLimits, extrapolation_row
from modeling.one_row import LOAD_LAWS, RowsOf, needed_metrics
from modeling.one_row import predict_row as fast_row
from modeling.serving.metric_models import MetricSpec, ScopeModel, derive_metric
from modeling.serving.physics import (
    Ladder,
    PhysicsLimits,
    apply_physics,
    extrapolation,
    ladder,
    needed_rungs,
    settle,
    stretch,
    widen,
)
from modeling.workload import METRICS, REGION_NAMES, SERVED_METRICS, WORKLOAD_FIELDS, Workload
from modeling.workload_matrix import FIELD_INDEX, columns_matrix, region_codes

_QD, _NJ = FIELD_INDEX["queue_depth"], FIELD_INDEX["numjobs"]


@dataclass(frozen=True)
class MetricPrediction:
    """One predicted metric with its interval, extrapolation flag and the model used."""

    value: float
    lower: float | None
    upper: float | None
    extrapolated: bool
    model: str
    extrapolation: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """Predictions of several metrics for one workload on one device."""

    device: str
    model_version: str
    predictions: dict[str, MetricPrediction]
    extrapolation: dict[str, float] = field(default_factory=dict)
    """Per workload field outside the measured range, how many times beyond it."""


class DeviceModel:
    """All trained models of one device version; cheap, thread-safe prediction."""

    def __init__(
        self,
        device: str,
        version: str,
        specs: dict[str, MetricSpec],
        data_regions: frozenset[str],
        manifest: dict[str, Any] | None = None,
        limits: PhysicsLimits | None = None,
    ) -> None:
        self.device = device
        self.version = version
        self.specs = specs
        self.metrics = tuple(m for m in SERVED_METRICS if m in specs)
        self.limits = limits  # None for models saved before the physics limits were recorded
        self._row_limits: tuple[PhysicsLimits | None, RowLimits | None] = (None, None)
        self.data_regions = data_regions
        self.manifest = manifest or {}
        self._data_region_mask = np.array([r in data_regions for r in REGION_NAMES])
        self._no_data = [r not in data_regions for r in REGION_NAMES]
        # preload: every table is built once here, never per call
        for spec in specs.values():
            for sm in spec.scopes.values():
                if not sm.runners:
                    sm.compile()

    # -- public API ----------------------------------------------------------------------

    def predict_one(
        self, workload: Workload, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Prediction:
        """Predict the metrics of one workload."""
        row = [float(getattr(workload, f)) for f in WORKLOAD_FIELDS]
        far = extrapolation_row(row, self.row_limits)
        preds = {
            metric: MetricPrediction(
                value=value,
                lower=None if math.isnan(lower) else lower,
                upper=None if math.isnan(upper) else upper,
                extrapolated=extrap,
                model=scope,
                extrapolation=far if extrap else {},
            )
            for metric, (value, lower, upper, extrap, scope) in self.predict_row(row, metrics, model).items()
        }
        return Prediction(self.device, self.version, preds, far)

    @property
    def row_limits(self) -> RowLimits | None:
        """:attr:`limits` in plain floats, for the one-row path (rebuilt when they change)."""
        src, row = self._row_limits
        if src is not self.limits:
            row = None if self.limits is None else self.limits.row_limits()
            self._row_limits = (self.limits, row)
        return row

    def extrapolation(self, w: np.ndarray) -> list[dict[str, float]]:
        """Per workload, ``{field: factor}`` for each field outside the measured range.

        See :func:`modeling.serving.physics.extrapolation`.
        """
        return extrapolation(w, self.limits)

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame:
        """Vectorised batch prediction: pred_<m>, pred_<m>_lower/_upper, <m>_extrapolated, <m>_model."""
        out = self.predict_columns({c: df[c] for c in df.columns}, metrics, model)
        cols: dict[str, Any] = {}
        for metric, (value, lower, upper, extrap, scope) in out.items():
            cols[f"pred_{metric}"] = value
            cols[f"pred_{metric}_lower"] = lower
            cols[f"pred_{metric}_upper"] = upper
            cols[f"{metric}_extrapolated"] = extrap
            cols[f"{metric}_model"] = scope
        return pd.DataFrame(cols, index=df.index)

    def predict_columns(
        self, columns: Mapping[str, Any], metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`predict_matrix` of workloads given as columns by field name (NaN: left out).

        The four basic fields are required; the others default as in :class:`Workload`.
        Every value is checked against the workload limits (:func:`columns_matrix`).
        """
        return self.predict_matrix(columns_matrix(columns), metrics, model)

    # -- core ----------------------------------------------------------------------------

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per metric: (value, lower, upper, extrapolated, scope name) arrays for a workload matrix."""
        wanted = self._check_request(metrics, model)
        st = stretch(w, self.limits)
        codes = region_codes(w)
        features = _Features(st.w_eval)
        ctx = _Context(st.w_eval, w, codes, features, model)
        ctx.no_data = ~self._data_region_mask[codes]
        # the load-bound metrics always (the laws tie them together), a further percentile
        # only when it is asked for or orders one that is (anchored on p99)
        need = set(needed_metrics(wanted, self.metrics))
        raw = {m: self._predict_metric(m, ctx) for m in self.metrics if m in METRICS or m in need}
        lad = ladder(st.w_eval, self.limits)
        own = {m: np.asarray(r[0], dtype=np.float64) for m, r in raw.items()}
        values = settle(own, self._rungs(lad, ctx, features, own), lad, st.w_eval)
        apply_physics(values, w, st, self.limits)
        out = {}
        for metric in wanted:
            value = np.maximum(values[metric], 0.0)
            q = widen(raw[metric][1], st.distance)
            # a load beyond the measured one can hide inside each field's own range
            extrap = raw[metric][2] | (st.distance > 0.0)
            out[metric] = (value, value * np.exp(-q), value * np.exp(q), extrap, raw[metric][3])
        return out

    def _rungs(
        self, lad: Ladder | None, ctx: _Context, own: _Features, values: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The load-bound metrics with their own estimators, at the ladder's rung rows.

        The derived ones (bandwidth, Little's law) follow IOPS in :func:`settle`, so for
        most devices this is one model on the few rungs below each workload; and where
        the model has cheap bounds, only on the rungs that can set the envelope
        (:func:`needed_rungs`; the others are infinite, on the side that never sets it).
        """
        if lad is None:
            return {}
        direct = [m for m in LOAD_LAWS if m in self.specs and self.specs[m].mode == "direct"]
        if lad.empty or not direct:
            return {m: np.zeros(0) for m in direct}
        w = ctx.w[lad.owner]
        w[:, _QD] = lad.depths[lad.rung]
        rctx = _Context(w, ctx.asked[lad.owner], ctx.codes[lad.owner], _RungFeatures(own, lad), ctx.model)
        rctx.no_data = ctx.no_data[lad.owner]
        out = {}
        for m in direct:
            bounds = self._bounds(m, rctx)
            if bounds is None:
                out[m] = np.asarray(self._predict_metric(m, rctx)[0], dtype=np.float64)
                continue
            rows = np.flatnonzero(needed_rungs(m, lad, ctx.w, values[m], *bounds))
            out[m] = np.full(len(w), -np.inf if m == "latency_mean_us" else np.inf)
            if len(rows):
                some = RowsOf(rctx.features, rows)
                sub = _Context(w[rows], rctx.asked[rows], rctx.codes[rows], some, ctx.model)
                sub.no_data = rctx.no_data[rows]
                out[m][rows] = self._predict_metric(m, sub)[0]
        return out

    def _bounds(self, metric: str, ctx: _Context) -> tuple[np.ndarray, np.ndarray] | None:
        """Cheap bounds on a direct metric's model value at ``ctx.w`` (``ScopeModel.bounds``).

        Rows whose scope model has no bounds get (0, inf); None when no row has any.
        """
        spec = self.specs[metric]
        n = len(ctx.w)
        lo, hi = np.zeros(n), np.full(n, np.inf)
        found = False
        for scope, rows in self._scope_rows(spec, ctx.codes, ctx.model, metric).items():
            b = ctx.bounds(spec.scopes[scope], None if isinstance(rows, slice) else rows)
            if b is not None:
                lo[rows], hi[rows] = b
                found = True
        return (lo, hi) if found else None

    def _predict_metric(self, metric: str, ctx: _Context) -> tuple[np.ndarray, Any, np.ndarray, np.ndarray]:
        """The model's (value, q, extrapolated, scope) of one metric at ``ctx.w``, before the laws."""
        if metric in ctx.done:
            return ctx.done[metric]
        w = ctx.w
        n = len(w)
        spec = self.specs[metric]
        base = self.specs["iops"] if spec.mode == "derived" else spec
        scope_of_row = self._scope_rows(base, ctx.codes, ctx.model, metric)
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
        elif spec.mode == "ratio":
            # the model predicts the ratio to the mean latency (tail / mean)
            mean, _, mean_extrap, _ = self._predict_metric("latency_mean_us", ctx)
            value = value * mean
            extrap = extrap | mean_extrap
        ctx.done[metric] = (value, q, extrap, names)
        return ctx.done[metric]

    def predict_row(
        self, row: list[float], metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[float, float, float, bool, str]]:
        """:meth:`predict_matrix` of one workload (a list of the 9 fields), in plain floats.

        The one-row twin (:func:`modeling.one_row.predict_row`): the same numbers without
        the matrix path's arrays, which cost more than the models for a single workload.
        """
        return fast_row(self, row, metrics, model)

    def _no_data_of(self, code: int) -> bool:
        """Whether region ``code`` had no measurements at all (its answers are extrapolated)."""
        return self._no_data[code]

    def _check_request(self, metrics: Sequence[str] | None, model: str) -> tuple[str, ...]:
        if model not in ("auto", "global") and model not in REGION_NAMES:
            raise InvalidInput(
                f"unknown model {model!r}: use auto, global or one of {', '.join(REGION_NAMES)}"
            )
        if metrics is None:
            return self.metrics
        unknown = [m for m in metrics if m not in self.specs]
        if unknown:
            raise InvalidInput(f"unknown metric(s) {unknown}; known: {', '.join(self.metrics)}")
        return tuple(metrics)

    def _scope_for(self, base: MetricSpec, code: int, model: str, metric: str) -> str:
        """The scope model that answers for workloads of region ``code``."""
        if model == "global" or (base.mode == "ratio" and model not in base.scopes):
            # a ratio model exists only globally; the answer names the model it used
            return "global"
        if model != "auto":
            if model not in base.scopes:
                raise NotFound(
                    f"device {self.device!r} has no {model!r} model for {metric} (too few points there)"
                )
            return model
        region = REGION_NAMES[code]
        return region if region in base.auto_regions else "global"

    def _scope_rows(self, base: MetricSpec, codes: np.ndarray, model: str, metric: str) -> dict[str, Any]:
        """Rows per scope model (a slice when one model answers for all)."""
        n = len(codes)
        by_scope: dict[str, list[int]] = {}
        # on a micro-batch's few rows a set of plain ints is cheaper than counting; on a big
        # batch counting the (eight) codes is ~10x cheaper than np.unique's sort
        if not n:
            present = [0]
        elif n <= 256:
            present = sorted(set(codes.tolist()))
        else:
            present = np.flatnonzero(np.bincount(codes, minlength=len(REGION_NAMES))).tolist()
        for code in present:
            by_scope.setdefault(self._scope_for(base, code, model, metric), []).append(code)
        if len(by_scope) == 1:
            return {next(iter(by_scope)): slice(0, n)}
        return {scope: np.flatnonzero(np.isin(codes, group)) for scope, group in by_scope.items()}


class _Features:
    """The feature matrices of a workload matrix, computed once each, when first needed."""

    def __init__(self, w: np.ndarray) -> None:
        self.w = w
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        matrix = self.sets.get(feature_set)
        if matrix is None:
            matrix = self.sets[feature_set] = compute_features(self.w, feature_set)
        return matrix


class _RungFeatures:
    """The feature matrices of a ladder's rung rows, from the workloads' own.

    A rung differs from its workload only in the queue depth, so its rows are the
    workload's features with the load columns replaced (as in the one-row twin,
    :class:`modeling.one_row._LadderFeatures`), not computed again from the workloads.
    """

    def __init__(self, own: _Features, lad: Ladder) -> None:
        self.own = own
        self.lad = lad
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        matrix = self.sets.get(feature_set)
        if matrix is None:
            lad = self.lad
            matrix = self.own[feature_set][lad.owner]
            depth = lad.depths[lad.rung]
            matrix[:, LOG_QD_COLUMN] = np.log2(depth)
            if feature_set == "extended":
                matrix[:, LOG_OUTSTANDING_COLUMN] = np.log2(depth * self.own.w[lad.owner, _NJ])
            self.sets[feature_set] = matrix
        return matrix


@dataclass
class _Context:
    """Per-call state of one batch prediction."""

    w: np.ndarray  # the workloads the models are evaluated at (see physics.stretch)
    asked: np.ndarray  # the workloads asked for: the extrapolation flag is about these
    codes: np.ndarray
    features: _Features | _RungFeatures | RowsOf
    model: str
    no_data: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cache: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    done: dict[str, Any] = field(default_factory=dict)
    ranges: dict[int, np.ndarray] = field(default_factory=dict)

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
