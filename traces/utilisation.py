"""Open-loop latency against utilisation, learned from a device's measured open-loop points.

The closed-loop curve cannot see what sparse arrivals do: between them the I/O path goes
cold (caches, CPU idle states, interrupt moderation), so light-load latency is not the QD1
latency (a loop device over tmpfs here: 71 us at 400 IO/s Poisson, 37 us closed loop at
QD1, 32 us at 5,000 IO/s).  Where the device has open-loop points (fio ``rate_iops`` with
``rate_process=poisson``, stored with their ``offered_iops``), each point gives the ratio of
its measured latency to what the closed-loop method predicts for it.  A window's
prediction is multiplied by that ratio, interpolated over utilisation (offered / capacity)
on the measured workload nearest to the window's (write ratio, log2 size, randomness);
outside the measured utilisations the nearest end's ratio holds.  A device without such
points keeps the closed-loop method's answer.  Given a window's inter-arrival gaps, the
ratio's cold-path part is rescaled by those gaps (:mod:`traces.coldpath`), since a burst
of back-to-back requests runs hot whatever the window's mean rate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from modeling.store.open_loop_rows import OFFERED, open_loop_rows
from traces.coldpath import ColdPath, fit_cold_path, gap_adjustment
from traces.openloop import PredictsFrame, predict_open_loop

KEY = ("write_ratio", "request_size", "randomness")


@dataclass
class UtilisationCorrection:
    """Per measured workload: utilisation and log latency ratios (mean, p99), sorted by utilisation."""

    keys: np.ndarray  # (g, 3): write ratio, log2 size, randomness
    curves: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    cold: list[tuple[ColdPath | None, ColdPath | None]] | None = None  # per group: mean, p99

    def factors(
        self, windows: pd.DataFrame, utilisation: np.ndarray, gap_hist: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mean and p99 latency multipliers for each window (1 where saturated).

        ``gap_hist`` (the characterisation's per-window gap histogram) rescales the
        cold-path part by the window's own gaps instead of Poisson gaps at its rate.
        """
        q = np.column_stack(
            [
                windows["write_ratio"].to_numpy(np.float64),
                np.log2(windows["request_size"].to_numpy(np.float64)),
                windows["randomness"].to_numpy(np.float64),
            ]
        )
        # a size doubling counts as much as a quarter of the write-ratio range
        dist = np.abs(q[:, None, :] - self.keys[None, :, :]) * np.array([1.0, 0.25, 1.0])
        nearest = np.argmin(dist.sum(axis=2), axis=1)
        mean_f = np.ones(len(windows))
        p99_f = np.ones(len(windows))
        rate = windows["iops"].to_numpy(np.float64) if "iops" in windows else None
        for i, g in enumerate(nearest):
            if not utilisation[i] < 1:
                continue
            u, lm, lp = self.curves[g]
            mean_f[i] = float(np.exp(np.interp(utilisation[i], u, lm)))
            p99_f[i] = float(np.exp(np.interp(utilisation[i], u, lp)))
            if gap_hist is not None and rate is not None and self.cold is not None:
                cm, cp = self.cold[g]
                r, h = rate[i : i + 1], gap_hist[i : i + 1]
                mean_f[i] *= float(gap_adjustment(cm, r, h)[0])
                p99_f[i] *= float(gap_adjustment(cp, r, h)[0])
        return mean_f, p99_f


def learn_correction(
    model: PredictsFrame, points: pd.DataFrame, loads: Iterable[tuple[int, int]]
) -> UtilisationCorrection | None:
    """Fit the correction from open-loop points (rows with ``offered_iops``); None without any."""
    pts = open_loop_rows(points)
    pts = pts[(pts["latency_mean_us"] > 0) & (pts["latency_p99_us"] > 0)].reset_index(drop=True)
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
    pred = predict_open_loop(model, win, loads)
    ok = ~pred["saturated"].to_numpy(bool)
    if not ok.any():
        return None
    pts, pred = pts[ok].reset_index(drop=True), pred[ok].reset_index(drop=True)
    log_mean = np.log(pts["latency_mean_us"].to_numpy(np.float64) / pred["pred_latency_mean_us"].to_numpy())
    log_p99 = np.log(pts["latency_p99_us"].to_numpy(np.float64) / pred["pred_latency_p99_us"].to_numpy())
    util = pred["utilisation"].to_numpy(np.float64)
    rate = pts[OFFERED].to_numpy(np.float64)
    groups = pts[list(KEY)].round({"write_ratio": 3, "randomness": 3}).astype(np.float64)
    keys, curves, cold = [], [], []
    for key, idx in groups.groupby(list(KEY)).indices.items():
        cold.append((fit_cold_path(rate[idx], util[idx], log_mean[idx]),
                     fit_cold_path(rate[idx], util[idx], log_p99[idx])))
        order = idx[np.argsort(util[idx])]
        # repeats of one offered rate are averaged on the log scale
        u, inv = np.unique(np.round(util[order], 6), return_inverse=True)
        lm = np.bincount(inv, log_mean[order]) / np.bincount(inv)
        lp = np.bincount(inv, log_p99[order]) / np.bincount(inv)
        keys.append([key[0], np.log2(key[1]), key[2]])
        curves.append((u, lm, lp))
    return UtilisationCorrection(np.array(keys, dtype=np.float64), curves, cold)
