"""Trees that extrapolate along the load axis: two boosted models blended by elasticity.

In a closed-loop benchmark (fio keeps ``iodepth`` I/Os in flight per job) throughput and
latency are tied by Little's law, ``IOPS = N / latency`` with ``N = queue_depth x numjobs``
outstanding I/Os.  While a device has spare capacity its latency is flat and IOPS grows
in proportion to ``N``; once it saturates IOPS is flat and latency grows with ``N``.
Trees are piecewise constant, so a tree of log IOPS gets the light-load end of a sweep
wrong (it repeats its neighbour's higher value), and a tree of log latency gets the
saturated end wrong.  Each is right where its target is flat.

:class:`LoadGatedModel` fits both parametrisations of the metric ``y`` --

* ``f(x) ~ ln y`` (right where ``y`` does not depend on load), and
* ``g(x) ~ ln y - ln N`` (right where ``y`` is proportional to load)

-- and blends them with the local elasticity ``e = d ln y / d ln N``, clipped to [0, 1]
and read off a smooth Gaussian process of ``ln y``: ``ln y = (1 - e) f + e (ln N + g)``.
The same formula serves IOPS and bandwidth (e -> 1 at light load) and latencies (e -> 1
under saturation).  On the fio-plot SATA SSDs it cuts the IOPS error of plain boosted
trees by about a fifth (bench/accuracy.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from modeling.estimators.base import RegressorBase
from modeling.estimators.trees import XGBoostModel
from modeling.estimators.gaussian_process import GaussianProcessModel

LN2 = float(np.log(2.0))
BOUND_MARGIN = 1e-9
"""Relative widening of :meth:`LoadGatedModel.bounds` (the blend's rounding is ~1e-15)."""


class LoadGatedModel(RegressorBase):
    """ln y = (1 - e) f(x) + e (ln N + g(x)), e the elasticity of y to outstanding I/O."""

    kind = "load_gated"
    # the blend is defined on the exact log of a positive metric, so no other transform
    log_target = False
    linear_base = False

    def __init__(
        self,
        n_col: int = 0,
        qd_col: int = 0,
        nj_col: int = -1,
        n_estimators: int = 300,
        max_depth: int = 6,
        learning_rate: float = 0.05,
        subsample: float = 0.8,
        step: float = 0.5,
        gate_rows: int = 1000,
        random_state: int = 0,
    ) -> None:
        self.n_col = n_col
        self.qd_col = qd_col
        self.nj_col = nj_col
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.step = step
        self.gate_rows = gate_rows
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags

    def _boosted(self) -> XGBoostModel:
        return XGBoostModel(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            subsample=self.subsample,
            log_target=False,
            random_state=self.random_state,
        )

    def load_shift(self, d: int) -> np.ndarray:
        """The feature change of multiplying outstanding I/O by 2**step (split over depth and jobs)."""
        cols = (self.n_col, self.qd_col)
        if not all(0 <= c < d for c in cols) or self.nj_col >= d or self.nj_col < -1:
            raise ValueError(f"load columns {cols + (self.nj_col,)} do not fit {d} features")
        shift = np.zeros(d)
        shift[self.n_col] += self.step
        if self.qd_col != self.n_col:
            parts = [self.qd_col] + ([self.nj_col] if self.nj_col >= 0 else [])
            for c in parts:
                shift[c] += self.step / len(parts)
        return shift

    def _fit_core(self, X32: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> None:
        if self.step <= 0:
            raise ValueError(f"step must be > 0, got {self.step}")
        if np.any(target <= 0):
            raise ValueError("LoadGatedModel needs a positive target (a performance metric)")
        self.shift_ = self.load_shift(X32.shape[1])
        load = X32[:, self.n_col].astype(np.float64)
        self.load_range_ = np.array([load.min(), load.max()])
        ln_y = np.log(target)
        ln_n = X32[:, self.n_col].astype(np.float64) * LN2
        direct = self._boosted().fit(X32, ln_y)
        per_load = self._boosted().fit(X32, ln_y - ln_n)
        rows = np.arange(len(X32))
        if len(rows) > self.gate_rows:  # the gate only needs the smooth trend: a subsample will do
            rng = np.random.default_rng(self.random_state)
            rows = np.sort(rng.choice(rows, self.gate_rows, replace=False))
        gate = GaussianProcessModel(n_restarts=1, log_target=False, random_state=self.random_state)
        gate.fit(X32[rows], ln_y[rows])
        self.parts_ = {"direct": direct, "per_load": per_load, "gate": gate}

    def elasticity(self, X32: np.ndarray) -> np.ndarray:
        """d ln y / d ln N at each row, from the gate, clipped to [0, 1].

        Read no closer than ``step / 2`` to the ends of the swept load range: at and
        beyond its data a Gaussian process flattens towards its mean, and would report a
        flat trend exactly where the trend must be extrapolated.
        """
        t = X32[:, self.n_col]
        inside = X32 + (np.clip(t, *self.read_range_) - t)[:, None] * self.unit_
        slope = self.parts_["gate"].slope(inside, self.unit_)
        return np.clip(slope / LN2, 0.0, 1.0)

    def prepare(self) -> None:
        """The feature change per unit of log2 N, and where along N the gate is read."""
        lo, hi = self.load_range_
        margin = min(self.step, hi - lo) / 2
        self.unit_ = (self.shift_ / self.step).astype(np.float32)
        self.read_range_ = (np.float32(lo + margin), np.float32(hi - margin))

    def bounds(self, X32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of :meth:`predict_fast` at each row, without the gate.

        The prediction blends ``f`` and ``ln N + g`` with a weight in [0, 1], so it lies
        between their exponentials; the two boosted parts are lookup tables, the gate a
        Gaussian process costing most of a prediction.  Serving uses the bounds to skip
        ladder rungs that cannot set the load envelope (``physics.needed_rungs``).  The
        bounds are widened by :data:`BOUND_MARGIN` against the blend's rounding.
        """
        runners = getattr(self, "runners_", None) or self.parts_
        ln_n = X32[:, self.n_col].astype(np.float64) * LN2
        direct = runners["direct"].predict_fast(X32)
        per_load = runners["per_load"].predict_fast(X32) + ln_n
        base = self.linear_part(X32)
        lo = base + np.exp(np.minimum(direct, per_load))
        hi = base + np.exp(np.maximum(direct, per_load))
        return lo * (1.0 - BOUND_MARGIN), hi * (1.0 + BOUND_MARGIN)

    def predict_core(self, X32: np.ndarray) -> np.ndarray:
        runners = getattr(self, "runners_", None) or self.parts_
        if X32.shape[0] == 1:
            return self._predict_one_row(X32, runners)
        e = self.elasticity(X32)
        ln_n = X32[:, self.n_col].astype(np.float64) * LN2
        direct = runners["direct"].predict_fast(X32)
        per_load = runners["per_load"].predict_fast(X32) + ln_n
        return np.asarray(np.exp((1.0 - e) * direct + e * per_load))

    # -- one row: the service's common case (tests/modeling/test_fast_paths.py) -----------------

    def _elasticity_of_one_row(self, X32: np.ndarray) -> float:
        """Twin of :meth:`elasticity` for one row, in plain floats."""
        t = float(X32[0, self.n_col])
        lo, hi = float(self.read_range_[0]), float(self.read_range_[1])
        if not lo <= t <= hi:  # read the gate at the nearer end of the load range
            X32 = X32 + (min(max(t, lo), hi) - t) * self.unit_
        slope = float(self.parts_["gate"].slope(X32, self.unit_)[0]) / LN2
        return min(max(slope, 0.0), 1.0)

    def _predict_one_row(self, X32: np.ndarray, runners: Any) -> np.ndarray:
        """Twin of :meth:`predict_core` for one row: the elasticity-weighted blend."""
        e = self._elasticity_of_one_row(X32)
        ln_n = float(X32[0, self.n_col]) * LN2
        direct = float(runners["direct"].predict_fast(X32)[0])
        per_load = float(runners["per_load"].predict_fast(X32)[0]) + ln_n
        return np.array([math.exp((1.0 - e) * direct + e * per_load)])
