"""Open-loop queueing on a device known only by its closed-loop curve (pure numpy).

A fio sweep is closed loop: ``L`` requests stay in flight and the device completes them
at ``X(L)`` IO/s, so each takes ``R(L) = L / X(L)`` (Little's law).  A trace is open loop:
requests arrive at rate ``lam`` whatever the device does.  Three steps per window:

1. **Fluid fixed point** (:func:`fluid_fixed_point`): the in-flight count the device
   settles at if arrivals were perfectly regular solves ``L = lam * R(L)``, i.e.
   ``X(L) = lam``.  Below one request in flight the device serves at its QD1 response
   time, so ``L = lam * R(1)``.  On an M/M/c device this is exactly the mean number of
   requests *in service*, ``lam / mu``; what it misses is the waiting caused by random
   arrivals.
2. **Random arrivals** (:func:`mean_inflight_poisson`): the closed-loop curve is the
   device's flow-equivalent server (Chandy-Herzog-Woo): with ``n`` requests in flight it
   completes at ``mu(n) = X(n)``.  With Poisson arrivals that birth-death chain has a
   closed-form stationary distribution, hence the mean in flight and, by Little, the mean
   response time ``W_M``.  It reduces to the M/M/1 and M/M/c formulas on those devices.
3. **Burstiness** (:func:`burst_scale`): the waiting part ``W_M - R_fluid`` is scaled by
   Allen-Cunneen's ``(ca^2 + cs^2) / 2`` with the window's measured inter-arrival
   ``ca^2`` and ``cs^2 = 1`` (the chain is Markovian, so Poisson arrivals give a factor
   of exactly 1).  Why this and not a discrete-event simulation: a black-box curve gives
   the device's completion *rate* per in-flight count but no service discipline or
   per-request service distribution to simulate, so a simulation would add assumptions,
   not information; the scaling is closed-form, exact at ``ca^2 = 1``, and the synthetic
   H2 traces (``bench/traces.py``) measure how far it holds for bursty arrivals.

**Saturation**: when ``lam`` reaches the capacity (the curve's maximum over the measured
loads) there is no steady state.  The window is flagged, the backlog grows at
``lam - capacity`` (carried over to the next window and drained there), and the wait is
the mean backlog over the window divided by the capacity (:func:`backlog_wait`).

Tail latency: the closed-loop p99 at the fluid load (the service part) plus ``ln(100)``
times the mean wait, the 99th percentile of an exponential wait: exact for M/M/1, where
the response time is exponential with mean ``1 / (mu - lam)``, and it keeps the device's
own service tail where there is little queueing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

P99 = 0.99


@dataclass(frozen=True)
class ServiceCurve:
    """A device's closed-loop curve at one workload mix.

    ``outstanding`` is increasing and >= 1; ``iops`` is ``X(L)``; ``p99_s`` the
    closed-loop 99th-percentile latency (seconds) at each ``L``.
    """

    outstanding: np.ndarray
    iops: np.ndarray
    p99_s: np.ndarray

    @cached_property
    def capacity(self) -> float:
        """The most IO/s the device reached at any measured load."""
        return float(np.max(self.iops))

    @cached_property
    def flow_rates(self) -> np.ndarray:
        """``mu(n)`` at ``n = 1 .. ceil(largest load)``, the last one the capacity (beyond it the
        device serves at its capacity): the flow-equivalent server, computed once per curve."""
        top = max(int(math.ceil(self.outstanding[-1])), 1)
        mu = self.rate(np.arange(1, top + 1, dtype=np.float64))
        mu[-1] = self.capacity
        mu.flags.writeable = False
        return mu

    @cached_property
    def log_flow_rates(self) -> np.ndarray:
        """``log`` of :attr:`flow_rates`."""
        out = np.log(self.flow_rates)
        out.flags.writeable = False
        return out

    def rate(self, n: np.ndarray) -> np.ndarray:
        """Completion rate ``mu(n)`` at in-flight counts ``n`` >= 1 (non-decreasing).

        Interpolated log-log between measured loads, constant beyond the largest one,
        and made non-decreasing: an open queue that has the device's best parallelism at
        a lower count does not lose it by queueing more requests in the host.
        """
        x = np.interp(np.log(n), np.log(self.outstanding), np.log(self.iops))
        return np.maximum.accumulate(np.exp(x))

    def p99_at(self, load: float) -> float:
        """Closed-loop p99 (s) at an in-flight count (at least the smallest measured)."""
        return float(np.interp(max(load, self.outstanding[0]), self.outstanding, self.p99_s))


def fluid_fixed_point(curve: ServiceCurve, lam: float) -> float:
    """In-flight count with ``X(L) = lam`` (``L = lam * L / X(L)``); ``inf`` at saturation."""
    L, X = curve.outstanding, curve.iops
    if lam >= curve.capacity:
        return math.inf
    if lam <= X[0]:
        return lam * L[0] / X[0]  # under one request in flight: QD1 response time
    i = int(np.argmax(X >= lam))
    x = np.interp(math.log(lam), [math.log(X[i - 1]), math.log(X[i])], [math.log(L[i - 1]), math.log(L[i])])
    return float(math.exp(x))


def mean_inflight_poisson(curve: ServiceCurve, lam: float) -> float:
    """Mean in flight of Poisson arrivals on the flow-equivalent server ``mu(n)``."""
    cap = curve.capacity
    if lam >= cap:
        return math.inf
    top = len(curve.flow_rates)  # beyond the last count the device serves at its capacity
    logp = np.concatenate([[0.0], np.cumsum(math.log(lam) - curve.log_flow_rates)])  # log p(n) - log p(0)
    shift = logp.max()
    p = np.exp(logp - shift)
    r = lam / cap
    # geometric tail beyond the last count: p(top + m) = p(top) r^m
    tail_mass = p[-1] * r / (1 - r)
    tail_mean = p[-1] * (top * r / (1 - r) + r / (1 - r) ** 2)
    total = p.sum() + tail_mass
    return float((np.arange(top + 1) @ p + tail_mean) / total)


def burst_scale(ca2: float, cs2: float = 1.0) -> float:
    """Allen-Cunneen's waiting-time factor relative to Poisson arrivals and exponential service."""
    return (ca2 + cs2) / 2.0


@dataclass(frozen=True)
class SteadyState:
    """Open-loop prediction of one unsaturated window (times in seconds)."""

    fluid_inflight: float
    mean_s: float
    p99_s: float
    inflight: float


def steady_state(curve: ServiceCurve, lam: float, ca2: float = 1.0) -> SteadyState:
    """Mean and p99 response time of arrivals at ``lam`` (< capacity) with burstiness ``ca2``."""
    lf = fluid_fixed_point(curve, lam)
    r_fluid = lf / lam
    w_poisson = mean_inflight_poisson(curve, lam) / lam
    wait = max(w_poisson - r_fluid, 0.0) * burst_scale(ca2)
    mean = r_fluid + wait
    p99 = max(curve.p99_at(lf) + wait * math.log(1 / (1 - P99)), mean)
    return SteadyState(lf, mean, p99, lam * mean)


@dataclass(frozen=True)
class Backlog:
    """Requests queued beyond what the device holds in flight, over one window."""

    start: float
    end: float
    mean: float
    at_p99: float  # backlog met by the arrival 99 % of the way through the window


def backlog_over(start: float, lam: float, capacity: float, duration: float) -> Backlog:
    """The backlog path ``B(t) = max(0, B0 + (lam - capacity) t)`` over a window."""
    d = lam - capacity
    end = max(0.0, start + d * duration)
    at_p99 = max(0.0, start + d * duration * P99)
    if duration <= 0:
        return Backlog(start, start, start, start)
    if d >= 0 or start + d * duration >= 0:
        mean = start + d * duration / 2
    else:  # drained to zero at t0 = start / -d within the window
        t0 = start / -d
        mean = start * t0 / (2 * duration)
    return Backlog(start, end, max(mean, 0.0), at_p99)


def backlog_wait(backlog: Backlog, capacity: float) -> tuple[float, float]:
    """Mean and p99 extra wait (s) of arrivals behind a backlog served at ``capacity``."""
    return backlog.mean / capacity, max(backlog.at_p99, backlog.mean) / capacity
