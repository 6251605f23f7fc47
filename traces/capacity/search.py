"""The largest offered rate of a mix whose predicted latency stays under every target.

The search runs on the model, not on a sweep of it: a bracket from a fixed grid of 11
utilisations (log-spaced from 0.1 % to 50 % of the capacity, then log-spaced in the
distance to it up to 99.9 %) and the rates of the open-loop points measured at the mix (the
correction bends the curve there: on the throttled reference the mean of 16 KiB reads fell
from 43 us at 67 IO/s to 31 us at 174 and was 342 us at 184, so a target of 31 us held at one
measured rate and at no grid rate, and the search said ``never``), then Brent's method in
log rate inside the last grid cell that meets the targets (the latency curve is smooth there;
Brent keeps bisection's guarantee).  One answer is about 20 latency evaluations per bound,
each arithmetic on a curve the model gave once (:mod:`traces.capacity.mix_latency`).

Four outcomes:

* ``limited``: a target binds below capacity; the answer is the rate where it does.
* ``saturation``: the targets hold even at 99.9 % of the capacity: the device runs out of
  throughput before it breaks them, and the answer is its capacity.
* ``measured``: the targets hold up to the fastest open-loop point the device served in full
  (:mod:`traces.capacity.ceiling`), below its capacity; above it nothing was measured, so the
  answer stops there.
* ``never``: no load meets them; the answer carries the lightest load's latency.

The lightest load is searched too because latency need not rise with the rate: between
sparse arrivals the I/O path goes cold (:mod:`traces.predict.coldpath`), so a target can
fail at light load and hold at moderate load.  The answer is the largest rate that meets
the targets; below a cell that fails, lighter rates are not promised.

The capacity is the mix's curve's most IO/s, moved to the open-loop path's own throughput
where it was measured (:mod:`traces.capacity.ceiling`): under the closed-loop capacity where that
path ran out first, over it where the path was served more (the curve then goes on beyond its
largest measured load, :func:`traces.predict.openloop.cap_curves`, and the grid with it).

The interval comes from the model's bounds: the search on the upper-latency curve gives
the lower capacity, the one on the lower-latency curve the upper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq

from modeling.workload import MIB
from traces.capacity.mix_latency import LatencyAt, MixCurves
from traces.capacity.slo import Slo, format_us

NEAR_SATURATION = 1e-3
"""Meeting the targets within this share of the capacity counts as meeting them at saturation."""
LIGHTEST = 1e-3
"""The lightest load searched, as a share of the capacity."""
GRID = np.concatenate([np.geomspace(LIGHTEST, 0.5, 6), 1 - np.geomspace(0.5, NEAR_SATURATION, 6)[1:]])
REL_TOL = {"value": 1e-5, "lower": 1e-3, "upper": 1e-3}
"""Relative precision of the answer's rate per bound: far finer than any model's accuracy (it costs
a few evaluations); the interval's ends need less."""
OUTCOMES = ("limited", "saturation", "measured", "never")


@dataclass(frozen=True)
class _Found:
    outcome: str
    iops: float
    at: LatencyAt  # the latencies at the answer (for never: at the lightest load)
    binding: int | None  # index of the binding target
    fails_below: float | None = None  # a lighter cell broke the targets (cold path)


def _ratios(at: LatencyAt, slo: Slo) -> np.ndarray:
    """(targets, rates) predicted latency over each target's limit."""
    return np.stack([at.column(t.column) / t.limit_us for t in slo.targets])


def _search(mc: MixCurves, i: int, slo: Slo, bound: str) -> _Found:
    cap = mc.capacity(i, bound)
    top = mc.limit(i, bound)
    # the measured rates too: the correction bends the curve there, and between two grid rates a
    # curve falling with the rate (the cold path) can dip under a target at a point and rise again
    rates = np.union1d(GRID * cap, _measured_rates(mc, i, cap))
    stop = top < cap * (1 - NEAR_SATURATION)  # the open-loop points vouch for less than the capacity
    if stop:
        rates = np.append(rates[rates < top], top)
    grid = mc.latency(i, rates, bound)
    worst = _ratios(grid, slo).max(axis=0)
    ok = worst <= 1
    if ok[-1]:
        return _Found("measured", top, _pick(grid, -1), None) if stop else _Found(
            "saturation", cap, _pick(grid, -1), None)
    if not ok.any():
        return _Found("never", 0.0, _pick(grid, 0), None)
    j = int(np.flatnonzero(ok)[-1])
    fails_below = float(grid.rates[j]) if not ok[:j].all() else None

    def excess(log_rate: float) -> float:
        # finite for Brent: a saturated (inf) or undefined (NaN: a zero p99 part times an infinite
        # wait) latency counts as far over the targets
        at = mc.latency(i, np.array([math.exp(log_rate)]), bound)
        return float(np.nan_to_num(np.log(_ratios(at, slo).max()), nan=50.0, posinf=50.0))

    lo, hi = math.log(grid.rates[j]), math.log(grid.rates[j + 1])
    tol = REL_TOL[bound]
    # Brent needs a sign change: rounding at a cell edge (exp(log(rate))) can take it away
    bracketed = worst[j] < 1 and excess(lo) <= 0 < excess(hi)
    root = brentq(excess, lo, hi, xtol=tol) if bracketed else lo
    # the side of the root that meets the targets: Brent lands within xtol of it, either side
    for x in (root, root - tol, lo):
        at = mc.latency(i, np.array([math.exp(x)]), bound)
        r = _ratios(at, slo)[:, 0]
        if r.max() <= 1:
            break
    return _Found("limited", float(at.rates[0]), at, int(np.argmax(r)), fails_below)


def _pick(at: LatencyAt, j: int) -> LatencyAt:
    return LatencyAt(at.rates[[j]], at.mean_us[[j]], at.p99_us[[j]], at.inflight[[j]])


@dataclass
class CapacityAnswer:
    """How much of one mix a device takes under a latency target, and why."""

    workload: dict[str, Any]
    slo: str
    outcome: str
    iops: float
    iops_lower: float
    iops_upper: float
    bandwidth_mib_s: float
    capacity_iops: float  # the device's throughput at this mix (the curve's maximum, moved to the ceiling)
    utilisation: float
    inflight: float
    binding: str | None  # the target that binds (None: none does)
    latency_mean_us: float  # at the answer (never: at the lightest load)
    latency_p99_us: float
    beyond_measured: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (infinities become None)."""
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in vars(self).items()}


def search_capacity(mc: MixCurves, i: int, slo: Slo, interval: bool = True) -> CapacityAnswer:
    """Mix ``i``'s capacity under ``slo`` on the device of ``mc`` (see the module docstring).

    ``interval=False`` skips the searches on the bounds (a third of the time; the interval's
    ends are then NaN): for many mixes of which only a few are reported with an interval.
    """
    found = {b: _search(mc, i, slo, b) for b in (("value", "upper", "lower") if interval else ("value",))}
    v = found["value"]
    cap = mc.capacity(i)
    lo, hi = sorted((found["upper"].iops, found["lower"].iops)) if interval else (math.nan, math.nan)
    size = float(mc.mixes.at[i, "request_size"])
    notes: list[str] = []
    binding = None if v.binding is None else str(slo.targets[v.binding])
    mean, p99 = float(v.at.mean_us[0]), float(v.at.p99_us[0])
    if v.outcome == "saturation":
        notes.append(f"meets {slo} even at saturation: throughput ({cap:,.0f} IO/s), not latency,"
                     " is the limit")
    elif v.outcome == "measured":
        notes.append(f"meets {slo} up to {v.iops:,.0f} IO/s ({v.iops / cap:.0%} of capacity), the fastest"
                     " open-loop rate measured at this mix; above it nothing was measured (sweep"
                     " --for-capacity measures points from 0.1 to 1.2 of the capacity)")
    elif v.outcome == "never":
        stats = ", ".join(f"{t.statistic} {format_us(float(v.at.column(t.column)[0]), 3)}"
                          for t in slo.targets)
        notes.append(f"cannot meet {slo} at any load: at the lightest load ({LIGHTEST:.1%} of capacity,"
                     f" {v.at.rates[0]:,.0f} IO/s) the predicted {stats}")
    if v.fails_below is not None:
        notes.append(f"at or below {v.fails_below:,.0f} IO/s sparse arrivals (a cold I/O path) break {slo}"
                     " too: the answer is the largest rate that meets it")
    beyond = _beyond_measured(mc, i, v, notes)
    return CapacityAnswer(
        workload={k: _plain(mc.mixes.at[i, k]) for k in mc.mixes.columns},
        slo=str(slo), outcome=v.outcome, iops=v.iops, iops_lower=min(lo, v.iops) if interval else lo,
        iops_upper=max(hi, v.iops) if interval else hi,
        bandwidth_mib_s=v.iops * size / MIB, capacity_iops=cap, utilisation=v.iops / cap,
        inflight=float(v.at.inflight[0]) if v.outcome != "never" else 0.0, binding=binding,
        latency_mean_us=mean, latency_p99_us=p99, beyond_measured=beyond, notes=notes,
    )


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _beyond_measured(mc: MixCurves, i: int, found: _Found, notes: list[str]) -> bool:
    """Whether the answer rests on the model beyond what was measured (the reasons go to ``notes``)."""
    reasons = []
    if bool(mc.curves.extrapolated[i]):
        reasons.append("the mix lies outside what the device was swept on")
    if found.outcome != "never" and found.at.inflight[0] > mc.max_load():
        reasons.append(f"{found.at.inflight[0]:,.1f} in flight is beyond the largest measured load"
                       f" ({mc.max_load():g})")
    correction = mc.source.correction
    if correction is None:
        reasons.append("the device has no open-loop points: the latency under load is the closed-loop"
                       " method's alone")
    elif found.outcome != "never" and mc.limits is None:  # with limits the answer never passes them
        fastest = _fastest_measured(mc, i)
        if found.iops > fastest * (1 + REL_TOL["value"]):
            reasons.append(f"{found.iops:,.0f} IO/s is above the fastest open-loop point measured at the"
                           f" nearest mix ({fastest:,.0f} IO/s)")
    notes.extend(f"beyond what was measured: {r}" for r in reasons)
    return bool(reasons)


def _nearest_rates(mc: MixCurves, i: int) -> np.ndarray:
    """The open-loop rates measured at the measured mix nearest to mix ``i`` (empty without any)."""
    correction = mc.source.correction
    if correction is None:
        return np.empty(0)
    m = mc.mixes.iloc[i]
    key = np.array([m["write_ratio"], math.log2(m["request_size"]), m["randomness"]])
    # the nearest mix by the correction's own distance (a size doubling = a quarter of the ratio range)
    g = int(np.argmin((np.abs(correction.keys - key) * np.array([1.0, 0.25, 1.0])).sum(axis=1)))
    return np.exp(correction.mixes[g].log_rate)  # type: ignore[no-any-return]


def _measured_rates(mc: MixCurves, i: int, cap: float) -> np.ndarray:
    """The measured rates strictly inside the grid's span of ``cap`` (the search's extra rates)."""
    rates = _nearest_rates(mc, i)
    return rates[(rates > GRID[0] * cap) & (rates < GRID[-1] * cap)]


def _fastest_measured(mc: MixCurves, i: int) -> float:
    """The fastest open-loop rate measured at the measured mix nearest to mix ``i``."""
    return float(_nearest_rates(mc, i).max())
