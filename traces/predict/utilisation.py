"""The open-loop prediction corrected by a device's measured open-loop points.

The closed-loop curve cannot see two things an open-loop stream meets, and the open-loop
points (fio ``rate_iops`` with ``rate_process=poisson``, stored with their
``offered_iops``) measure both.  The method's prediction of a window
(:func:`traces.predict.openloop.predict_open_loop`) is split into two parts: the *service* time,
what one request takes alone (the closed-loop response time at the lightest measured
load), and the *wait*, all that concurrency adds to it (the slower fluid response time at
the window's in-flight count, and the queueing of Poisson arrivals scaled by burstiness).
Then:

* **The cold path** scales the service part.  Between sparse arrivals the I/O path goes
  cold (caches, CPU idle states, interrupt moderation), so light-load latency is not the
  QD1 latency (a loop device over tmpfs here: 71 us at 400 IO/s Poisson, 37 us closed
  loop at QD1, 32 us at 5,000 IO/s).  Per measured workload mix the points give the ratio
  ``b + c (1 - exp(-gap / tau))`` over each request's idle gap (:mod:`traces.predict.coldpath`);
  a window gets it over its own gaps.
* **The visible wait** scales the wait part: the share of the queueing the model predicts
  that shows in the latency fio measures.  On a device with a queue of its own (an SSD
  behind the block layer) a request waits after fio timestamps its issue, and the share
  is 1.  On a synchronous, CPU-bound device (zram, a loop device over tmpfs) it runs to
  completion on the CPU that issues it, and a request that has to wait, waits for a CPU
  *before* its issue timestamp: measured on zram, 1 MiB random reads took 253 us at
  6,656 IO/s (60 % of capacity), where the method predicts 240 us of service and 175 us
  of wait, and a timed replay measured 240-290 us from 20 % to 120 % of capacity.  The
  share is one number per device, chosen on a grid from 0 to 1 as the one whose fit
  (cold path refitted for it) has the smallest squared log error over all the device's
  points; ties keep 1, the queue as the method predicts it.

A window's mean latency is ``ratio x service + share x wait`` (its p99 the same with the
p99's own cold path and parts), its workload mix the measured one nearest to it (write
ratio, log2 size, randomness).  Points served under :data:`MIN_SERVED` of their offered
rate were saturated, not open loop: they are left out.  So are points whose mean is above
their p99 (:func:`transient`): under 1 % of their requests make their mean, a rare event of
the run (the block throttle's start-up, a CPU taken away) and not the steady state a
window meets.  Measured on zram throttled at 2,000 IO/s (4 KiB Poisson reads, 16 psync
lanes, real-time, quiet machine): at 1,900 IO/s 53-56 requests waited over 1 ms, all in
the first 500 ms of a 2 s run (mean 105-125 us, p99 4.3-5.2 ms), none after it (mean about
5 us), and at 400-1,800 IO/s none.  A device without open-loop points keeps the method's
answer.

Where ``sweep --for-trace`` measured the replay path's own capacity
(:mod:`traces.predict.ceiling`), the points are predicted on the same capped curve as the
windows, and a point at or over that capacity is saturated and left out (counted in the
notes).  fio's Poisson lanes offer 1-4 % more than asked, so a point asked 95 % of a token
bucket's capacity can land over it: on zram throttled at 2,000 IO/s (4 KiB Poisson reads,
16 real-time lanes, quiet machine, 2026-11-29) fio asked 1,950 was served 2,004 IO/s in its
steady part at 1,265 us mean (p99 25 ms), while timed replays of Poisson traces at 1,941 and
1,960 IO/s measured 16.5 and 11.7 us, at 1,700-1,900 IO/s 9.4-11.2 us, and at 2,040 IO/s
(over the cap) 740 us; replays offered 2,040 and 2,139 were served 1,995-1,997.  Latency
under a token bucket is flat up to the cap and a wall past it, and a point past the wall
interpolated from the last one below it predicted 80-1,450 us for windows at 1,850-1,950
IO/s that the replay served in 8-11 us.

That capacity is measured, and it moves: one validation's probe measured 2,031 IO/s where fio's
points had been served 2,012 (1.2-1.3 ms mean, p50 7-9 us), so they were kept as under it and
windows at 1,780-1,870 IO/s were predicted 22-104 us where the replay measured 8.2-9.0
(docs/benchmarks.md, 2026-11-29 late morning).  A point whose mean is over :data:`WALL` times its
median is left out whatever the capacity (:func:`at_the_wall`): most of its requests took the
median, and a few waited so long that they made the mean, which is the wall of a token bucket
(a request past it waits for the next slice), not the queue that builds before it: on the throttled
reference (2026-11-29 12:50 UTC) fio's points at 405-1,987 IO/s measured a mean 1.05-1.13x their
median, the one served 2,012 IO/s 156x (1,291 us mean, p50 8.3 us).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd

from modeling.store.open_loop_rows import OFFERED, fio_open_loop_rows
from traces.predict.coldpath import MIN_POINTS, ColdPath, fit_cold_path
from traces.predict.openloop import PredictsFrame, predict_open_loop

KEY = ("write_ratio", "request_size", "randomness")
SHARES = np.linspace(1.0, 0.0, 21)  # from 1 down: ties keep the larger share
# a point served below this share of its offered rate was saturated, not open loop (below
# saturation fio's Poisson points serve 100-104 % of the offered rate; on zram 1 MiB reads
# offered 6,880 IO/s were served 91 % at 644 us, against 352-405 us at lighter points)
MIN_SERVED = 0.95
# the cold path is fitted on the points up to this utilisation (with at least MIN_POINTS of
# them): above it the service ratio is a small correction of a large wait, and noisy
COLD_MAX_UTILISATION = 0.35
WALL = 10.0


@dataclass(frozen=True)
class LatencyParts:
    """A prediction's mean and p99 (us), each split into one request's service time alone and the
    wait that concurrency adds to it."""

    service: np.ndarray
    wait: np.ndarray
    service_p99: np.ndarray
    wait_p99: np.ndarray

    @classmethod
    def of(cls, pred: pd.DataFrame) -> LatencyParts:
        """The parts of :func:`traces.predict.openloop.predict_open_loop`'s answer."""
        return cls.split(*(pred[c].to_numpy(np.float64) for c in (
            "pred_latency_mean_us", "pred_service_us", "pred_latency_p99_us", "pred_service_p99_us")))

    @classmethod
    def split(
        cls, mean: np.ndarray, service: np.ndarray, p99: np.ndarray, service_p99: np.ndarray
    ) -> LatencyParts:
        """The parts of a mean and a p99 (us) whose one request alone takes ``service``/``service_p99``."""
        parts = []
        for t, alone in ((mean, service), (p99, service_p99)):
            s = np.minimum(alone, t)
            parts += [s, t - s]
        return cls(*parts)


MIX_WEIGHTS = np.array([1.0, 0.25, 1.0])
"""A size doubling counts as much as a quarter of the write-ratio range (distance between mixes)."""


def mix_groups(rows: pd.DataFrame) -> list[pd.Series]:
    """The columns stored rows are grouped into mixes by: write ratio and randomness (rounded to
    3 places) and request size."""
    return [rows["write_ratio"].astype(float).round(3), rows["request_size"].astype(float),
            rows["randomness"].astype(float).round(3)]


def mix_keys(frame: pd.DataFrame) -> np.ndarray:
    """Each row's mix as (write ratio, log2 request size, randomness)."""
    return np.column_stack([
        frame["write_ratio"].to_numpy(np.float64),
        np.log2(frame["request_size"].to_numpy(np.float64)),
        frame["randomness"].to_numpy(np.float64),
    ])


def nearest_mix(frame: pd.DataFrame, keys: np.ndarray) -> np.ndarray:
    """Index into ``keys`` (measured mixes, as :func:`mix_keys`) of each row's nearest mix."""
    return nearest_key(mix_keys(frame), keys)


def nearest_key(rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index into ``keys`` of the nearest of each of ``rows`` (both as :func:`mix_keys`)."""
    dist = (np.abs(rows[:, None, :] - keys[None, :, :]) * MIX_WEIGHTS).sum(axis=2)
    return np.argmin(dist, axis=1)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class MixCorrection:
    """One measured workload mix: the cold paths of its service ratios (mean, p99), and what the
    points measured beyond them (log residuals over log offered rate)."""

    cold_mean: ColdPath
    cold_p99: ColdPath
    log_rate: np.ndarray  # increasing
    resid_mean: np.ndarray
    resid_p99: np.ndarray

    def ratios(self, rate: np.ndarray, hist: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Service ratios of the mean and the p99 of windows at ``rate`` with gap histograms ``hist``."""
        out = []
        for cold, resid in ((self.cold_mean, self.resid_mean), (self.cold_p99, self.resid_p99)):
            measured = np.exp(np.interp(np.log(rate), self.log_rate, resid))
            out.append(cold.poisson(rate) * measured * cold.adjustment(rate, hist))
        return out[0], out[1]


@dataclass
class UtilisationCorrection:
    """Per measured workload mix its :class:`MixCorrection`; the device's visible share of the wait;
    how many points were left out (saturated, transient)."""

    keys: np.ndarray  # (g, 3): write ratio, log2 size, randomness
    mixes: list[MixCorrection]
    visible_wait: float
    left_out: dict[str, int] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One line per kind of point left out, if any."""
        out = []
        n = self.left_out.get("transient", 0)
        if n:
            out.append(f"{n} open-loop point(s) left out: their mean was above their p99 (under 1 % of "
                       f"the requests made the mean: a start-up transient or a CPU taken away, not the "
                       "steady state)")
        n = self.left_out.get("wall", 0)
        if n:
            out.append(f"{n} open-loop point(s) left out: their mean was over {WALL:g}x their median (a "
                       "few requests waited at a token bucket's wall: past the capacity, not a queue)")
        n = self.left_out.get("over_capacity", 0)
        if n:
            out.append(f"{n} open-loop point(s) left out: offered at or over the replay path's capacity "
                       "for their mix (saturated, not open loop)")
        return out

    def factors(
        self, windows: pd.DataFrame, pred: pd.DataFrame, gap_hist: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and p99 latency multipliers of ``pred`` for each window (1 where saturated).

        ``gap_hist`` (the characterisation's per-window gap histogram) rescales the cold
        path by each window's own gaps instead of Poisson gaps at its rate.
        """
        mean, service, p99, service_p99 = (pred[c].to_numpy(np.float64) for c in (
            "pred_latency_mean_us", "pred_service_us", "pred_latency_p99_us", "pred_service_p99_us"))
        return self.factors_of(mix_keys(windows), windows["iops"].to_numpy(np.float64), mean, service, p99,
                               service_p99, pred["saturated"].to_numpy(bool), gap_hist)

    def factors_of(
        self, mixes: np.ndarray, rate: np.ndarray, mean: np.ndarray, service: np.ndarray, p99: np.ndarray,
        service_p99: np.ndarray, saturated: np.ndarray, gap_hist: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`factors` of windows given as arrays: their mixes (as :func:`mix_keys`), offered
        rates, predicted mean and p99 (us) with one request's time alone, saturation flags."""
        nearest = nearest_key(mixes, self.keys)
        parts = LatencyParts.split(mean, service, p99, service_p99)
        live = ~saturated & (mean > 0) & (p99 > 0) & (rate > 0)
        mean_f, p99_f = np.ones(len(rate)), np.ones(len(rate))
        v = self.visible_wait
        for g in np.unique(nearest[live]):
            i = np.flatnonzero(live & (nearest == g))
            rm, rp = self.mixes[g].ratios(rate[i], None if gap_hist is None else gap_hist[i])
            mean_f[i] = (rm * parts.service[i] + v * parts.wait[i]) / mean[i]
            p99_f[i] = (rp * parts.service_p99[i] + v * parts.wait_p99[i]) / p99[i]
        return mean_f, p99_f


def _light(idx: np.ndarray, utilisation: np.ndarray) -> np.ndarray:
    """The group's points the cold path is fitted on: those up to COLD_MAX_UTILISATION, or its
    MIN_POINTS least utilised."""
    light = idx[utilisation[idx] <= COLD_MAX_UTILISATION]
    return light if len(light) >= MIN_POINTS else idx[np.argsort(utilisation[idx])[:MIN_POINTS]]


def _fit_groups(
    groups: list[np.ndarray], utilisation: np.ndarray, rate: np.ndarray, y: np.ndarray, service: np.ndarray,
    wait: np.ndarray, share: float,
) -> tuple[float, list[ColdPath]]:
    """Cold paths of ``y = ratio x service + share x wait`` per group, and the fit's squared log error."""
    sse, paths = 0.0, []
    for idx in groups:
        rest = y[idx] - share * wait[idx]
        if np.any(rest <= 0):  # the wait alone is over what was measured: this share cannot be
            return np.inf, []
        light = _light(idx, utilisation)
        cold = fit_cold_path(rate[light], np.log((y[light] - share * wait[light]) / service[light]))
        assert cold is not None  # every point is usable
        fit = cold.poisson(rate[idx]) * service[idx] + share * wait[idx]
        sse += float(np.sum(np.log(fit / y[idx]) ** 2))
        paths.append(cold)
    return sse, paths


def learn_correction(
    model: PredictsFrame, points: pd.DataFrame, loads: Iterable[tuple[int, int]],
    ceilings: Callable[[pd.DataFrame], np.ndarray] | None = None,
) -> UtilisationCorrection | None:
    """Fit the correction from open-loop points (rows with ``offered_iops``); None without any.

    ``ceilings(rows)``: each row's capacity ceiling, as the windows get it
    (:meth:`traces.predict.ceiling.ReplayCeilings.for_windows`); points at or over the capped
    capacity are left out and counted (see the module docstring)."""
    pts = fio_open_loop_rows(points)  # not the replay path's capacity points (traces.predict.ceiling)
    pts = pts[(pts["latency_mean_us"] > 0) & (pts["latency_p99_us"] > 0)]
    if "iops" in pts:
        pts = pts[~(pts["iops"] < MIN_SERVED * pts[OFFERED])]
    rare = transient(pts)
    walled = at_the_wall(pts) & ~rare
    pts = pts[~rare & ~walled].reset_index(drop=True)
    if pts.empty:
        return None
    win = pts.copy()
    win["iops"] = pts[OFFERED].astype(np.float64)
    win["arrival_cv2"] = 1.0  # fio's rate_process=poisson
    win["window_start_s"] = np.arange(len(win)) * 1e6  # far apart: no backlog carried between points
    win["window_end_s"] = win["window_start_s"] + 1.0
    win["queue_depth"] = 1
    for f, src in (("numjobs", None), ("read_size", "request_size"), ("write_size", "request_size"),
                   ("read_randomness", "randomness"), ("write_randomness", "randomness")):
        if f not in win or win[f].isna().any():
            win[f] = 1 if src is None else win[src]
    ceiling = 1.0 if ceilings is None else ceilings(win)
    pred = predict_open_loop(model, win, loads, ceiling)
    rate = win["iops"].to_numpy(np.float64)
    parts = LatencyParts.of(pred)
    saturated = pred["saturated"].to_numpy(bool)
    # saturated only because of the cap: under the model's own capacity, the capped one over the ceiling
    over = int((saturated & (rate < pred["capacity_iops"].to_numpy(np.float64) / ceiling)).sum())
    ok = ~saturated & (parts.service > 0)
    if not ok.any():
        return None
    keep = np.flatnonzero(ok)
    pts, rate = pts.iloc[keep].reset_index(drop=True), rate[keep]
    service, wait = parts.service[keep], parts.wait[keep]
    service_p99, wait_p99 = parts.service_p99[keep], parts.wait_p99[keep]
    util = pred["utilisation"].to_numpy(np.float64)[keep]
    y_mean = pts["latency_mean_us"].to_numpy(np.float64)
    y_p99 = pts["latency_p99_us"].to_numpy(np.float64)
    by_mix = pts[list(KEY)].round({"write_ratio": 3, "randomness": 3}).astype(np.float64).groupby(list(KEY))
    keys = [[k[0], np.log2(k[1]), k[2]] for k in by_mix.indices]
    groups = list(by_mix.indices.values())
    # the share of the wait that shows: one number per device, fitted on the mean latency
    fit = partial(_fit_groups, groups, util, rate, y_mean, service, wait)
    share = float(min(SHARES, key=lambda s: fit(float(s))[0]))
    _, cold_mean = fit(share)
    # a point whose p99 is under its share of the wait: its whole p99 is the service's
    rest = y_p99 - share * wait_p99
    log_p99 = np.log(np.where(rest > 0, rest, y_p99) / service_p99)
    log_mean = np.log((y_mean - share * wait) / service)
    mixes = []
    for idx, cm in zip(groups, cold_mean, strict=True):
        light = _light(idx, util)
        cp = fit_cold_path(rate[light], log_p99[light])
        assert cp is not None
        # what each point measured beyond the cold path, repeats of a rate averaged on the log scale
        lr, inv = np.unique(np.round(np.log(rate[idx]), 6), return_inverse=True)
        n = np.bincount(inv)
        rm = np.bincount(inv, log_mean[idx] - np.log(cm.poisson(rate[idx]))) / n
        rp = np.bincount(inv, log_p99[idx] - np.log(cp.poisson(rate[idx]))) / n
        mixes.append(MixCorrection(cm, cp, lr, rm, rp))
    return UtilisationCorrection(np.array(keys, dtype=np.float64), mixes, share,
                                 {"transient": int(rare.sum()), "wall": int(walled.sum()),
                                  "over_capacity": over})


def at_the_wall(points: pd.DataFrame) -> pd.Series:
    """Open-loop points whose mean latency is over :data:`WALL` times their median (see the module
    docstring); none where the median was not stored."""
    if "latency_p50_us" not in points:
        return pd.Series(False, index=points.index)
    p50 = pd.to_numeric(points["latency_p50_us"], errors="coerce")
    return (points["latency_mean_us"].astype(float) > WALL * p50).fillna(False)


def transient(points: pd.DataFrame) -> pd.Series:
    """Open-loop points whose mean latency is above their p99 (see the module docstring)."""
    return points["latency_mean_us"].astype(float) > points["latency_p99_us"].astype(float)
