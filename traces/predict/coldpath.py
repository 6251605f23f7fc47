"""The cold I/O path, as a function of each request's idle gap rather than of the window's mean rate.

The open-loop points (:mod:`traces.predict.utilisation`) measure latency at Poisson arrivals of a
given mean rate, and the service part of it depends on that rate: between sparse arrivals
the I/O path goes cold (on zram here: 25 us at 200 IO/s, 13 us at 2,000 IO/s against 3-4
us closed loop at QD1).  That holds for traces whose gaps are Poisson-like, but not for a
window whose requests come back to back in bursts with idle time between them: its mean
rate is low, while most of its requests follow the previous one by tens of microseconds,
on a hot path (the shared blktrace sample, 4 KiB reads 65 us apart with idle gaps between
runs: measured 7-10 us, predicted 11-17 us by the rate alone).

What goes cold is the path *between* requests, so the model is per request: a request
after an idle gap ``g`` takes ``s (b + c (1 - exp(-g / tau)))`` of the closed-loop service
time ``s`` -- hot (``b``) right after the previous one, cold (``b + c``) after a long idle
time, with the time constant ``tau`` of whatever cools (CPU idle states, caches, interrupt
moderation).  Poisson gaps at rate ``r`` average ``1 - exp(-g / tau)`` to
``1 / (1 + r tau)``, so the open-loop points give ``b``, ``c`` and ``tau`` by least squares
(``b`` and ``c`` linear for each ``tau`` of a grid).  A window's correction is then
rescaled by its own gaps' average of ``b + c (1 - exp(-g / tau))`` over the Poisson one at
its rate: 1 on Poisson traces, so the synthetic validations are unchanged, and the hot
path where the requests come in runs.

With fewer than three points a curve through them would be noise: the ratio is flat,
their geometric mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.stats import GAP_CENTRES

MIN_POINTS = 3
TAUS = np.geomspace(1e-6, 1.0, 121)


@dataclass(frozen=True)
class ColdPath:
    """Service-time ratio ``b + c (1 - exp(-gap / tau))`` per request (see the module docstring)."""

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

    def adjustment(self, rate: np.ndarray, hist: np.ndarray | None) -> np.ndarray:
        """Per window: its own gaps' ratio over the Poisson one at its rate (1 without gaps)."""
        ones = np.ones(len(rate))
        if hist is None or self.c == 0:
            return ones
        adj = self.gaps(hist) / self.poisson(rate)
        return np.where(np.isfinite(adj) & (adj > 0), adj, ones)


def fit_cold_path(rate: np.ndarray, log_ratio: np.ndarray) -> ColdPath | None:
    """Fit ``b``, ``c`` >= 0 and ``tau`` to measured-over-service ratios at Poisson rates.

    None without a usable point; a flat ratio with fewer than :data:`MIN_POINTS`.
    """
    keep = np.isfinite(log_ratio) & (rate > 0)
    if not keep.any():
        return None
    r, y = rate[keep], np.exp(log_ratio[keep])
    flat = float(np.exp(np.mean(log_ratio[keep])))  # the ratios' geometric mean
    if keep.sum() < MIN_POINTS:
        return ColdPath(flat, 0.0, 1.0)
    best: tuple[float, ColdPath] | None = None
    for tau in TAUS:
        x = 1 / (1 + r * tau)
        a = np.column_stack([np.ones_like(x), x])
        (b, c), *_ = np.linalg.lstsq(a, y, rcond=None)
        if c < 0:  # no cold path at this tau: the flat ratio
            b, c = flat, 0.0
        if b <= 0:
            continue
        fit = b + c * x
        sse = float(np.sum((np.log(fit) - log_ratio[keep]) ** 2))
        if best is None or sse < best[0]:
            best = (sse, ColdPath(float(b), float(c), float(tau)))
    return ColdPath(flat, 0.0, 1.0) if best is None else best[1]  # None: every tau's hot path < 0

