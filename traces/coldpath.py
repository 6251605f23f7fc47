"""The cold I/O path, as a function of each request's idle gap rather than of the window's mean rate.

The open-loop points (:mod:`traces.utilisation`) measure latency at Poisson arrivals of a
given mean rate, and the correction learnt from them is indexed by utilisation.  That
holds for traces whose gaps are Poisson-like, but not for a window whose requests come
back to back in bursts with idle time between them: its mean rate is low, so the
correction read "cold" (on zram here: 25 us at 200 IO/s, 13 us at 2,000 IO/s against 3-4
us closed loop at QD1), while most of its requests follow the previous one by tens of
microseconds, on a hot path (the shared blktrace sample, 4 KiB reads 65 us apart with
idle gaps between runs: measured 7-10 us, predicted 11-17 us by the rate alone).

What goes cold is the path *between* requests, so the model is per request: a request
after an idle gap ``g`` takes ``s (b + c (1 - exp(-g / tau)))`` -- hot (``b``) right after
the previous one, cold (``b + c``) after a long idle time, with the time constant
``tau`` of whatever cools (CPU idle states, caches, interrupt moderation).  Poisson gaps
at rate ``r`` average ``1 - exp(-g / tau)`` to ``1 / (1 + r tau)``, so the open-loop
points give ``b``, ``c`` and ``tau`` by least squares (``b`` and ``c`` linear for each
``tau`` of a grid).  A window's correction is then rescaled by its own gaps' average of
``1 - exp(-g / tau)`` over the Poisson one at its rate: 1 on Poisson traces, so the
synthetic validations are unchanged, and the hot path where the requests come in runs.

Only the points at up to :data:`COLD_MAX_UTILISATION` are fitted: above it queueing, not
the cold path, sets the latency ratio.  With fewer than three such points the rate-only
correction stays (no fit is better than one through two noisy points).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.stats import GAP_CENTRES

COLD_MAX_UTILISATION = 0.35
TAUS = np.geomspace(1e-6, 1.0, 121)


@dataclass(frozen=True)
class ColdPath:
    """Latency ratio ``b + c (1 - exp(-gap / tau))`` per request (see the module docstring)."""

    b: float
    c: float
    tau: float

    def poisson(self, rate: np.ndarray) -> np.ndarray:
        """The ratio averaged over Poisson gaps at ``rate`` IO/s."""
        return self.b + self.c / (1 + np.asarray(rate, np.float64) * self.tau)

    def gaps(self, hist: np.ndarray) -> np.ndarray:
        """The ratio averaged over each row's gap histogram (NaN for a row without gaps)."""
        weight = 1 - np.exp(-GAP_CENTRES / self.tau)
        n = hist.sum(axis=1).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            cold = (hist @ weight) / n
        return np.where(n > 0, self.b + self.c * cold, np.nan)


def fit_cold_path(rate: np.ndarray, utilisation: np.ndarray, log_ratio: np.ndarray) -> ColdPath | None:
    """Fit ``b``, ``c`` >= 0 and ``tau`` to measured-over-predicted latency ratios at Poisson rates."""
    keep = (utilisation <= COLD_MAX_UTILISATION) & np.isfinite(log_ratio) & (rate > 0)
    if keep.sum() < 3:
        return None
    r, y = rate[keep], np.exp(log_ratio[keep])
    best: tuple[float, ColdPath] | None = None
    for tau in TAUS:
        x = 1 / (1 + r * tau)
        a = np.column_stack([np.ones_like(x), x])
        (b, c), *_ = np.linalg.lstsq(a, y, rcond=None)
        if c < 0:  # no cold path at this tau: the flat ratio
            b, c = float(y.mean()), 0.0
        if b <= 0:
            continue
        fit = b + c * x
        sse = float(np.sum((np.log(fit) - np.log(y)) ** 2))
        if best is None or sse < best[0]:
            best = (sse, ColdPath(float(b), float(c), float(tau)))
    return None if best is None else best[1]


def gap_adjustment(cold: ColdPath | None, rate: np.ndarray, hist: np.ndarray | None) -> np.ndarray:
    """Per window: the cold-path ratio of its own gaps over that of Poisson gaps at its rate."""
    ones = np.ones(len(rate))
    if cold is None or hist is None or cold.c == 0:
        return ones
    adj = cold.gaps(hist) / cold.poisson(rate)
    return np.where(np.isfinite(adj) & (adj > 0), adj, ones)
