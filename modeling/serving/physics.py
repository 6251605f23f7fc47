"""The physics every answer obeys, inside and outside the measured range.

Regression trees know nothing beyond their training data, and a feature that grows with
the request size or the queue depth lets them invent bandwidth the device never showed
(issue 13: a 1 MiB read predicted at 5x the measured bandwidth, p99 below the mean at
queue depth 512).  So the serving path (matrix and one-row alike: both call
:func:`apply_physics`) predicts an out-of-range workload at the nearest measured load and
size and extends it with laws a storage device cannot break:

* beyond the largest outstanding I/O measured (queue depth x numjobs), IOPS follows
  ``X(L) = Xmax L / (L + K)`` (``K = 0``: it stays at the plateau) and the latencies grow
  by Little's law (L = IOPS x W);
* beyond the largest request size measured, latency grows as ``s0 + s`` (a fixed cost
  plus a transfer time; ``s0 = 0``: in proportion to the size, bandwidth at its plateau),
  so bandwidth approaches its asymptote instead of stopping at the last measured size;
  ``K`` and ``s0`` per mix are chosen at training by validation
  (:mod:`modeling.training.laws`), 0 where the plateau predicts better;
* a direction's bandwidth never exceeds what the device showed for that mix
  (:data:`BANDWIDTH_TOLERANCE` above its measured maximum); capping it lowers IOPS and
  raises latency by the same factor;
* the latency percentiles are ordered, p50 <= p90 <= p99 <= p99.9, and p99 >= mean;
* intervals widen with the distance from the measured range (:func:`widen`).

:class:`PhysicsLimits` holds what the device showed (saved with the model);
:func:`extrapolation` says how far out a workload is and along which field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

import numpy as np

from modeling.one_row import RowLimits
from modeling.serving.metric_models import DERIVABLE
from modeling.workload import LATENCY_METRICS, MIB, PERCENTILE_ORDER, WORKLOAD_FIELDS
from modeling.workload import PERCENTILE_ANCHOR as ANCHOR
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import FRACTION_COLUMNS
from modeling.workload_matrix import mean_request_size, outstanding_io

BANDWIDTH_TOLERANCE = 1.10
"""A predicted bandwidth may exceed the measured maximum of its mix by this factor (noise)."""
INTERVAL_GROWTH = 0.5
"""Extra log half-width of an interval per e-fold of distance outside the measured range."""
MIXES = ("read", "write", "mixed")
"""The bandwidth-cap groups: reads only, writes only, any mix of both."""
_SIZE_COLUMNS = [_F["request_size"], _F["read_size"], _F["write_size"]]


@dataclass(frozen=True)
class PhysicsLimits:
    """What the device showed in its measurements: the bounds of a physical answer."""

    lo: np.ndarray  # per workload field, the smallest value measured
    hi: np.ndarray  # per workload field, the largest value measured
    max_outstanding: float  # largest queue_depth x numjobs measured
    bandwidth_max: Mapping[str, float]  # per mix (MIXES), the largest bandwidth measured
    depths: tuple[float, ...] = ()  # the queue depths measured, ascending (see ladder)
    load_knee: float = 0.0  # K of the load law (outstanding I/O); 0: the plateau
    size_knee: Mapping[str, float] = field(default_factory=dict)  # per mix, s0 (bytes); absent: 0

    @classmethod
    def measured(cls, w: np.ndarray, bandwidth: np.ndarray | None) -> PhysicsLimits:
        """The limits of measured workloads ``w`` (distinct rows) and their bandwidths (MiB/s).

        Without bandwidths (data of latencies only) no bandwidth is capped.
        """
        mix = mix_codes(w)
        peaks = (
            {}
            if bandwidth is None
            else {name: float(bandwidth[mix == i].max()) for i, name in enumerate(MIXES) if (mix == i).any()}
        )
        depths = tuple(np.unique(w[:, _F["queue_depth"]]).tolist())
        return cls(w.min(axis=0), w.max(axis=0), float(outstanding_io(w).max()), peaks, depths)

    def caps(self) -> tuple[float, ...]:
        """Per mix (:data:`MIXES`), the largest bandwidth an answer may have (MiB/s).

        A mix never measured takes the largest of any mix; with no bandwidth measured, none.
        """
        top = max(self.bandwidth_max.values(), default=np.inf)
        return tuple(float(self.bandwidth_max.get(m, top)) * BANDWIDTH_TOLERANCE for m in MIXES)

    def row_limits(self) -> RowLimits:
        """These limits in plain floats, for the one-row twins (:mod:`modeling.one_row`)."""
        depths = self.depths if len(self.depths) >= 2 else ()  # as in ladder
        return RowLimits(
            lo=self.lo.tolist(),
            hi=self.hi.tolist(),
            max_outstanding=self.max_outstanding,
            caps=self.caps(),
            depths=list(depths),
            log_depths=np.log2(depths).tolist(),
            interval_growth=INTERVAL_GROWTH,
            load_knee=self.load_knee,
            size_knees=self.size_knees(),
        )

    def size_knees(self) -> tuple[float, ...]:
        """Per mix (:data:`MIXES`), s0 of the size law (0: the bandwidth plateau)."""
        return tuple(float(self.size_knee.get(m, 0.0)) for m in MIXES)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (see :meth:`from_json`)."""
        return {
            "lo": self.lo.tolist(),
            "hi": self.hi.tolist(),
            "max_outstanding": self.max_outstanding,
            "bandwidth_max": dict(self.bandwidth_max),
            "depths": list(self.depths),
            "load_knee": self.load_knee,
            "size_knee": dict(self.size_knee),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PhysicsLimits:
        """Rebuild from :meth:`to_json`; raises ``ValueError`` on a malformed document."""
        lo = np.asarray(doc["lo"], dtype=np.float64)
        hi = np.asarray(doc["hi"], dtype=np.float64)
        peaks = {str(k): float(v) for k, v in dict(doc["bandwidth_max"]).items()}
        max_out = float(doc["max_outstanding"])
        depths = tuple(float(d) for d in doc["depths"])
        # limits saved before the laws were chosen hold neither: the plateaus
        knee = float(doc.get("load_knee", 0.0))
        size_knee = {str(k): float(v) for k, v in dict(doc.get("size_knee", {})).items()}
        knees = [*size_knee.values(), knee]
        if not set(size_knee) <= set(MIXES) or not all(np.isfinite(v) and v >= 0 for v in knees):
            raise ValueError("bad physics limits")
        if list(depths) != sorted(set(depths)) or not all(d >= 1 for d in depths):
            raise ValueError("bad physics limits")
        if lo.shape != (len(WORKLOAD_FIELDS),) or hi.shape != lo.shape or not set(peaks) <= set(MIXES):
            raise ValueError("bad physics limits")
        if not all(np.isfinite(v) and v > 0 for v in [*peaks.values(), max_out]):
            raise ValueError("bad physics limits")
        return cls(lo, hi, max_out, peaks, depths, knee, size_knee)


def mix_codes(w: np.ndarray) -> np.ndarray:
    """Index into :data:`MIXES` of each workload: 0 reads only, 1 writes only, 2 a mix."""
    wr = w[:, _F["write_ratio"]]
    return np.where(wr <= 0.0, 0, np.where(wr >= 1.0, 1, 2))


@dataclass
class Stretch:
    """How a workload matrix was pulled into the measured range, and what that changes."""

    w_eval: np.ndarray  # the workloads the models are evaluated at
    load: np.ndarray  # outstanding I/O asked / evaluated (>= 1)
    size: np.ndarray  # mean request size asked / evaluated (>= 1)
    distance: np.ndarray  # log of the largest factor outside the measured range (>= 0)


def stretch(w: np.ndarray, limits: PhysicsLimits | None) -> Stretch:
    """Clamp sizes and load above the measured maximum to it; the factors to extend back with.

    Below the measured range nothing is clamped: trees are flat there, and smaller
    requests or fewer I/Os in flight cannot break the bandwidth or load laws.
    """
    ones = np.ones(len(w))
    if limits is None:
        return Stretch(w, ones, ones, np.zeros(len(w)))
    w_eval = w.copy()
    for col in _SIZE_COLUMNS:
        np.minimum(w_eval[:, col], limits.hi[col], out=w_eval[:, col])
    size = mean_request_size(w) / np.maximum(mean_request_size(w_eval), 1.0)
    qd, nj = _F["queue_depth"], _F["numjobs"]
    jobs = np.minimum(w_eval[:, nj], limits.hi[nj])
    # the nearest measured load: at most the deepest queue and the most jobs measured,
    # and at most the most I/Os in flight measured
    depth = np.minimum(w_eval[:, qd], limits.hi[qd])
    depth = np.minimum(depth, np.maximum(np.floor(limits.max_outstanding / jobs), 1.0))
    w_eval[:, nj] = jobs
    w_eval[:, qd] = depth
    oio = outstanding_io(w)
    load = oio / outstanding_io(w_eval)
    factors = np.vstack([_field_factors(w, limits).max(axis=1), load, size])
    return Stretch(w_eval, load, size, np.log(np.maximum(factors.max(axis=0), 1.0)))


@dataclass
class Ladder:
    """Where each workload sits among the measured queue depths, and the rungs it needs.

    :func:`settle` reads a workload's load-bound metrics off the monotone envelope of the
    measured depths up to its own (and the next one, to interpolate between the two):
    only those rungs are evaluated, and only by the models of the load-bound metrics that
    have their own estimators; every other metric is evaluated once, at the workload.  A
    rung at the workload's own depth is the workload itself and is not evaluated again.
    Serving got 18x slower on batches when every metric was evaluated at every measured
    depth (k = depths + 1 rows per workload); this way a batch costs one row per
    workload per model plus the rungs of the IOPS model (issue 13).
    """

    depths: np.ndarray  # the measured depths, ascending
    low: np.ndarray  # per workload, the rung at or below its depth
    high: np.ndarray  # per workload, the rung above it (``low`` at or beyond the ends)
    frac: np.ndarray  # per workload, where between the two (0 at ``low``)
    own: np.ndarray  # per workload, the rung at its own depth, -1 if none
    owner: np.ndarray  # per rung row, the workload it belongs to
    rung: np.ndarray  # per rung row, its index among the depths

    @property
    def empty(self) -> bool:
        """No rung to evaluate (every workload at the smallest measured depth, or none)."""
        return len(self.owner) == 0


def ladder(w: np.ndarray, limits: PhysicsLimits | None) -> Ladder | None:
    """The :class:`Ladder` of workload matrix ``w``; None without at least two measured depths."""
    if limits is None or len(limits.depths) < 2:
        return None
    depths = np.asarray(limits.depths, dtype=np.float64)
    n_steps = len(depths)
    depth = w[:, _F["queue_depth"]]
    pos = np.interp(np.log2(depth), np.log2(depths), np.arange(n_steps, dtype=np.float64))
    low = np.minimum(np.floor(pos).astype(np.intp), n_steps - 1)
    high = np.minimum(low + 1, n_steps - 1)
    frac = pos - low
    # the rungs read: up to ``high`` when between two depths, up to ``low`` at one
    top = np.where(frac > 0.0, high, low)
    at = depths[low] == depth
    own = np.where(at, low, -1)
    need = (np.arange(n_steps)[None, :] <= top[:, None]) & (np.arange(n_steps)[None, :] != own[:, None])
    owner, rung = np.nonzero(need)
    return Ladder(depths, low, high, frac, own, owner, rung)


def needed_rungs(
    metric: str, lad: Ladder, w: np.ndarray, own: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """The rung rows that can set their workload's envelope, of bounds on every rung's value.

    ``own`` is ``metric`` at the workloads ``w``, ``lo`` and ``hi`` bounds on it at the
    rung rows (``ScopeModel.bounds``).  :func:`settle` reads a running minimum of IOPS per
    I/O in flight (a running maximum of the mean latency) up to the workload's own depth
    ``low``, and the next rung when between two.  Its value at ``low`` is at most ``M``,
    the smallest upper bound there (or the workload's own value at a measured depth); a
    rung whose lower bound is above ``M`` cannot be that minimum, nor lower it at the next
    rung, and is not evaluated: the envelope, and the answer, are the same.  On a device
    whose IOPS per I/O already falls with depth almost no rung is left (issue 13: rungs
    made a 10,000-workload batch several times slower).
    """
    if metric == "latency_mean_us":  # a running maximum: the running minimum of its negative
        lo_key, hi_key, own_key = -hi, -lo, -own
    else:
        load = lad.depths[lad.rung] * w[lad.owner, _F["numjobs"]]
        lo_key, hi_key = lo / load, hi / load
        own_key = own / (w[:, _F["queue_depth"]] * w[:, _F["numjobs"]])
    bound = np.where(lad.own >= 0, own_key, np.inf)
    below = lad.rung <= lad.low[lad.owner]
    np.minimum.at(bound, lad.owner[below], hi_key[below])
    return ~(lo_key > bound[lad.owner])


def settle(
    values: dict[str, np.ndarray],
    rungs: dict[str, np.ndarray],
    lad: Ladder | None,
    w: np.ndarray,
) -> dict[str, np.ndarray]:
    """Per workload, the values that respect the load laws along queue depth.

    ``values`` are every metric at the workloads ``w`` themselves, ``rungs`` each
    load-bound metric with its own estimators at :attr:`Ladder.owner`'s rung rows
    (infinite, towards the side that cannot set the envelope, where a rung was not
    evaluated: :func:`needed_rungs`).  Along
    the measured depths, IOPS and bandwidth per I/O in flight are made non-increasing
    (running minimum) and the mean latency non-decreasing (running maximum); a workload's
    own value is read off that envelope, geometrically interpolated between the two
    measured depths around its depth.  A load-bound metric derived from IOPS (bandwidth,
    and the mean latency by Little's law) moves by IOPS's own factor, which is its
    envelope exactly.  The percentiles are the workload's own (the tail is noisy along
    depth, issue 13), ordered later.
    """
    if lad is None:
        return values
    n, n_steps = len(w), len(lad.depths)
    rows = np.arange(n)
    nj = w[:, _F["numjobs"]]
    at = lad.own >= 0
    out = dict(values)
    for metric, steps_v in rungs.items():
        steps = np.ones((n, n_steps))  # rungs above a workload's are never read
        steps[lad.owner, lad.rung] = steps_v
        steps[rows[at], lad.own[at]] = values[metric][at]
        if metric == "latency_mean_us":
            env = np.maximum.accumulate(steps, axis=1)
            scale: Any = 1.0
        else:  # IOPS and bandwidth per I/O in flight
            env = np.minimum.accumulate(steps / (lad.depths[None, :] * nj[:, None]), axis=1)
            scale = w[:, _F["queue_depth"]] * nj
        logs = np.log(np.maximum(env, 1e-300))
        out[metric] = np.exp(logs[rows, lad.low] * (1.0 - lad.frac) + logs[rows, lad.high] * lad.frac) * scale
    if "iops" in rungs:
        factor = out["iops"] / np.maximum(values["iops"], 1e-300)
        for metric in (m for m in DERIVABLE if m in values and m not in rungs):
            # bandwidth is proportional to IOPS, the mean latency (Little's law) inversely
            out[metric] = values[metric] * factor if metric == "bandwidth_mib_s" else values[metric] / factor
    return out


def _field_factors(w: np.ndarray, limits: PhysicsLimits) -> np.ndarray:
    """Per row and field, how many times beyond the measured range (1 inside)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        above = np.where(w > limits.hi, w / np.maximum(limits.hi, 1e-12), 1.0)
        below = np.where(w < limits.lo, limits.lo / np.maximum(w, 1e-12), 1.0)
    # a ratio field (0..1) that was constant in training: distance, not a ratio, says how far
    return np.maximum(np.maximum(above, below), 1.0)


def extrapolation(w: np.ndarray, limits: PhysicsLimits | None) -> list[dict[str, float]]:
    """Per workload, ``{field: factor}`` for each field outside the measured range.

    The factor is how many times above the largest (or below the smallest) measured value;
    ``outstanding_io`` is listed when queue depth x numjobs exceeds what was measured,
    even where each field alone was measured.  Ratio fields measured at 0 only count as
    ``1 + distance``.
    """
    if limits is None:
        return [{} for _ in range(len(w))]
    factors = _field_factors(w, limits)
    for i in FRACTION_COLUMNS:
        gap = np.maximum(w[:, i] - limits.hi[i], limits.lo[i] - w[:, i])
        factors[:, i] = np.where(gap > 1e-9, 1.0 + gap, 1.0)
    load = outstanding_io(w) / limits.max_outstanding
    out: list[dict[str, float]] = []
    for r in range(len(w)):
        row = {WORKLOAD_FIELDS[i]: round(float(f), 4) for i, f in enumerate(factors[r]) if f > 1.0 + 1e-9}
        if load[r] > 1.0 + 1e-9:
            row["outstanding_io"] = round(float(load[r]), 4)
        out.append(row)
    return out


def apply_physics(
    values: dict[str, np.ndarray], w: np.ndarray, st: Stretch, limits: PhysicsLimits | None
) -> None:
    """Extend predictions made at ``st.w_eval`` back to ``w`` and enforce the laws, in place.

    ``values`` holds every metric the device has, predicted at ``st.w_eval``.  Without
    limits (a model saved before they were recorded) nothing is changed.
    """
    if limits is None:
        return
    # the load law and Little's law beyond the measured load; the size law beyond the
    # measured size (see the module docstring): IOPS x gain / grow, latency x load / gain x grow
    oio, size, mix = outstanding_io(w), mean_request_size(w), mix_codes(w)
    knee = limits.load_knee
    gain = st.load * (oio / st.load + knee) / (oio + knee) if knee > 0 else 1.0
    s0 = np.array(limits.size_knees())[mix]
    grow = (s0 + size) / (s0 + size / st.size)
    if "iops" in values:
        values["iops"] = values["iops"] * (gain / grow)
    if "bandwidth_mib_s" in values:
        values["bandwidth_mib_s"] = values["bandwidth_mib_s"] * (gain * st.size / grow)
    for metric in LATENCY_METRICS:
        if metric in values:
            values[metric] = values[metric] * (st.load / gain * grow)
    bw_implied = values["iops"] * size / MIB if "iops" in values else None
    cap = np.array(limits.caps())[mix]
    if "bandwidth_mib_s" in values:
        values["bandwidth_mib_s"] = np.minimum(values["bandwidth_mib_s"], cap)
    if bw_implied is not None:
        # IOPS that would carry more than the cap are slowed to it, and the time each
        # I/O spends in the device grows by the same factor (Little's law)
        slow = np.minimum(1.0, cap / np.maximum(bw_implied, 1e-12))
        values["iops"] = values["iops"] * slow
        for metric in LATENCY_METRICS:
            if metric in values:
                values[metric] = values[metric] / slow
    order_percentiles(values)


def order_percentiles(values: dict[str, np.ndarray]) -> None:
    """p50 <= p90 <= p99 <= p99.9 and p99 >= mean, anchored on p99, in place.

    Each tail model is a separate estimate of one point of a monotone curve.  The p99 is
    the rung every device learns and the one most tuned, so it is the anchor: it is only
    raised to the mean; a rung above it is raised to it (the conservative answer for the
    far tail), a rung below it is lowered to it.  Anchoring makes each rung depend only on
    the rungs between it and p99, so a request that does not ask for p50/p90/p99.9 never
    pays for their models, and the p99 is the same whichever rungs are asked for
    (:func:`modeling.one_row.needed_metrics`).
    """
    present = [m for m in PERCENTILE_ORDER if m in values]
    if not present:
        return
    anchor = ANCHOR if ANCHOR in values else present[0]
    if anchor == ANCHOR and "latency_mean_us" in values:
        values[anchor] = np.maximum(values[anchor], values["latency_mean_us"])
    at = present.index(anchor)
    for i in range(at + 1, len(present)):
        values[present[i]] = np.maximum(values[present[i]], values[present[i - 1]])
    for i in range(at - 1, -1, -1):
        values[present[i]] = np.minimum(values[present[i]], values[present[i + 1]])


def widen(q: Any, distance: np.ndarray) -> Any:
    """The interval half-width ``q`` (log scale) at ``distance`` e-folds outside the range."""
    return q + INTERVAL_GROWTH * distance
