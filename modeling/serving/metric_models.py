"""How one metric is predicted: :class:`MetricSpec`, made of :class:`ScopeModel` per scope.

A metric has a ``global`` scope model and, where a region had enough data, one per
workload region.  It is either ``direct`` (its own estimators), ``derived`` from the IOPS
prediction by physics (:func:`derive_metric`: bandwidth = IOPS x mean request size, and
Little's law, mean latency = outstanding I/O / IOPS), a ``ratio`` (tail latency as a
learned multiple of the mean latency), or a ``blend`` (the tail guard's geometric blend of a
ratio model and a direct model, :mod:`modeling.training.tail_guard`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from modeling.errors import NoData, NotFound
from modeling.estimators.base import RegressorBase
from modeling.estimators.load_gated import BOUND_MARGIN
from modeling.serving.feature_lookup import FeatureLookup
from modeling.serving.physics.limits import PhysicsLimits, RowLimits
from modeling.workload import MIB, PERCENTILE_ORDER, REGION_NAMES
from modeling.workload_matrix import mean_request_size, outstanding_io

_COMPILING = threading.Lock()
"""Held while a served scope model builds its lookup tables (once, on its first prediction)."""


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
    # the trained ranges widened by a rounding margin, as lists (see outside_row)
    _bounds: tuple[list[float], list[float]] | None = field(default=None, repr=False)
    # a served model's scope (DeviceModel sets it): its lookup tables are built on its first
    # prediction; a scope in training (cross-validation) predicts with its estimators as they are
    served: bool = field(default=False, repr=False)

    def compile(self) -> None:
        """Prepare lookup tables (see :mod:`modeling.estimators.compiled`) and bounds for fast prediction."""
        from modeling.estimators.compiled import compile_estimator

        self.runners = [(fs, compile_estimator(est) or est) for fs, est in self.members]
        self._bounds = ((self.lo - 1e-9).tolist(), (self.hi + 1e-9).tolist())

    def prepared(self) -> list[tuple[str, Any]]:
        """What predicts: the lookup tables of a served scope (built now if this is its first
        prediction), else the estimators themselves.

        A served model's tables are built on first use, not when it is loaded (unless its
        registry builds them all, as a server's does): a capacity question reads 2 of a
        device's 11, and building them all took 11 of a cold device's 40 ms (the same tables
        either way, so the same answers: tests/modeling/test_lazy_tables.py).
        """
        if self.runners or not self.served:
            return self.runners or self.members
        with _COMPILING:  # one thread builds them; another asking meanwhile waits for them
            if not self.runners:
                self.compile()
        return self.runners

    def outside(self, w: np.ndarray) -> np.ndarray:
        """Rows of a workload matrix with a field outside the range this model was trained on."""
        return np.any((w < self.lo - 1e-9) | (w > self.hi + 1e-9), axis=1)

    def outside_row(self, row: list[float]) -> bool:
        """:meth:`outside` of one workload, in plain floats."""
        if self._bounds is None:
            self._bounds = ((self.lo - 1e-9).tolist(), (self.hi + 1e-9).tolist())
        lo, hi = self._bounds
        return any(v < a or v > b for v, a, b in zip(row, lo, hi, strict=True))

    @property
    def estimator(self) -> RegressorBase | None:
        """The first (usually only) estimator, if any."""
        return self.members[0][1] if self.members else None

    def predict(self, features: FeatureLookup) -> np.ndarray:
        """Raw prediction (scaled) from the feature matrices by feature set."""
        runners = self.prepared()
        if len(runners) == 1:
            fs, est = runners[0]
            return est.predict_fast(features[fs]) * self.scale
        weights = self.weights or [1.0 / len(runners)] * len(runners)
        total: Any = 0.0
        for (fs, est), weight in zip(runners, weights, strict=True):
            total = total + weight * np.log(np.maximum(est.predict_fast(features[fs]), 1e-12))
        return np.exp(total) * self.scale

    def bounds(self, features: FeatureLookup) -> tuple[np.ndarray, np.ndarray] | None:
        """Cheap lower and upper bounds of :meth:`predict`, or None when a member has none.

        Only estimators whose prediction is a blend of cheaper parts offer bounds (the
        load-gated model: its two lookup tables, without its Gaussian process); the
        serving path uses them to skip ladder rungs that cannot matter.
        """
        runners = self.prepared()
        if not all(hasattr(est, "bounds") for _, est in runners):
            return None
        if len(runners) == 1:
            fs, est = runners[0]
            lo, hi = est.bounds(features[fs])
            return lo * self.scale, hi * self.scale
        weights = self.weights or [1.0 / len(runners)] * len(runners)
        low: Any = 0.0
        high: Any = 0.0
        for (fs, est), weight in zip(runners, weights, strict=True):
            lo, hi = est.bounds(features[fs])
            low = low + weight * np.log(np.maximum(lo, 1e-12))
            high = high + weight * np.log(np.maximum(hi, 1e-12))
        # widened against the blend's own rounding, as each member's bounds are
        scale = self.scale
        return np.exp(low) * scale * (1.0 - BOUND_MARGIN), np.exp(high) * scale * (1.0 + BOUND_MARGIN)


@dataclass
class MetricSpec:
    """How one metric is predicted."""

    metric: str
    mode: str  # "direct", "derived" (from IOPS), "ratio" (tail latency = ratio x mean latency) or "blend"
    scopes: dict[str, ScopeModel]
    auto_regions: frozenset[str] = frozenset()
    mean_power: float = 1.0
    """A ``ratio`` or ``blend``: the answer is the scope model's value x the mean latency to this power.

    A ratio's is 1.  A blend's global scope holds the members of a ratio model (weighted
    ``a``) and of a direct model (weighted ``1 - a``), so its value is ``(ratio)^a x
    (direct)^(1 - a)`` and the answer ``(ratio x mean)^a x (direct)^(1 - a)``: its power is ``a``."""
    ratio_members: int | None = None
    """A blend: how many of its global scope's leading members predict the ratio to the mean latency
    (the others the percentile itself).  None: every member predicts the scope's own target."""

    def member_target(self, i: int, y: np.ndarray, mean: np.ndarray | None) -> np.ndarray:
        """What member ``i`` of the global scope learns, from the percentile ``y`` and the mean latency.

        A direct model's members the metric itself; a ratio's the ratio to the mean; a blend's
        ratio members the ratio and its direct members the percentile (a scope whose members
        all learn the blend's share, as a transfer's, the percentile over the mean to its power).
        """
        if self.mode not in MEAN_MODES:
            return y
        if mean is None:
            raise NoData(f"{self.metric} is learned as a ratio to the mean latency: the rows have none")
        if self.ratio_members is None:
            return y / (mean if self.mean_power == 1.0 else mean**self.mean_power)
        return y / mean if i < self.ratio_members else y

    def scope_for(self, code: int, model: str, device: str, metric: str) -> str:
        """The scope model that answers for workloads of region ``code`` under the choice ``model``.

        ``auto`` takes the region's model where it has one, else ``global``; a region named
        outright must have its model (``NotFound`` names ``device`` and the ``metric``
        asked, which may be derived from this one).  A ratio, and a latency percentile with
        no region models at all (the tail guard serves its plain model globally,
        :mod:`modeling.training.tail_guard`), answer every region with the global model.
        """
        global_only = self.mode in MEAN_MODES or (len(self.scopes) == 1 and self.metric in PERCENTILE_ORDER)
        if model == "global" or (model not in self.scopes and global_only):
            # a global-only model answers every region; the answer names the model it used
            return "global"
        if model != "auto":
            if model not in self.scopes:
                raise NotFound(
                    f"device {device!r} has no {model!r} model for {metric} (too few points there)"
                )
            return model
        region = REGION_NAMES[code]
        return region if region in self.auto_regions else "global"

    def scope_rows(self, codes: np.ndarray, model: str, device: str, metric: str) -> dict[str, Any]:
        """:meth:`scope_for` of many workloads: their rows per scope model (a slice when one answers all)."""
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
            by_scope.setdefault(self.scope_for(code, model, device, metric), []).append(code)
        if len(by_scope) == 1:
            return {next(iter(by_scope)): slice(0, n)}
        return {scope: np.flatnonzero(np.isin(codes, group)) for scope, group in by_scope.items()}


def derive_metric(metric: str, iops: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A metric from predicted IOPS at workload matrix ``w`` by physics (bandwidth law, Little's law)."""
    return derive_from_iops(metric, iops, mean_request_size(w), outstanding_io(w))


def derive_from_iops(metric: str, iops: np.ndarray, size: Any, oio: Any) -> np.ndarray:
    """:func:`derive_metric` at mean request size(s) ``size`` and outstanding I/O ``oio``.

    The matrix path gives one of each per workload, the single-row path one workload's
    (a float) or its ladder's (several loads).
    """
    if metric == "bandwidth_mib_s":
        return iops * size / MIB
    if metric == "latency_mean_us":
        return oio / np.maximum(iops, 1e-9) * 1e6
    raise ValueError(f"{metric} cannot be derived from IOPS")


MEAN_MODES = ("ratio", "blend")
"""Modes whose answer is the scope model's value times a power of the mean latency (global only)."""

DERIVABLE = ("bandwidth_mib_s", "latency_mean_us")
"""Metrics that :func:`derive_metric` can derive from IOPS."""


class ModelSet(Protocol):
    """What the prediction paths read of a device's models (a ``DeviceModel``'s public state)."""

    @property
    def device(self) -> str: ...

    @property
    def specs(self) -> Mapping[str, MetricSpec]: ...

    @property
    def metrics(self) -> tuple[str, ...]: ...  # every metric the device predicts, in served order

    @property
    def limits(self) -> PhysicsLimits | None: ...  # None: a model saved before they were recorded

    @property
    def row_limits(self) -> RowLimits | None: ...  # the limits in plain floats

    @property
    def no_data(self) -> np.ndarray: ...  # per region code, True where nothing was measured
