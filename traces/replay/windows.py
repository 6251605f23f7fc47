"""A replay's per-window measurements, from fio's per-I/O latency logs.

Per window (on the trace's time axis) latency mean and p99 are over the window's requests:
fio's per-I/O latency plus each request's wait for its lane (``lane_wait_us``): the time
its lane was still busy with the lane's earlier requests when the trace says it arrives,
by Lindley's recursion over the lane's measured I/O times and the trace's gaps
(:func:`lane_waits`).  That wait is real queueing -- an application issuing from that many
threads would see it too -- and ``latency_includes_wait`` says whether a window had any.
Not the issue lateness against the trace's timestamps (``lateness_mean_us``, kept as a
diagnostic): fio waits for each iolog entry relative to the previous issue and does not
make up its sleeps' overshoot (fio 3.33's ``iolog_delay`` compares the overshoot with the
whole gap, so it is almost never carried forward), so, uncompensated, every lane's clock
fell behind by a few tens of microseconds per entry that slept, with the lane idle; even
compensated, lanes end a few milliseconds apart.  Measured on zram
with 16 lanes, uncompensated: wsrch (400 IO/s, 10 s) fell 27 us per entry behind, 8 ms on average and
16 ms at worst by the end, while no lane was ever busy when its next request was due
(Lindley wait 0); counted as a wait, that lateness made the measured mean latency 1.3-3.4 ms
against 17-29 us of I/O time in the later windows.

The replay's rate is counted over each window's own span: ``window_drift`` is the
replay's issue rate over the trace's within the window (the least-squares slope of issue
time on trace time, over all the window's requests, :func:`_rate_drift`) minus 1, and the
served IOPS and bandwidth are the trace's offered ones times ``1 + window_drift``; the
bandwidth counts the bytes replayed (``replayed_bytes``), which differ from the trace's
own (``trace_bytes``) where sizes the target cannot take were rounded up.  Windows with fewer than
:data:`MIN_SPAN_REQUESTS` requests, or whose slope's standard error exceeds
:data:`DRIFT_RESOLUTION`, have no drift: fio's log has millisecond timestamps, and the
lanes' start times differ by a few milliseconds (each lane's iolog clock starts with its
own process), so a few requests over a short span cannot resolve 2 %.

A window whose backlog grew -- the replay's rate over the window more than
:data:`SATURATION_DRIFT` under the trace's -- is ``measured_saturated``, unless the
replay itself fell behind.  Who did: a replay behind its schedule has a backlog, and a work-conserving
device with a backlog is never idle, so a window that fell behind (drift under
-:data:`DRIFT_WARN`) with fewer than
:data:`MIN_BACKLOG_INFLIGHT` I/O in flight on average (``replay_inflight``, the sum of
fio's I/O times over the window's span) had its backlog wait on fio or the CPU, not on the
device: it is also ``replay_limited`` (on zram the CPU is the device too, so there it is
the machine as a whole): its latency, which includes those waits, is left out of the
latency errors, its saturation is unknown (``measured_saturated`` None), and
:func:`traces.validate.compare.compare` counts such windows apart.  Not the lanes' busy
fraction: a CPU-bound device such as zram on two cores never holds more than about two
of sixteen lanes, even saturated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from modeling.workload import MIB
from traces.replay.iolog import SHIFT_US

DRIFT_WARN = 0.02
SATURATION_DRIFT = 0.05
MIN_SPAN_REQUESTS = 20
DRIFT_RESOLUTION = 0.005
MIN_BACKLOG_INFLIGHT = 1.0


def read_lat_log(path: Path) -> pd.DataFrame:
    """fio's per-I/O latency log: completion time (ms), latency (ns), direction, size, offset."""
    df = pd.read_csv(path, header=None, skipinitialspace=True)
    df = df.iloc[:, :5]
    df.columns = ["time_ms", "lat_ns", "ddir", "bs", "offset"]
    return df


def issue_times(log: pd.DataFrame) -> np.ndarray:
    """Each logged I/O's issue time (s, on the replay's clock): its completion less its latency.

    fio logs completions in whole milliseconds (floored): half a millisecond back makes the
    times unbiased.
    """
    return (log["time_ms"].to_numpy(np.float64) + 0.5) / 1e3 - log["lat_ns"].to_numpy(np.float64) / 1e9


def replay_windows(
    log: pd.DataFrame, trace_time_s: np.ndarray, window_s: float, speed: float
) -> pd.DataFrame:
    """Per-window measured metrics on the trace's time axis (see the module docstring).

    ``trace_time_s[i]`` is the trace arrival time of the request of ``log`` row i: latency
    is attributed to the window of the trace request, whatever the replay's timing drift.
    """
    lat_us = log["lat_ns"].to_numpy(np.float64) / 1e3
    issue_s = issue_times(log) * speed
    late_us = (issue_s - (trace_time_s - trace_time_s.min() + SHIFT_US / 1e6 * speed)) / speed * 1e6
    wait_us = log["lane_wait_us"].to_numpy(np.float64) if "lane_wait_us" in log else np.zeros(len(log))
    wid = np.floor(trace_time_s / window_s).astype(np.int64)
    size = log["bs"].to_numpy(np.float64)
    # the trace's own sizes, where the replay had to round some up (traces.replay.iolog.Fit)
    trace_size = log["trace_bs"].to_numpy(np.float64) if "trace_bs" in log else size
    t_last = float(trace_time_s.max())
    rows = []
    for k in np.unique(wid):
        sel = wid == k
        n = int(sel.sum())
        late = float(np.mean(late_us[sel]))
        waited = bool(np.any(wait_us[sel] > 0))
        lat = np.sort(lat_us[sel] + wait_us[sel])
        t = trace_time_s[sel]
        trace_span = float(t.max() - t.min())
        drift = np.nan
        if n >= MIN_SPAN_REQUESTS and trace_span > 0:
            drift = _rate_drift(t, issue_s[sel])  # both on the trace's time axis
        # as the characterisation counts it: the trace's last window ends at its last arrival
        dur = min(float(window_s), t_last - k * float(window_s)) if k == wid.max() else float(window_s)
        dur = dur if dur > 0 else float(window_s)
        served = 1 + drift if np.isfinite(drift) else np.nan
        # over the window's replay span (its trace span stretched by the drift)
        inflight = float(lat_us[sel].sum()) / 1e6 / (dur / speed / (served if np.isfinite(served) else 1.0))
        # only a resolved drift says the replay fell behind: lane waits are queueing (in the
        # latency), and issue lateness is mostly fio's timer overshoot (module docstring)
        behind = bool(drift < -DRIFT_WARN) if np.isfinite(drift) else False
        limited = bool(behind and inflight < MIN_BACKLOG_INFLIGHT)
        # a replay-limited window's device sat idle with a backlog: whether it would have kept
        # the trace's rate is not known, so it is neither saturated nor unsaturated
        saturated = bool(drift < -SATURATION_DRIFT) if np.isfinite(drift) and not limited else None
        rows.append(
            {
                "window_start_s": round(k * float(window_s), 9),
                "replay_requests": n,
                "window_drift": drift,
                "lateness_mean_us": late,
                "latency_includes_wait": waited,
                "lane_wait_mean_us": float(np.mean(wait_us[sel])),
                "replay_inflight": inflight,
                "replay_limited": bool(limited),
                "measured_saturated": saturated,
                "iops": n / dur * served,
                "bandwidth_mib_s": size[sel].sum() / dur / MIB * served,
                "replayed_bytes": int(size[sel].sum()),
                "trace_bytes": int(trace_size[sel].sum()),
                "latency_mean_us": float(lat.mean()),
                "latency_p99_us": float(lat[int(np.ceil(0.99 * len(lat))) - 1]),
            }
        )
    return pd.DataFrame(rows)


def lane_waits(lat_s: np.ndarray, trace_t: np.ndarray, lane: np.ndarray, speed: float = 1.0) -> np.ndarray:
    """Each request's wait for its lane (s, replay time): Lindley's recursion per lane.

    ``w[i] = max(0, w[p] + S[p] - gap)`` with ``p`` the lane's previous request, ``S`` its
    measured I/O time and ``gap`` the trace's time between the two (divided by ``speed``):
    how long the request would have queued behind its lane's earlier requests had every
    lane kept the trace's clock.  Requests must be in issue order within each lane.
    """
    wait = np.zeros(len(lat_s))
    for k in np.unique(lane):
        idx = np.flatnonzero(lane == k)
        s, gap = lat_s[idx].tolist(), (np.diff(trace_t[idx]) / speed).tolist()
        w, prev = [0.0], 0.0
        for j in range(1, len(idx)):  # a recursion: each wait depends on the previous one
            prev = max(0.0, prev + s[j - 1] - gap[j - 1])
            w.append(prev)
        wait[idx] = w
    return wait


def _rate_drift(trace_t: np.ndarray, issue_t: np.ndarray) -> float:
    """Replay rate over trace rate minus 1: the least-squares slope of issue time on trace time.

    Not the ratio of the first-to-last spans: those rest on two requests each, and one
    late last request (a lane's clock a millisecond behind, a preempted fio) moved a
    100 ms window's drift by 1 %; the slope uses every request.  A backlog that grows
    through the window (the replay falling further behind its schedule) is a slope above 1.
    """
    tc = trace_t - trace_t.mean()
    var = float(tc @ tc)
    if not var > 0:
        return float("nan")
    ic = issue_t - issue_t.mean()
    slope = float(tc @ ic) / var
    # fio's millisecond log times and the lanes' clock offsets scatter the issue times; where
    # they leave the slope unresolved (few requests over a short span) no drift is claimed.
    # Resolved means to DRIFT_RESOLUTION, or to a third of the drift itself: a saturated
    # window's lanes fall behind unevenly (issue times scattered by tens of ms), yet a
    # replay at half the trace's rate is plainly behind.
    resid = ic - slope * tc
    stderr = float(np.sqrt(resid @ resid / max(len(tc) - 2, 1) / var))
    if not slope > 0 or stderr > max(DRIFT_RESOLUTION, abs(slope - 1) / 3):
        return float("nan")
    return 1 / slope - 1
