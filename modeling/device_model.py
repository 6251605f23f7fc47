"""A device's trained models, ready to predict: :class:`DeviceModel`.

Per metric a :class:`MetricSpec` holds a global :class:`ScopeModel` and, where a region
had enough data, one per workload region.  A metric is either ``direct`` (its own
estimator) or ``derived`` from the IOPS prediction by physics: bandwidth = IOPS x mean
request size, and Little's law, mean latency = outstanding I/O / IOPS.

Every prediction carries a split-conformal interval (``value * exp(-+q)``, ``q`` the
quantile of out-of-fold absolute log errors) and an extrapolation flag: set when any
workload field is outside the range the scope's model was trained on, or when the
workload's region had no measurements at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput, NotFound
from modeling.estimator_base import RegressorBase
from modeling.features import FEATURE_SETS, compute_features, fill_defaults, mean_request_size, outstanding_io
from modeling.workload import MAX_REQUEST_SIZE, METRICS, MIB, REGION_NAMES, WORKLOAD_FIELDS, Workload

_F = {name: i for i, name in enumerate(WORKLOAD_FIELDS)}
# (low, high, integer?) limits of each field, as the Workload type enforces them
_LIMITS = {
    "write_ratio": (0.0, 1.0),
    "queue_depth": (1, 4096),
    "request_size": (512, MAX_REQUEST_SIZE),
    "randomness": (0.0, 1.0),
    "numjobs": (1, 1024),
    "read_size": (512, MAX_REQUEST_SIZE),
    "write_size": (512, MAX_REQUEST_SIZE),
    "read_randomness": (0.0, 1.0),
    "write_randomness": (0.0, 1.0),
}


@dataclass
class ScopeModel:
    """The model of one metric on one scope (``global`` or a region)."""

    scope: str
    # (feature set, fitted estimator) pairs; their predictions are blended on the log
    # scale with ``weights`` (equal when None).  Empty when the metric is derived from IOPS.
    members: list[tuple[str, RegressorBase]]
    q: float  # conformal half-width on the log scale; NaN when not calibrated
    lo: np.ndarray  # per workload field: smallest value trained on
    hi: np.ndarray
    cv: dict[str, Any] = field(default_factory=dict)
    scale: float = 1.0  # multiplier that minimised the out-of-fold relative error
    weights: list[float] | None = None

    runners: list[tuple[str, Any]] = field(default_factory=list, repr=False)

    def compile(self) -> None:
        """Prepare lookup tables (see :mod:`modeling.compiled`) for fast prediction."""
        from modeling.compiled import compile_estimator

        self.runners = [(fs, compile_estimator(est) or est) for fs, est in self.members]

    @property
    def estimator(self) -> RegressorBase | None:
        """The first (usually only) estimator, if any."""
        return self.members[0][1] if self.members else None

    def predict(self, features: dict[str, np.ndarray]) -> np.ndarray:
        """Raw prediction (scaled) from the feature matrices by feature set."""
        runners = self.runners or self.members
        if len(runners) == 1:
            fs, est = runners[0]
            return est.predict_fast(features[fs]) * self.scale
        weights = self.weights or [1.0 / len(runners)] * len(runners)
        total = np.zeros(len(next(iter(features.values()))))
        for (fs, est), weight in zip(runners, weights, strict=True):
            total += weight * np.log(np.maximum(est.predict_fast(features[fs]), 1e-12))
        return np.exp(total) * self.scale


@dataclass
class MetricSpec:
    """How one metric is predicted."""

    metric: str
    mode: str  # "direct", "derived" (from IOPS) or "ratio" (tail latency = ratio x mean latency)
    scopes: dict[str, ScopeModel]
    auto_regions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class MetricPrediction:
    """One predicted metric with its interval, extrapolation flag and the model used."""

    value: float
    lower: float | None
    upper: float | None
    extrapolated: bool
    model: str


@dataclass(frozen=True)
class Prediction:
    """Predictions of several metrics for one workload on one device."""

    device: str
    model_version: str
    predictions: dict[str, MetricPrediction]


def region_codes(w: np.ndarray) -> np.ndarray:
    """Index into REGION_NAMES of each row of a workload matrix."""
    write = w[:, _F["write_ratio"]] > 0.5
    seq = w[:, _F["randomness"]] < 0.5
    large = w[:, _F["request_size"]] > 32 * 1024
    return write.astype(np.int64) * 4 + seq.astype(np.int64) * 2 + large.astype(np.int64)


def check_matrix(w: np.ndarray) -> None:
    """Raise ``InvalidInput`` naming the field and row of the first invalid value."""
    for name, (lo, hi) in _LIMITS.items():
        col = w[:, _F[name]]
        bad = ~((col >= lo) & (col <= hi))
        if name in ("queue_depth", "numjobs"):
            bad |= col != np.round(col)
        elif name.endswith("size"):
            bad |= np.mod(col, 512) != 0
        if bad.any():
            row = int(np.argmax(bad))
            raise InvalidInput(
                f"invalid workload in row {row + 1}: {name}={col[row]!r} (allowed {lo}..{hi})",
                details={"field": name, "row": row},
            )


class DeviceModel:
    """All trained models of one device version; cheap, thread-safe prediction."""

    def __init__(
        self,
        device: str,
        version: str,
        specs: dict[str, MetricSpec],
        data_regions: frozenset[str],
        manifest: dict[str, Any] | None = None,
    ) -> None:
        self.device = device
        self.version = version
        self.specs = specs
        self.metrics = tuple(m for m in METRICS if m in specs)
        self.data_regions = data_regions
        self.manifest = manifest or {}
        self._data_region_mask = np.array([r in data_regions for r in REGION_NAMES])
        # preload: every table is built once here, never per call
        for spec in specs.values():
            for sm in spec.scopes.values():
                if sm.members and not sm.runners:
                    sm.compile()

    # -- public API ----------------------------------------------------------------------

    def predict_one(
        self, workload: Workload, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Prediction:
        """Predict the metrics of one workload."""
        w = np.array([[float(getattr(workload, f)) for f in WORKLOAD_FIELDS]], dtype=np.float64)
        out = self.predict_matrix(w, metrics, model)
        preds = {}
        for metric, (value, lower, upper, extrap, scope) in out.items():
            lo, hi = float(lower[0]), float(upper[0])
            preds[metric] = MetricPrediction(
                value=float(value[0]),
                lower=None if np.isnan(lo) else lo,
                upper=None if np.isnan(hi) else hi,
                extrapolated=bool(extrap[0]),
                model=str(scope[0]),
            )
        return Prediction(device=self.device, model_version=self.version, predictions=preds)

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame:
        """Vectorised batch prediction: pred_<m>, pred_<m>_lower/_upper, <m>_extrapolated, <m>_model."""
        missing = [
            f for f in ("write_ratio", "queue_depth", "request_size", "randomness") if f not in df.columns
        ]
        if missing:
            raise InvalidInput(f"missing workload column(s): {', '.join(missing)}")
        w = np.empty((len(df), len(WORKLOAD_FIELDS)), dtype=np.float64)
        for name, i in _F.items():
            if name not in df.columns:
                w[:, i] = np.nan
                continue
            try:
                w[:, i] = np.asarray(df[name], dtype=np.float64)
            except (TypeError, ValueError):
                raise InvalidInput(
                    f"column {name!r} holds non-numeric values", details={"field": name}
                ) from None
        for name in ("write_ratio", "queue_depth", "request_size", "randomness"):
            gap = np.isnan(w[:, _F[name]])
            if gap.any():
                row = int(np.argmax(gap))
                raise InvalidInput(
                    f"invalid workload in row {row + 1}: {name} is missing", details={"field": name}
                )
        fill_defaults(w)
        check_matrix(w)
        out = self.predict_matrix(w, metrics, model)
        cols: dict[str, Any] = {}
        for metric, (value, lower, upper, extrap, scope) in out.items():
            cols[f"pred_{metric}"] = value
            cols[f"pred_{metric}_lower"] = lower
            cols[f"pred_{metric}_upper"] = upper
            cols[f"{metric}_extrapolated"] = extrap
            cols[f"{metric}_model"] = scope
        return pd.DataFrame(cols, index=df.index)

    # -- core ----------------------------------------------------------------------------

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per metric: (value, lower, upper, extrapolated, scope name) arrays for a workload matrix."""
        wanted = self._check_metrics(metrics)
        if model not in ("auto", "global") and model not in REGION_NAMES:
            raise InvalidInput(
                f"unknown model {model!r}: use auto, global or one of {', '.join(REGION_NAMES)}"
            )
        ctx = _Context(w, region_codes(w), {fs: compute_features(w, fs) for fs in FEATURE_SETS}, model)
        ctx.no_data = ~self._data_region_mask[ctx.codes]
        return {metric: self._predict_metric(metric, ctx) for metric in wanted}

    def _predict_metric(
        self, metric: str, ctx: _Context
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if metric in ctx.done:
            return ctx.done[metric]
        w = ctx.w
        spec = self.specs[metric]
        base = self.specs["iops"] if spec.mode == "derived" else spec
        scope_of_row = self._scope_rows(base, ctx.codes, ctx.model, metric)
        value = np.empty(len(w))
        q = np.empty(len(w))
        extrap = ctx.no_data.copy()
        factor = np.ones(len(w))
        for scope, rows in scope_of_row.items():
            sm = base.scopes[scope]
            key = ("iops" if spec.mode == "derived" else metric, scope)
            if key not in ctx.cache:
                ctx.cache[key] = sm.predict(ctx.features)
            value[rows] = ctx.cache[key][rows]
            own = spec.scopes.get(scope)
            q[rows] = own.q if own is not None else np.nan
            if spec.mode == "derived" and own is not None:
                factor[rows] = own.scale
            wr = w[rows]
            extrap[rows] |= np.any((wr < sm.lo - 1e-9) | (wr > sm.hi + 1e-9), axis=1)
        if spec.mode == "derived":
            value = _derive(metric, value, w) * factor
        elif spec.mode == "ratio":
            # the model predicts the ratio to the mean latency (tail / mean)
            mean, _, _, mean_extrap, _ = self._predict_metric("latency_mean_us", ctx)
            value = value * mean
            extrap |= mean_extrap
        value = np.maximum(value, 0.0)
        names = np.empty(len(w), dtype=object)
        for scope, rows in scope_of_row.items():
            names[rows] = scope
        ctx.done[metric] = (value, value * np.exp(-q), value * np.exp(q), extrap, names)
        return ctx.done[metric]

    def _check_metrics(self, metrics: Sequence[str] | None) -> tuple[str, ...]:
        if metrics is None:
            return self.metrics
        unknown = [m for m in metrics if m not in self.specs]
        if unknown:
            raise InvalidInput(f"unknown metric(s) {unknown}; known: {', '.join(self.metrics)}")
        return tuple(metrics)

    def _scope_rows(self, base: MetricSpec, codes: np.ndarray, model: str, metric: str) -> dict[str, Any]:
        n = len(codes)
        if model == "global" or (base.mode == "ratio" and model not in base.scopes):
            # a ratio model exists only globally; the answer names the model it used
            return {"global": slice(0, n)}
        if model != "auto":
            if model not in base.scopes:
                raise NotFound(
                    f"device {self.device!r} has no {model!r} model for {metric} (too few points there)"
                )
            return {model: slice(0, n)}
        rows: dict[str, Any] = {}
        used = np.zeros(n, dtype=bool)
        for region in base.auto_regions:
            mask = codes == REGION_NAMES.index(region)
            if mask.any():
                rows[region] = np.flatnonzero(mask)
                used |= mask
        if not used.any():
            return {"global": slice(0, n)}
        if not used.all():
            rows["global"] = np.flatnonzero(~used)
        return rows


@dataclass
class _Context:
    """Per-call state of one batch prediction."""

    w: np.ndarray
    codes: np.ndarray
    features: dict[str, np.ndarray]
    model: str
    no_data: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    cache: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    done: dict[str, Any] = field(default_factory=dict)


def _derive(metric: str, iops: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A metric from predicted IOPS by physics (bandwidth law, Little's law)."""
    safe = np.maximum(iops, 1e-9)
    if metric == "bandwidth_mib_s":
        return iops * mean_request_size(w) / MIB
    if metric == "latency_mean_us":
        return outstanding_io(w) / safe * 1e6
    raise ValueError(f"{metric} cannot be derived from IOPS")


DERIVABLE = ("bandwidth_mib_s", "latency_mean_us")
derive_metric = _derive
