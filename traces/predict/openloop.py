"""Predict what a trace's windows do on a device: the open-loop and the trace-QD methods.

``open-loop`` (the default) asks the device's closed-loop model for its curve ``X(L)`` at
each window's mix, sizes and randomness, then solves the queue in :mod:`traces.predict.queueing`
for the window's arrival rate and burstiness.  ``trace-qd`` is the older method, kept for
comparison: it predicts the closed-loop workload whose queue depth is what the trace's
*original* system had in flight, which says nothing about the device being predicted.

Which closed-loop path gives ``X(L)``: for each total in-flight count ``L = qd x numjobs``
among the device's measured loads, the split with the most IO/s.  An open-loop stream's
requests are independent of each other, so no single submitter's queue limits how the
device serves them: the device's own best way of serving ``L`` requests is what an
open-loop stream meets (fio's replay, too, issues each in-flight request from its own job).
On a device swept with one job only, this is the queue-depth path.

The model is used only through ``predict_frame`` (any object with that method: a
:class:`~modeling.serving.device_model.DeviceModel` or a test's analytic fake).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput
from modeling.workload import MIB, WORKLOAD_FIELDS
from modeling.workload_matrix import FIELD_INDEX
from traces.predict.queueing import Backlog, ServiceCurve, backlog_over, backlog_wait, steady_state

METHODS = ("open-loop", "trace-qd")
BOUNDS = ("value", "lower", "upper")
DEFAULT_LOADS = tuple((qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64))
_QD, _JOBS = FIELD_INDEX["queue_depth"], FIELD_INDEX["numjobs"]


class PredictsFrame(Protocol):
    """The public prediction interface the methods need."""

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame: ...


@dataclass
class Curves:
    """Per window and bound, the envelope curve: in-flight counts, IO/s and p99 (s)."""

    outstanding: np.ndarray  # (n_loads,)
    iops: dict[str, np.ndarray]  # bound -> (n_windows, n_loads)
    p99_s: dict[str, np.ndarray]
    extrapolated: np.ndarray  # (n_windows,)

    def curve(self, i: int, bound: str) -> ServiceCurve:
        """Window ``i``'s curve; the lower latency bound pairs with the upper IO/s bound."""
        return ServiceCurve(self.outstanding, self.iops[bound][i], self.p99_s[bound][i])


def _check_loads(loads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out = sorted({(int(q), int(j)) for q, j in loads})
    if not out:
        raise InvalidInput("no measured loads (queue depth x numjobs) to build a service curve from")
    return out


def closed_loop_curves(
    model: PredictsFrame,
    windows: pd.DataFrame,
    loads: Iterable[tuple[int, int]],
    write_ratios: Sequence[float] | None = None,
    sizes: Sequence[int] | None = None,
) -> Curves:
    """Ask the model for every window's closed-loop curve over ``loads``: :func:`matrix_curves`
    of the windows' workload fields."""
    return matrix_curves(model, window_matrix(windows), loads, write_ratios, sizes)


def window_matrix(windows: pd.DataFrame) -> np.ndarray:
    """The ``(n, 9)`` matrix of the windows' workload fields (NaN where a value is missing)."""
    return windows[list(WORKLOAD_FIELDS)].to_numpy(np.float64, na_value=np.nan)


def matrix_curves(
    model: PredictsFrame,
    w: np.ndarray,
    loads: Iterable[tuple[int, int]],
    write_ratios: Sequence[float] | None = None,
    sizes: Sequence[int] | None = None,
) -> Curves:
    """Every workload's closed-loop curve over ``loads`` (``w``: rows of the workload fields, the
    load fields ignored); arrays in and out, one model call per swept value a row lies between.

    With the device's swept ``write_ratios`` (and request ``sizes``), a window between two
    of them gets the curves at both, blended by where it lies: one request's time linearly
    (a mixed workload's requests are reads and writes in that proportion; a request's time
    is a fixed part plus a transfer), IO/s as its inverse, and p99 linearly.  Not the
    model at the window's own value: trees cut at the swept values (XGBoost's ``x < 0.4``),
    so on the zram reference 40 % writes predicted 131 us at a ratio of 0.39 and 225 us at
    0.41, and 8 KiB reads (swept at 4 and 16 KiB) measured 3.30 us at QD1 against 2.33 us predicted.
    Outside the swept range the model's own answer stays.  Give ``sizes`` only for a device
    swept with one size for reads and writes: a window's curves are then taken at its mean
    request size for both (what such a sweep measured).
    """
    axes = [(f, np.unique(np.asarray(v, np.float64))) for f, v in (("write_ratio", write_ratios),
                                                                   ("request_size", sizes)) if v is not None]
    return _blended(model, np.asarray(w, np.float64), loads, [(f, v) for f, v in axes if len(v) >= 2])


_SIZE_FIELDS = [FIELD_INDEX[f] for f in ("request_size", "read_size", "write_size")]


def _at(w: np.ndarray, field: str, values: np.ndarray) -> np.ndarray:
    """The workloads with ``field`` set to ``values`` (a size, in whole bytes, sets both directions' too)."""
    out = w.copy()
    if field != "request_size":
        out[:, FIELD_INDEX[field]] = values
    else:
        out[:, _SIZE_FIELDS] = np.round(values).astype(np.int64)[:, None]
    return out


def _blended(
    model: PredictsFrame, w: np.ndarray, loads: Iterable[tuple[int, int]], axes: list[tuple[str, np.ndarray]],
) -> Curves:
    if not axes:
        return _curves(model, w, loads)
    (field, swept), rest = axes[0], axes[1:]
    x = w[:, FIELD_INDEX[field]]
    inside = (x > swept[0]) & (x < swept[-1])
    hi_idx = np.clip(np.searchsorted(swept, x), 1, len(swept) - 1)
    lo, hi = np.where(inside, swept[hi_idx - 1], x), np.where(inside, swept[hi_idx], x)
    t = np.where(inside & (hi > lo), (x - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0)[:, None]
    a = _blended(model, _at(w, field, lo), loads, rest)
    if not np.any(t > 0):
        return a
    b = _blended(model, _at(w, field, hi), loads, rest)
    iops = {k: 1.0 / ((1 - t) / a.iops[k] + t / b.iops[k]) for k in a.iops}
    p99 = {k: (1 - t) * a.p99_s[k] + t * b.p99_s[k] for k in a.p99_s}
    return Curves(a.outstanding, iops, p99, a.extrapolated | b.extrapolated)


ModelArrays = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
"""Per metric: (value, lower, upper, extrapolated) arrays, one entry per workload."""


def model_arrays(model: PredictsFrame, w: np.ndarray, metrics: Sequence[str]) -> ModelArrays:
    """The model's answers for the workload matrix ``w``: a device model's own array form
    (``predict_arrays``: no frame), else its ``predict_frame`` (a test's analytic fake).
    A bound the model does not give is NaN, an extrapolation flag it does not give False."""
    columns = {f: w[:, i] for i, f in enumerate(WORKLOAD_FIELDS)}
    arrays = getattr(model, "predict_arrays", None)
    if arrays is not None:
        return {m: a[:4] for m, a in arrays(columns, metrics).items()}
    pred = model.predict_frame(pd.DataFrame(columns), metrics=list(metrics))
    nan, no = np.full(len(w), np.nan), np.zeros(len(w), dtype=bool)

    def col(name: str, default: np.ndarray) -> np.ndarray:
        return pred[name].to_numpy() if name in pred else default

    return {m: (col(f"pred_{m}", nan), col(f"pred_{m}_lower", nan), col(f"pred_{m}_upper", nan),
                col(f"{m}_extrapolated", no)) for m in metrics}


def _curves(model: PredictsFrame, w: np.ndarray, loads: Iterable[tuple[int, int]]) -> Curves:
    """The model's closed-loop curve of every workload over ``loads`` (one batch call)."""
    pairs = _check_loads(loads)
    k, m = len(w), len(pairs)
    grid = np.repeat(w, m, axis=0)
    grid[:, _QD] = np.tile([q for q, _ in pairs], k)
    grid[:, _JOBS] = np.tile([j for _, j in pairs], k)
    pred = model_arrays(model, grid, ("iops", "latency_p99_us"))
    products = np.array([q * j for q, j in pairs])
    outstanding = np.unique(products)
    x = np.asarray(pred["iops"][0], np.float64).reshape(k, m)
    iops: dict[str, np.ndarray] = {}
    p99: dict[str, np.ndarray] = {}
    # the split of each in-flight count with the most IO/s (see the module docstring)
    pick = np.empty((k, len(outstanding)), dtype=np.int64)
    for c, total in enumerate(outstanding):
        idx = np.flatnonzero(products == total)
        pick[:, c] = idx[np.argmax(x[:, idx], axis=1)]
    rows = np.arange(k)[:, None]
    # The lower latency bound comes with the upper IOPS bound: pair them by what they mean
    # (a bound the model does not give everywhere is its value).
    for b, ib, pb in (("value", 0, 0), ("lower", 2, 1), ("upper", 1, 2)):
        xi = np.asarray(pred["iops"][ib], np.float64)
        pi = np.asarray(pred["latency_p99_us"][pb], np.float64)
        xi = xi if not np.isnan(xi).any() else np.asarray(pred["iops"][0], np.float64)
        pi = pi if not np.isnan(pi).any() else np.asarray(pred["latency_p99_us"][0], np.float64)
        iops[b] = xi.reshape(k, m)[rows, pick]
        p99[b] = pi.reshape(k, m)[rows, pick] / 1e6
    if not (np.all(np.isfinite(iops["value"])) and np.all(iops["value"] > 0)):
        raise InvalidInput("the device model predicted a non-positive IOPS for a window's workload")
    ext = np.zeros(k, dtype=bool)
    for metric in ("iops", "latency_p99_us"):
        ext |= np.asarray(pred[metric][3], bool).reshape(k, m).any(axis=1)
    return Curves(outstanding.astype(np.float64), iops, p99, ext)


def cap_curves(curves: Curves, ceiling: float | np.ndarray) -> Curves:
    """The curves with each window's capacity moved to ``ceiling`` x its own (``ceiling > 0``; one
    number, or one per window).

    Under 1, IO/s is capped there: for a reference whose replay or open-loop path serves less than
    the closed-loop sweeps (:mod:`traces.replay.capacity`, :mod:`traces.predict.ceiling`,
    :mod:`traces.capacity.ceiling`), the device as that path reaches it.

    Over 1 (the path was measured to serve more than closed loop reached), the measured curve is
    kept as it is and one load is added beyond its largest, ``L_top``: at ``L_top x s`` (``s`` the
    largest ceiling asked), IO/s ``ceiling x capacity``.  A window whose ceiling is that largest
    one goes on at slope 1 in log-log: more requests in flight at the top load's response time,
    as if the device had ``s`` times its parallelism there, so the response time without queueing
    does not rise between the two capacities and the queueing near the new one is the same
    flow-equivalent chain's (:mod:`traces.predict.queueing`).  A window with a smaller ceiling
    over 1 reaches it on a shallower slope, its p99 there the top load's times the rise of its
    response time; a window capped (or at 1) stays flat at its capacity in the added load, which
    changes none of its answers (beyond its largest load the chain already served at capacity).
    """
    c = np.asarray(ceiling, dtype=np.float64)
    if not np.all(c > 0):
        raise InvalidInput("the capacity ceiling must be over 0")
    if np.all(c == 1):
        return curves
    c = c.reshape(-1, 1) if c.ndim else c
    iops = {b: np.minimum(x, c * x.max(axis=1, keepdims=True)) for b, x in curves.iops.items()}
    if not np.any(c > 1):
        return Curves(curves.outstanding, iops, curves.p99_s, curves.extrapolated)
    stretch = float(c.max())
    # the added load: every window's new capacity (a capped one's: its capped one, flat), and its p99
    # the top load's times the rise of the response time, L / X, from the top load to the added one
    rise = np.where(c > 1, stretch / np.maximum(c, 1.0), 1.0)
    out_iops = {b: np.concatenate([iops[b], c * x.max(axis=1, keepdims=True)], axis=1)
                for b, x in curves.iops.items()}
    out_p99 = {b: np.concatenate([p, p[:, -1:] * rise], axis=1) for b, p in curves.p99_s.items()}
    outstanding = np.append(curves.outstanding, curves.outstanding[-1] * stretch)
    return Curves(outstanding, out_iops, out_p99, curves.extrapolated)


def predict_open_loop(
    model: PredictsFrame,
    windows: pd.DataFrame,
    loads: Iterable[tuple[int, int]] = DEFAULT_LOADS,
    ceiling: float | np.ndarray = 1.0,
    write_ratios: Sequence[float] | None = None,
    sizes: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Per window: capacity, utilisation, saturation, in-flight count, mean and p99 latency.

    ``windows`` is a characterisation table (:mod:`traces.characterize`): workload fields,
    ``window_start_s``/``window_end_s``, ``iops`` (the offered rate) and ``arrival_cv2``.
    ``ceiling`` moves the device's capacity to that fraction of the model's (:func:`cap_curves`);
    ``write_ratios`` and ``sizes``, the device's swept ones, blend curves between them
    (:func:`closed_loop_curves`).
    """
    curves = cap_curves(closed_loop_curves(model, windows, loads, write_ratios, sizes), ceiling)
    lam = windows["iops"].to_numpy(np.float64)
    ca2 = windows["arrival_cv2"].to_numpy(np.float64) if "arrival_cv2" in windows else np.ones(len(lam))
    ca2 = np.where(np.isfinite(ca2), ca2, 1.0)
    start = windows["window_start_s"].to_numpy(np.float64)
    end = windows["window_end_s"].to_numpy(np.float64)
    out: dict[str, Any] = {}
    for b in BOUNDS:
        out[b] = _solve(curves, b, lam, ca2, start, end)
    v = out["value"]
    size = windows["request_size"].to_numpy(np.float64)
    served = np.minimum(lam, v["capacity"])
    return pd.DataFrame(
        {
            "capacity_iops": v["capacity"],
            "utilisation": lam / v["capacity"],
            "saturated": v["saturated"],
            "pred_inflight": v["inflight"],
            "pred_fluid_inflight": v["fluid"],
            # one request's time alone: the closed-loop response time at the lightest load
            "pred_service_us": v["service"] * 1e6,
            "pred_service_p99_us": v["service_p99"] * 1e6,
            "pred_latency_mean_us": v["mean"] * 1e6,
            "pred_latency_mean_us_lower": out["lower"]["mean"] * 1e6,
            "pred_latency_mean_us_upper": out["upper"]["mean"] * 1e6,
            "pred_latency_p99_us": v["p99"] * 1e6,
            "pred_latency_p99_us_lower": out["lower"]["p99"] * 1e6,
            "pred_latency_p99_us_upper": out["upper"]["p99"] * 1e6,
            "pred_iops": served,
            "pred_bandwidth_mib_s": served * size / MIB,
            "extrapolated": curves.extrapolated,
        },
        index=windows.index,
    )


def _solve(
    curves: Curves, bound: str, lam: np.ndarray, ca2: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, np.ndarray]:
    """Walk the windows in time order, carrying the backlog of saturated windows forward."""
    k = len(lam)
    res = {name: np.full(k, np.nan) for name in ("capacity", "inflight", "fluid", "mean", "p99", "service",
                                                  "service_p99")}
    res["saturated"] = np.zeros(k, dtype=bool)
    carried, prev_end = 0.0, None
    for i in np.argsort(start, kind="stable"):
        curve = curves.curve(int(i), bound)
        cap = curve.capacity
        if prev_end is not None and carried > 0:
            carried = max(0.0, carried - cap * max(start[i] - prev_end, 0.0))  # drained in a gap
        dur = max(end[i] - start[i], 0.0)
        bl: Backlog = backlog_over(carried, lam[i], cap, dur)
        extra_mean, extra_p99 = backlog_wait(bl, cap)
        res["capacity"][i] = cap
        res["service"][i] = curve.outstanding[0] / curve.iops[0]
        res["service_p99"][i] = curve.p99_s[0]
        if lam[i] >= cap:
            full = float(curve.outstanding[int(np.argmax(curve.iops))])
            res["saturated"][i] = True
            res["fluid"][i] = np.inf
            res["mean"][i] = full / cap + extra_mean
            res["p99"][i] = max(curve.p99_at(full) + extra_p99, res["mean"][i])
            res["inflight"][i] = full + bl.mean
        else:
            st = steady_state(curve, float(lam[i]), float(ca2[i]))
            res["fluid"][i] = st.fluid_inflight
            res["mean"][i] = st.mean_s + extra_mean
            res["p99"][i] = st.p99_s + extra_p99
            res["inflight"][i] = st.inflight + bl.mean
        carried, prev_end = bl.end, end[i]
    return res


def predict_trace_qd(model: PredictsFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """The older method: the closed-loop prediction at the trace's own queue depth."""
    pred = model.predict_frame(windows[list(WORKLOAD_FIELDS)])
    lam = windows["iops"].to_numpy(np.float64)
    cap = pred["pred_iops"].to_numpy(np.float64)
    out = pred[[c for c in pred.columns if c.startswith("pred_latency")]].copy()
    out.insert(0, "capacity_iops", cap)
    out.insert(1, "utilisation", lam / cap)
    out.insert(2, "saturated", lam >= cap)
    out.insert(3, "pred_inflight", windows["queue_depth"].to_numpy(np.float64))
    served = np.minimum(lam, cap)
    out["pred_iops"] = served
    out["pred_bandwidth_mib_s"] = served * windows["request_size"].to_numpy(np.float64) / MIB
    ext = np.zeros(len(out), dtype=bool)
    for col in ("latency_mean_us_extrapolated", "latency_p99_us_extrapolated"):
        if col in pred:
            ext |= pred[col].to_numpy(bool)
    out["extrapolated"] = ext
    return out


def predict_windows(
    model: PredictsFrame,
    windows: pd.DataFrame,
    *,
    method: str = "open-loop",
    loads: Iterable[tuple[int, int]] = DEFAULT_LOADS,
    ceiling: float | np.ndarray = 1.0,
    write_ratios: Sequence[float] | None = None,
    sizes: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Predictions per window by ``method`` (``open-loop`` or ``trace-qd``; ``ceiling``,
    ``write_ratios`` and ``sizes``: open-loop only)."""
    if method == "open-loop":
        return predict_open_loop(model, windows, loads, ceiling, write_ratios, sizes)
    if method == "trace-qd":
        return predict_trace_qd(model, windows)
    raise InvalidInput(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
