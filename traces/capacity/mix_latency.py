"""Predicted open-loop latency of a workload mix at any offered rate, for the capacity search.

``trace predict`` answers one window at one rate; the capacity search asks the same
question at many rates of one mix.  The closed-loop curves do not depend on the rate, so
they are asked of the model once for every mix of a device (one batch call,
:func:`traces.predict.openloop.closed_loop_curves`, with the device's swept write ratios and
sizes and its replay ceiling, :class:`traces.predict.windows.DeviceCurveSource`); a rate is
then arithmetic on a curve: the steady state of :func:`traces.predict.queueing.steady_state`
at that rate and burstiness, corrected by the device's open-loop points exactly as a
window is (:meth:`traces.predict.utilisation.UtilisationCorrection.factors`, Poisson gaps).
A test holds the result equal to ``trace predict``'s table for the same windows.

Latencies at or beyond a bound's capacity are infinite: there is no steady state there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from modeling.workload import WORKLOAD_FIELDS
from traces.predict.openloop import Curves, PredictsFrame, cap_curves, closed_loop_curves
from traces.predict.queueing import P99, ServiceCurve, burst_scale, steady_state
from traces.predict.utilisation import mix_keys
from traces.predict.windows import DeviceCurveSource
from traces.stats import GAP_CENTRES, GAP_EDGES


@dataclass(frozen=True)
class LatencyAt:
    """Predicted latencies (us) of one mix at offered ``rates``; ``inf`` where saturated."""

    rates: np.ndarray
    mean_us: np.ndarray
    p99_us: np.ndarray
    inflight: np.ndarray  # Little's law on the corrected mean: rate x mean

    def column(self, name: str) -> np.ndarray:
        """``pred_latency_mean_us`` or ``pred_latency_p99_us``."""
        return self.mean_us if name == "pred_latency_mean_us" else self.p99_us


@dataclass
class MixCurves:
    """The closed-loop curves of several workload mixes on one device, ready for any rate.

    ``arrival_cv2`` is one burstiness for every mix or one per mix.  A mix that is a trace's
    window may carry its own gaps (``gap_hist``, a row of its gap histogram, measured at the
    window's own rate ``gap_rate``): at another rate the gaps scale with it, as when the
    trace's time line runs faster (:func:`scaled_gaps`), and they set the cold path as
    ``trace predict`` does.
    """

    mixes: pd.DataFrame  # one row per mix: the workload fields
    curves: Curves
    source: DeviceCurveSource
    arrival_cv2: float | np.ndarray = 1.0
    gap_hist: np.ndarray | None = None
    gap_rate: np.ndarray | None = None
    # per mix, the share of its capacity up to which open-loop points were served in full
    # (traces.capacity.ceiling); None: no limit
    limits: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._keys = mix_keys(self.mixes)  # each mix as the correction's distance sees it
        self._curves: dict[tuple[int, str], tuple[Curves, ServiceCurve]] = {}

    def curve(self, i: int, bound: str = "value") -> ServiceCurve:
        """Mix ``i``'s curve under ``bound``, built once (its flow rates with it) for every rate asked."""
        got = self._curves.get((i, bound))
        if got is None or got[0] is not self.curves:
            got = self._curves[(i, bound)] = (self.curves, self.curves.curve(i, bound))
        return got[1]

    @classmethod
    def of(
        cls, model: PredictsFrame, mixes: pd.DataFrame, source: DeviceCurveSource,
        arrival_cv2: float | np.ndarray = 1.0, shares: np.ndarray | None = None,
    ) -> MixCurves:
        """Ask ``model`` for every mix's curve in one batch (``mixes``: rows of workload fields).

        ``shares`` moves each mix's throughput to that share of its model capacity (capped under 1,
        raised over it): what the device's open-loop path was measured to serve
        (:mod:`traces.capacity.ceiling`), on top of ``source.ceiling``
        (:func:`traces.predict.openloop.cap_curves`).
        """
        frame = mixes[list(WORKLOAD_FIELDS)].reset_index(drop=True)
        curves = closed_loop_curves(model, frame, source.loads, source.write_ratios or None,
                                    source.sizes or None)
        cv2 = arrival_cv2 if isinstance(arrival_cv2, np.ndarray) else float(arrival_cv2)
        ceiling = source.ceiling if shares is None else source.ceiling * np.asarray(shares, np.float64)
        return cls(frame, cap_curves(curves, ceiling), source, cv2)

    def cv2(self, i: int) -> float:
        """Mix ``i``'s burstiness."""
        cv2 = self.arrival_cv2
        return float(cv2[i]) if isinstance(cv2, np.ndarray) else float(cv2)

    def capacity(self, i: int, bound: str = "value") -> float:
        """Mix ``i``'s most IO/s under ``bound``'s curve."""
        return self.curve(i, bound).capacity

    def limit(self, i: int, bound: str = "value") -> float:
        """Mix ``i``'s fastest rate vouched for by open-loop points (``inf`` without any).

        One rate for every bound: it was measured, not modelled.
        """
        if self.limits is None:
            return math.inf
        return float(self.limits[i]) * self.capacity(i, "value")

    def max_load(self) -> float:
        """The largest in-flight count the device was measured at (the curve may go on beyond it:
        a ceiling over its closed-loop capacity, :func:`traces.predict.openloop.cap_curves`)."""
        return float(max(q * j for q, j in self.source.loads))

    def latency(self, i: int, rates: np.ndarray, bound: str = "value") -> LatencyAt:
        """Mix ``i``'s predicted mean and p99 at each offered rate, under ``bound`` (arrays only)."""
        rates = np.asarray(rates, np.float64)
        own = self._raw(i, rates, bound)
        mean, p99 = own["mean"] * 1e6, own["p99"] * 1e6
        correction = self.source.correction
        if correction is not None:
            value = own if bound == "value" else self._raw(i, rates, "value")
            live = np.isfinite(value["mean"])
            if live.any():
                n = int(live.sum())
                hist = None
                if self.gap_hist is not None and self.gap_rate is not None:
                    speedups = rates[live] / self.gap_rate[i]
                    hist = np.stack([scaled_gaps(self.gap_hist[i], s) for s in speedups])
                mean_f, p99_f = correction.factors_of(
                    np.repeat(self._keys[i : i + 1], n, axis=0), rates[live], value["mean"][live] * 1e6,
                    value["service"][live] * 1e6, value["p99"][live] * 1e6, value["service_p99"][live] * 1e6,
                    np.zeros(n, dtype=bool), hist)
                mean[live] *= mean_f
                p99[live] *= p99_f
        return LatencyAt(rates, mean, p99, rates * mean / 1e6)

    def _raw(self, i: int, rates: np.ndarray, bound: str) -> dict[str, np.ndarray]:
        """The uncorrected steady state at each rate (seconds), as ``predict_open_loop`` gives it."""
        curve = self.curve(i, bound)
        cap = curve.capacity
        out = {k: np.full(len(rates), math.inf) for k in ("mean", "p99")}
        out["service"] = np.full(len(rates), curve.outstanding[0] / curve.iops[0])
        out["service_p99"] = np.full(len(rates), curve.p99_s[0])
        live = (rates > 0) & (rates < cap)
        if live.sum() == 1:  # Brent's single rates: the scalar path is faster
            j = int(np.flatnonzero(live)[0])
            st = steady_state(curve, float(rates[j]), self.cv2(i))
            out["mean"][j], out["p99"][j] = st.mean_s, st.p99_s
        elif live.any():
            out["mean"][live], out["p99"][live] = steady_states(curve, rates[live], self.cv2(i))
        return out


def steady_states(curve: ServiceCurve, lam: np.ndarray, ca2: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`traces.predict.queueing.steady_state`'s mean and p99 (s) at many rates below capacity
    at once (a search's grid): the same arithmetic as arrays (a test holds them equal)."""
    L, X = curve.outstanding, curve.iops
    # the fluid fixed point: QD1's response time below X[0], else log-log between the loads
    # around the first one whose IO/s reaches the rate
    i = np.clip(np.searchsorted(np.maximum.accumulate(X), lam, side="left"), 1, len(X) - 1)
    x0, x1 = np.log(X[i - 1]), np.log(X[i])
    t = (np.log(lam) - x0) / np.where(x1 != x0, x1 - x0, 1.0)
    t = np.where(x1 != x0, np.clip(t, 0.0, 1.0), 1.0)
    between = np.exp(np.log(L[i - 1]) + t * (np.log(L[i]) - np.log(L[i - 1])))
    lf = np.where(lam <= X[0], lam * L[0] / X[0], between)
    # Poisson arrivals on the flow-equivalent server mu(n), with a geometric tail beyond the last count
    cap = curve.capacity
    top = len(curve.flow_rates)
    logp = np.concatenate([np.zeros((len(lam), 1)),
                           np.cumsum(np.log(lam)[:, None] - curve.log_flow_rates[None, :], axis=1)], axis=1)
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    r = lam / cap
    tail_mass = p[:, -1] * r / (1 - r)
    tail_mean = p[:, -1] * (top * r / (1 - r) + r / (1 - r) ** 2)
    inflight = (p @ np.arange(top + 1) + tail_mean) / (p.sum(axis=1) + tail_mass)
    r_fluid = lf / lam
    wait = np.maximum(inflight / lam - r_fluid, 0.0) * burst_scale(ca2)
    mean = r_fluid + wait
    p99_service = np.interp(np.maximum(lf, L[0]), L, curve.p99_s)
    return mean, np.maximum(p99_service + wait * math.log(1 / (1 - P99)), mean)



def scaled_gaps(hist: np.ndarray, speedup: float) -> np.ndarray:
    """A gap histogram (:data:`traces.stats.GAP_EDGES` bins) with every gap ``speedup`` x shorter.

    Each bin's count moves to the bin its centre falls in once divided: exact to half a bin
    (a factor of 1.12 in the gap), which moves the cold path's weight far less than the
    model's own error.
    """
    if speedup == 1.0:
        return hist
    target = np.clip(np.searchsorted(GAP_EDGES, GAP_CENTRES / speedup, side="right"), 0, len(GAP_CENTRES) - 1)
    target[0] = 0  # the zero-gap bin stays zero
    return np.bincount(target, weights=hist, minlength=len(GAP_CENTRES))
