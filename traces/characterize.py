"""Characterise a trace: one workload vector per window plus a whole-trace summary.

Per window (``window_s`` seconds of arrival time, or ``window_requests`` requests):

* ``write_ratio`` -- writes / requests
* ``read_size`` / ``write_size`` / ``request_size`` -- mean sizes, rounded to a multiple of
  512 bytes (a direction with no requests takes the overall mean)
* ``read_randomness`` / ``write_randomness`` / ``randomness`` -- fraction of requests that do
  not start where the previous request of the same direction ended (fio keeps one
  sequential position per direction too)
* ``queue_depth`` -- outstanding I/O, an integer >= 1, estimated by ``qd_method``:

  - ``pairs``: the trace pairs issue and completion events, so the time-averaged number of
    requests in flight is computed exactly (each request's overlap with the window)
  - ``littles_law``: the trace has per-request response times only: L = arrival rate x mean
    latency (Little's law)
  - ``burst``: no latency at all: the mean number of requests arriving together (within
    1 us of each other), a lower bound on what was in flight
* ``numjobs`` -- 1: a block trace cannot tell submitters apart, so all outstanding I/O is
  attributed to one job's queue depth

``arrival_cv2`` -- burstiness: the squared coefficient of variation of the window's
inter-arrival times (1 for Poisson arrivals, 0 for regular ones, more for bursts); NaN
with fewer than three requests.

Measured columns: ``iops`` and ``bandwidth_mib_s`` (the trace's own rate, i.e. offered
load) always; ``latency_mean_us`` and ``latency_p99_us`` where the trace has latency.
Windows without requests are skipped; the last window ends at the last arrival.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput, NoData
from modeling.workload import MIB, WORKLOAD_FIELDS
from traces.chunks import TraceChunk, TraceInfo
from traces.stats import (
    BURST_GAP_S,
    HIST_EDGES,
    Totals,
    arrival_cv2,
    gap_histogram,
    group_p99,
    round_size,
    seq_flags,
)

WINDOW_COLUMNS = ("window_start_s", "window_end_s", "requests")
MEASURED = ("iops", "bandwidth_mib_s", "latency_mean_us", "latency_p99_us")
EXTRA = ("queue_depth_raw", "qd_method", "arrival_cv2")


class Characterizer:
    """Streaming window statistics; feed chunks in arrival order, then ``finish()``."""

    def __init__(self, info: TraceInfo, window_s: float | None = 1.0, window_requests: int | None = None):
        if window_requests is not None:
            if window_requests < 1:
                raise InvalidInput("window_requests must be at least 1")
            window_s = None
        elif window_s is None or not 1e-6 <= window_s <= 1e7:
            raise InvalidInput("window must be between 1 us and 10^7 s")
        self.info = info
        self.window_s = window_s
        self.window_requests = window_requests
        self.method = {"pairs": "pairs", "response_time": "littles_law"}.get(
            info.latency_source or "", "burst"
        )
        self._last_end: dict[bool, int | None] = {False: None, True: None}
        self._held: TraceChunk | None = None
        self._held_seq = np.empty(0, bool)
        self._held_wid = np.empty(0, np.int64)
        self._seen = 0
        self._spill: dict[int, float] = {}
        self._rows: list[pd.DataFrame] = []
        self._gaps: list[np.ndarray] = []
        self._prev_arrival: float | None = None
        self.acc = Totals()

    def feed(self, chunk: TraceChunk) -> None:
        """Add a chunk of requests (sorted by arrival time within the chunk)."""
        if not len(chunk):
            return
        if np.any(np.diff(chunk.time_s) < 0):
            chunk = chunk.take(np.argsort(chunk.time_s, kind="stable"))
        seq = seq_flags(chunk, self._last_end)
        if self.window_s is not None:
            wid = np.floor(chunk.time_s / self.window_s).astype(np.int64)
        else:
            assert self.window_requests is not None
            wid = (self._seen + np.arange(len(chunk), dtype=np.int64)) // self.window_requests
        self._seen += len(chunk)
        self._accumulate(chunk, seq)
        if self._held is not None:
            chunk = TraceChunk.concat([self._held, chunk])
            seq = np.concatenate([self._held_seq, seq])
            wid = np.concatenate([self._held_wid, wid])
            if np.any(np.diff(wid) < 0):  # a trace slightly out of order across chunks
                order = np.argsort(wid, kind="stable")
                chunk, seq, wid = chunk.take(order), seq[order], wid[order]
        # The last window may continue in the next chunk: hold it back.
        cut = int(np.searchsorted(wid, wid[-1], side="left"))
        self._held, self._held_seq, self._held_wid = chunk.take(slice(cut, None)), seq[cut:], wid[cut:]
        if cut:
            next_start = float(chunk.time_s[cut])
            self._emit(chunk.take(slice(0, cut)), seq[:cut], wid[:cut], next_start)

    def _accumulate(self, c: TraceChunk, seq: np.ndarray) -> None:
        a = self.acc
        w = c.is_write
        a.n += len(c)
        a.writes += int(w.sum())
        a.write_bytes += int(c.size[w].sum())
        a.read_bytes += int(c.size[~w].sum())
        a.nonseq_r += int((~seq & ~w).sum())
        a.nonseq_w += int((~seq & w).sum())
        ok = ~np.isnan(c.latency_s)
        a.lat_sum += float(c.latency_s[ok].sum())
        a.lat_n += int(ok.sum())
        a.hist += np.bincount(np.searchsorted(HIST_EDGES, c.latency_s[ok]), minlength=len(a.hist))
        if a.first_t is None:
            a.first_t = float(c.time_s[0])
        a.last_t = float(c.time_s[-1])
        if ok.any():
            a.last_done = max(a.last_done, float(np.max(c.time_s[ok] + c.latency_s[ok])))
        a.burst_sum += float(self._burst_sizes(c.time_s).sum())

    def _burst_sizes(self, t: np.ndarray) -> np.ndarray:
        """For each request, how many requests arrived with it (gap <= 1 us), carried across calls."""
        prev = np.concatenate([[self._prev_arrival if self._prev_arrival is not None else -np.inf], t[:-1]])
        new = (t - prev) > BURST_GAP_S
        bid = np.cumsum(new)
        # A burst continuing from the previous chunk is counted per chunk: a tiny bias only.
        sizes = np.bincount(bid)
        self._prev_arrival = float(t[-1])
        return sizes[bid].astype(np.float64)

    def _emit(self, c: TraceChunk, seq: np.ndarray, wid: np.ndarray, next_start: float | None) -> None:
        """Compute the rows of complete windows."""
        uw, g = np.unique(wid, return_inverse=True)
        k = len(uw)
        w = c.is_write
        n = np.bincount(g, minlength=k).astype(np.float64)
        nw = np.bincount(g, w, minlength=k)
        nr = n - nw
        rb = np.bincount(g, c.size * ~w, minlength=k)
        wb = np.bincount(g, c.size * w, minlength=k)
        ns_r = np.bincount(g, ~seq & ~w, minlength=k)
        ns_w = np.bincount(g, ~seq & w, minlength=k)
        first = np.searchsorted(g, np.arange(k))
        if self.window_s is not None:
            start = uw * float(self.window_s)
            end = (uw + 1) * float(self.window_s)
            if next_start is None:  # the trace's last window ends at its last arrival
                t_last = float(c.time_s[-1])
                if t_last > start[-1]:
                    end[-1] = min(end[-1], t_last)
        else:
            start = c.time_s[first]
            end = np.append(start[1:], next_start if next_start is not None else c.time_s[-1])
            degenerate = end <= start
            end[degenerate] = start[degenerate] + 1e-6
        dur = end - start
        lat = c.latency_s
        ok = ~np.isnan(lat)
        lat_n = np.bincount(g[ok], minlength=k)
        lat_sum = np.bincount(g[ok], lat[ok], minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            lat_mean = np.where(lat_n > 0, lat_sum / lat_n, np.nan)
            qd = self._queue_depth(c, g, uw, start, end, dur, lat_sum, lat_n, n)
            size_all = (rb + wb) / n
            rows = pd.DataFrame(
                {
                    "window_start_s": np.round(start, 9),
                    "window_end_s": np.round(end, 9),
                    "requests": n.astype(np.int64),
                    "write_ratio": nw / n,
                    "queue_depth": np.clip(np.round(np.nan_to_num(qd, nan=1.0)), 1, 4096).astype(np.int64),
                    "request_size": round_size(size_all),
                    "randomness": (ns_r + ns_w) / n,
                    "numjobs": np.ones(k, dtype=np.int64),
                    "read_size": round_size(np.where(nr > 0, rb / nr, size_all)),
                    "write_size": round_size(np.where(nw > 0, wb / nw, size_all)),
                    "read_randomness": np.where(nr > 0, ns_r / nr, (ns_r + ns_w) / n),
                    "write_randomness": np.where(nw > 0, ns_w / nw, (ns_r + ns_w) / n),
                    "iops": n / dur,
                    "bandwidth_mib_s": (rb + wb) / dur / MIB,
                    "latency_mean_us": lat_mean * 1e6,
                    "latency_p99_us": group_p99(g, lat, k) * 1e6,
                    "queue_depth_raw": qd,
                    "qd_method": self.method,
                    "arrival_cv2": arrival_cv2(c.time_s, g, k),
                }
            )
        self._rows.append(rows)
        self._gaps.append(gap_histogram(c.time_s, g, k))

    def _queue_depth(
        self,
        c: TraceChunk,
        g: np.ndarray,
        uw: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        dur: np.ndarray,
        lat_sum: np.ndarray,
        lat_n: np.ndarray,
        n: np.ndarray,
    ) -> np.ndarray:
        k = len(uw)
        if self.method == "burst":
            sizes = self._burst_sizes_window(c.time_s, g, k)
            return sizes
        if self.method == "pairs" and self.window_s is not None:
            return self._overlap(c, g, uw, start, dur)
        # Little's law, with requests of unknown latency taking the window's mean latency.
        mean = np.where(lat_n > 0, lat_sum / np.maximum(lat_n, 1), np.nan)
        return n * mean / dur

    def _burst_sizes_window(self, t: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
        new = np.concatenate([[True], np.diff(t) > BURST_GAP_S]) | np.concatenate([[True], np.diff(g) != 0])
        bid = np.cumsum(new) - 1
        size = np.bincount(bid)[bid].astype(np.float64)
        return np.bincount(g, size, minlength=k) / np.bincount(g, minlength=k)

    def _overlap(
        self, c: TraceChunk, g: np.ndarray, uw: np.ndarray, start: np.ndarray, dur: np.ndarray
    ) -> np.ndarray:
        """Time-averaged requests in flight per window from each request's [arrival, completion]."""
        ws = self.window_s
        assert ws is not None
        lat = np.nan_to_num(c.latency_s, nan=0.0)
        s = c.time_s
        e = s + lat
        own_end = (np.floor(s / ws) + 1) * ws
        busy = np.bincount(g, np.minimum(e, own_end) - s, minlength=len(uw))
        # Spill of long requests into later windows (not yet emitted ones are kept for later).
        span = np.floor(e / ws).astype(np.int64) - np.floor(s / ws).astype(np.int64)
        idx = np.flatnonzero(span > 0)
        step = 1
        while len(idx):
            wnext = np.floor(s[idx] / ws).astype(np.int64) + step
            part = np.minimum(e[idx], (wnext + 1) * ws) - wnext * ws
            order_w, inv = np.unique(wnext, return_inverse=True)
            sums = np.bincount(inv, part)
            for wk, v in zip(order_w.tolist(), sums.tolist(), strict=True):
                self._spill[wk] = self._spill.get(wk, 0.0) + v
            idx = idx[span[idx] > step]
            step += 1
        for i, wk in enumerate(uw.tolist()):
            busy[i] += self._spill.pop(wk, 0.0)
        return busy / dur

    def finish(self) -> Characterization:
        """Close the last window and build the result."""
        if self._held is not None and len(self._held):
            self._emit(self._held, self._held_seq, self._held_wid, None)
            self._held = None
        if not self.acc.n:
            raise NoData(f"{', '.join(self.info.paths) or 'trace'}: no read or write requests in the trace")
        windows = pd.concat(self._rows, ignore_index=True)
        if self.acc.lat_n and self.acc.lat_sum <= 0:
            # Response times that are all zero (an MSR field left empty, a capture without
            # completions) carry no latency: not "measured latency 0".
            self.info.latency_source = None
            self.acc.lat_n, self.acc.lat_sum = 0, 0.0
            windows["latency_mean_us"] = np.nan
            windows["latency_p99_us"] = np.nan
            windows["queue_depth_raw"] = np.nan
            windows["qd_method"] = "none"
            self.method = "none"
        gaps = np.concatenate(self._gaps, axis=0)
        return Characterization(self.info, windows, self._summary(windows), gaps)

    def _summary(self, windows: pd.DataFrame) -> dict[str, Any]:
        a = self.acc
        n = a.n
        nr = n - a.writes
        size_all = (a.read_bytes + a.write_bytes) / n
        rnd = (a.nonseq_r + a.nonseq_w) / n
        span = max(a.last_t - (a.first_t or 0.0), 1e-9)
        if a.lat_n:
            busy_span = max(a.last_done, a.last_t) - (a.first_t or 0.0)
            qd = (a.lat_sum / a.lat_n) * n / max(busy_span, 1e-9)
            cum = np.cumsum(a.hist)
            p99_bin = int(np.searchsorted(cum, np.ceil(0.99 * cum[-1])))
            p99 = float(HIST_EDGES[min(p99_bin, len(HIST_EDGES) - 1)])
        else:
            qd = a.burst_sum / n
            p99 = float("nan")
        workload = {
            "write_ratio": a.writes / n,
            "queue_depth": int(np.clip(round(qd), 1, 4096)),
            "request_size": int(round_size(size_all)),
            "randomness": rnd,
            "numjobs": 1,
            "read_size": int(round_size(a.read_bytes / nr if nr else size_all)),
            "write_size": int(round_size(a.write_bytes / a.writes if a.writes else size_all)),
            "read_randomness": a.nonseq_r / nr if nr else rnd,
            "write_randomness": a.nonseq_w / a.writes if a.writes else rnd,
        }
        return {
            "format": self.info.format,
            "paths": self.info.paths,
            "requests": n,
            "duration_s": span,
            "windows": len(windows),
            "qd_method": self.method,
            "queue_depth_raw": qd,
            "workload": workload,
            "measured": {
                "iops": n / span,
                "bandwidth_mib_s": (a.read_bytes + a.write_bytes) / span / MIB,
                "latency_mean_us": a.lat_sum / a.lat_n * 1e6 if a.lat_n else None,
                "latency_p99_us": p99 * 1e6 if a.lat_n else None,
            },
        }


@dataclass
class Characterization:
    """Per-window workload vectors (``windows``) and the whole-trace ``summary``."""

    info: TraceInfo
    windows: pd.DataFrame
    summary: dict[str, Any]
    # per window (row of ``windows``), counts of inter-arrival gaps in traces.stats.GAP_EDGES
    # bins: kept apart from the table, which stays one workload vector per window
    gap_hist: np.ndarray | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The output column order."""
        return WINDOW_COLUMNS + WORKLOAD_FIELDS + MEASURED + EXTRA

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: summary plus one record per window."""
        return {"summary": self.summary, "windows": self.windows.to_dict(orient="records")}


def characterize_chunks(
    info: TraceInfo,
    chunks: Iterable[TraceChunk],
    *,
    window_s: float | None = 1.0,
    window_requests: int | None = None,
) -> Characterization:
    """Characterise a stream of chunks (see the module docstring)."""
    ch = Characterizer(info, window_s, window_requests)
    for chunk in chunks:
        ch.feed(chunk)
    return ch.finish()


def characterize(
    path: str, fmt: str = "auto", *, window_s: float | None = 1.0, window_requests: int | None = None
) -> Characterization:
    """Open a trace file and characterise it per window."""
    from traces.formats.reader import open_trace

    trace = open_trace(path, fmt)
    return characterize_chunks(trace.info, trace.chunks, window_s=window_s, window_requests=window_requests)
