"""Replay a trace on a target with fio and measure it per window.

The trace's requests are remapped into the target (``offset mod usable size``, aligned
down to the target's logical block size -- 4 KiB on zram -- and to 4096 bytes when all
the trace's sizes allow it, else 512; sizes rounded up to the same alignment) and dealt
round-robin to *lanes*, one fio job each, replaying its own iolog version 3 (timestamps in
microseconds, divided by ``speed``) with ``direct=1`` and the synchronous ``psync``
engine, logging every I/O (``write_lat_log`` + ``log_offset``).

Why lanes of synchronous I/O: fio sleeps between timed iolog entries without reaping
completions, so with an asynchronous engine and iodepth > 1 every I/O's completion latency
would include those sleeps (measured here: 26 ms instead of 25 us for 4 KiB reads).  A
synchronous job measures each I/O exactly; concurrency comes from the lanes.  The number
of lanes is the trace's maximum number of requests in flight when it has latencies, and
at least 16 (at most 64).  A lane whose previous I/O is still running delays its next
one, which shows up as rate drift.  fio applies no delay before the first I/O of an
iolog, whatever its timestamp, so each lane's log starts with a 4 KiB read at time 1 us (left
out of the results) and the trace's timestamps follow, shifted by 1 ms: otherwise a lane
whose first request comes late in the trace would run early by that much.  Each lane's
log also ends with a read at one common time, 50 ms after the trace's last arrival
(the lead-out, also left out): a lane that exits while others still replay disturbs them.

Timing: fio waits for each iolog entry *relative to the previous issue*, so a lane that
is late once stays late, and on a busy machine every wake-up from a sleep is late.
Measured on this 2-core machine under a load average of 15: 200 entries 1 ms apart took
0.66 s on one lane and 9.2 s on 16 fio threads.  So lanes are processes, not threads
(threads serialise: 2.9 s instead of 9.2 s), and fio runs at real-time priority
(``chrt --fifo``) when the process may (root): 0.20 s on 1 lane, 0.20 s on 16.  Without
it the replay says so in a warning.  What is left -- each sleep's overshoot, which fio
never makes up -- is measured by a short calibration replay of the trace's first
requests and taken off every gap of the real replay's iologs (:mod:`traces.replay_clock`;
``slip_us`` and ``residual_slip_us`` in the result).

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
served IOPS and bandwidth are the trace's offered ones times ``1 + window_drift``.  Windows with fewer than
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
:func:`traces.validate.compare` counts such windows apart.  Not the lanes' busy
fraction: a CPU-bound device such as zram on two cores never holds more than about two
of sixteen lanes, even saturated.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.devices.reference import logical_block_size
from collectors.fio.runner import fio_binary, run_guarded
from collectors.targets import claim_target
from modeling.errors import FioError, InvalidInput, NoData
from modeling.store.catalog import Catalog
from modeling.store.workdirs import owned_workdir, remove_stale_workdirs
from modeling.workload import MIB
from traces.model import Trace, TraceChunk
from traces.reader import open_trace
from traces.replay_clock import LEAD_OUT_US, MAX_SLIP_US, calibration_prefix, lane_slip, shorten_gaps

DRIFT_WARN = 0.02
SHIFT_US = 1000
DEFAULT_SIZE = 256 * MIB
DEFAULT_LANES = 16
MAX_LANES = 64
SATURATION_DRIFT = 0.05
MIN_SPAN_REQUESTS = 20
DRIFT_RESOLUTION = 0.005
MIN_BACKLOG_INFLIGHT = 1.0
RT_PRIORITY = "20"
WORKDIR_PREFIX = "ssdpredict-replay-"
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+\-]+$")


@dataclass
class ReplayResult:
    """Per-window measurements of a replay and how faithful its timing was."""

    target: str
    requests: int
    speed: float
    lanes: int
    trace_rate: float
    replay_rate: float
    drift: float
    windows: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    # fio's per-I/O log and each I/O's trace arrival time, kept so that the same
    # completions can be cut into other window lengths (the noise floor per window length)
    log: pd.DataFrame | None = field(default=None, repr=False)
    trace_time_s: np.ndarray | None = field(default=None, repr=False)
    # taken off each gap of the lanes' iologs, and what the lanes still slipped (us per entry)
    slip_us: float = 0.0
    residual_slip_us: float = float("nan")

    def rewindow(self, window_s: float) -> pd.DataFrame:
        """The replay's per-window measurements with windows of ``window_s`` (same completions)."""
        if self.log is None or self.trace_time_s is None:
            raise NoData("this replay result kept no per-I/O log to re-window")
        if not window_s > 0:
            raise InvalidInput("window must be positive")
        return replay_windows(self.log, self.trace_time_s, window_s, self.speed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "target": self.target,
            "requests": self.requests,
            "speed": self.speed,
            "lanes": self.lanes,
            "trace_rate_iops": self.trace_rate,
            "replay_rate_iops": self.replay_rate,
            "rate_drift": self.drift,
            "slip_compensation_us": self.slip_us,
            "residual_slip_us": self.residual_slip_us if np.isfinite(self.residual_slip_us) else None,
            "warnings": self.warnings,
            "windows": self.windows.to_dict(orient="records"),
        }


def prepare_target(target: str, destroy_data: bool, size: int,
                    catalog: Catalog | None) -> tuple[int, list[str]]:
    """Check the target; create or extend a file target with real data.  Returns (size, warnings).

    The same claim as a sweep's (:func:`collectors.targets.claim_target`): the product's
    own scratch files pass, a user's file needs ``destroy_data``, a new or grown file must
    fit in the free space, and a failed creation leaves nothing behind.
    """
    if not _SAFE_PATH.match(target):
        raise InvalidInput(
            f"target path {target!r} has characters fio cannot take safely "
            "(use letters, digits, '.', '_', '-', '/', '+')"
        )
    # Reads of a file's holes (or of fallocated, unwritten extents) return zeros without
    # touching the device, so a new or short file is written for real, not made sparse.
    info = claim_target(target, size, destroy_data=destroy_data, catalog=catalog)
    if info.kind != "file":
        return int(info.size), []
    st = os.stat(info.path)
    if st.st_blocks * 512 < st.st_size * 0.9:
        return int(info.size), [f"target file {target} is sparse: reads of its holes do not reach the device"]
    return int(info.size), []


def load_requests(trace: Trace, max_requests: int | None = None) -> TraceChunk:
    """All requests of a trace (at most ``max_requests``), sorted by arrival."""
    chunks = []
    n = 0
    for chunk in trace.chunks:
        if max_requests is not None and n + len(chunk) > max_requests:
            chunk = chunk.take(slice(0, max_requests - n))
        chunks.append(chunk)
        n += len(chunk)
        if max_requests is not None and n >= max_requests:
            break
    c = TraceChunk.concat(chunks)
    if not len(c):
        raise NoData("the trace has no read or write requests to replay")
    if np.any(np.diff(c.time_s) < 0):
        c = c.take(np.argsort(c.time_s, kind="stable"))
    return c


def max_outstanding(c: TraceChunk) -> int | None:
    """Most requests ever in flight at once, when the trace has latencies."""
    ok = ~np.isnan(c.latency_s)
    if not ok.any() or not np.any(c.latency_s[ok] > 0):
        return None  # all-zero response times carry no latency: they cannot size the replay
    t = np.concatenate([c.time_s[ok], c.time_s[ok] + c.latency_s[ok]])
    step = np.concatenate([np.ones(ok.sum(), np.int64), -np.ones(ok.sum(), np.int64)])
    order = np.lexsort((step, t))  # a completion at the same instant goes first
    return int(np.cumsum(step[order]).max())


def remap(c: TraceChunk, target_size: int, block: int = 512) -> TraceChunk:
    """Fit offsets into the target (offset mod usable size), aligned to at least ``block``.

    Sizes are rounded up to the alignment: direct I/O on a device with 4 KiB logical
    sectors (zram) refuses anything smaller ("Invalid argument").
    """
    size = ((c.size + 511) // 512) * 512
    align = max(block, 4096 if not np.any(size % 4096) else 512)
    size = (size + align - 1) // align * align
    keep = size <= target_size
    c, size = c.take(keep), size[keep]
    usable = max(target_size - int(size.max()), align)
    off = (c.offset % usable) // align * align
    return TraceChunk(c.time_s, c.is_write, off, size, c.latency_s)


def write_iolog(
    c: TraceChunk,
    target: str,
    out: Path,
    *,
    speed: float = 1.0,
    t0: float | None = None,
    lead_in: int | None = None,
    slip_us: float = 0.0,
    lead_out_us: int | None = None,
) -> None:
    """Write requests as a fio v3 iolog (timestamps in us from ``t0``, divided by ``speed``).

    ``lead_in`` (bytes) starts the log with a read of that size at offset 0 and time 1 us:
    fio issues a log's first entry at once, whatever its timestamp, so without it a lane
    whose first request comes late in the trace would run early by that much.  With
    ``lead_in``, ``lead_out_us`` ends the log with a read of the same size at that time
    (or at the last entry's, if later), and ``slip_us`` shortens every positive gap by
    that much (:mod:`traces.replay_clock`).
    """
    start = c.time_s[0] if t0 is None else t0
    t_us = np.round((c.time_s - start) * 1e6 / speed).astype(np.int64) + SHIFT_US
    if lead_in:
        t_us = shorten_gaps(t_us, slip_us, start_us=1)
    op = np.where(c.is_write, "write", "read")
    with open(out, "w") as fh:
        fh.write(f"fio version 3 iolog\n0 {target} add\n0 {target} open\n")
        if lead_in:
            # at 1 us, not 0: fio takes a timestamp of 0 as "no previous entry" and would not
            # delay the next one either
            fh.write(f"1 {target} read 0 {lead_in}\n")
        fh.writelines(
            f"{t} {target} {o} {a} {s}\n"
            for t, o, a, s in zip(t_us.tolist(), op.tolist(), c.offset.tolist(), c.size.tolist(), strict=True)
        )
        end = int(t_us[-1]) if len(t_us) else 0
        if lead_in and lead_out_us is not None:
            end = max(end, int(lead_out_us))
            fh.write(f"{end} {target} read 0 {lead_in}\n")
        fh.write(f"{end} {target} close\n")


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


def _fio_command(job_file: Path, fio: str | None = None) -> tuple[list[str], str | None]:
    """fio at real-time priority where allowed (see the module docstring), else plain, with why."""
    cmd = [fio_binary(fio), "--output-format=json", str(job_file)]
    chrt = shutil.which("chrt")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and chrt:
        return [chrt, "--fifo", RT_PRIORITY, *cmd], None
    return cmd, (
        "fio ran at normal priority (real-time needs root and chrt): timing may drift on a busy machine"
    )


def _run_replay_fio(job: str, tmp: Path, timeout: float, fio: str | None) -> list[str]:
    job_file = tmp / "replay.fio"
    job_file.write_text(job)
    cmd, why = _fio_command(job_file, fio)
    # under the sweep's guard: a killed replay (even by kill -9) takes fio and its lanes with it
    returncode, stdout, stderr = run_guarded(cmd, timeout=timeout)
    if returncode != 0:
        message = (stderr.strip() or stdout.strip()).splitlines()
        raise FioError(f"fio failed: {'; '.join(message[-3:]) or f'exit status {returncode}'}")
    return [why] if why else []


def _run_lanes(
    c: TraceChunk, target: str, lanes: int, *, speed: float, align: int, slip_us: float, tmp: Path,
    tag: str, timeout: float, fio: str | None,
) -> tuple[pd.DataFrame, list[str]]:
    """One fio run of ``c`` dealt round-robin to ``lanes``: fio's per-I/O log and each row's ``index``."""
    n = len(c)
    # every lane ends at the same time, after the trace's last arrival (traces/replay_clock.py)
    lead_out = int(round((c.time_s[-1] - c.time_s[0]) * 1e6 / speed)) + SHIFT_US + LEAD_OUT_US
    job = ""
    for lane in range(lanes):
        log = tmp / f"{tag}{lane}.iolog"
        write_iolog(
            c.take(slice(lane, None, lanes)), target, log, speed=speed, t0=float(c.time_s[0]),
            lead_in=align, slip_us=slip_us, lead_out_us=lead_out,
        )
        job += (
            f"[{tag}{lane}]\nread_iolog={log}\nioengine=psync\ndirect=1\n"
            f"write_lat_log={tmp / f'{tag}{lane}'}\nlog_offset=1\n"
        )
    warnings = _run_replay_fio(job, tmp, timeout, fio)
    parts = []
    for lane in range(lanes):
        logs = sorted(tmp.glob(f"{tag}{lane}_lat.*.log"))
        if not logs:
            raise NoData(f"fio wrote no latency log for replay lane {lane}")
        mine = len(range(lane, n, lanes))
        # without the lead-in read (first) and the lead-out read (after the lane's requests)
        part = read_lat_log(logs[0]).iloc[1 : 1 + mine].reset_index(drop=True)
        part["index"] = lane + lanes * np.arange(len(part))  # psync: log order = issue order
        parts.append(part)
    lat = pd.concat(parts, ignore_index=True)
    if not len(lat):
        raise NoData("fio completed no I/O during the replay")
    return lat[lat["index"] < n].sort_values("index").reset_index(drop=True), warnings


def _measured_slip(lat: pd.DataFrame, c: TraceChunk, lanes: int, speed: float) -> float:
    """The lanes' slip per sleeping entry in a run (us; :func:`traces.replay_clock.lane_slip`)."""
    index = lat["index"].to_numpy()
    return lane_slip(issue_times(lat), c.time_s[index] - c.time_s[0], index % lanes, speed)


def _calibrate_slip(c: TraceChunk, lanes: int, speed: float, run: Any) -> tuple[float, list[str]]:
    """The slip to take off each gap: measured on a replay of the trace's first requests, uncompensated."""
    m = calibration_prefix(c, lanes, speed)
    if not m:
        return 0.0, []  # too sparse for the slip to matter (traces/replay_clock.py)
    lat, warnings = run(c.take(slice(0, m)), slip_us=0.0, tag="cal")
    measured = _measured_slip(lat, c, lanes, speed)
    if not np.isfinite(measured):
        return 0.0, warnings
    if measured > MAX_SLIP_US:
        warnings.append(
            f"the replay's lanes slipped {measured:.0f} us per entry in the calibration run; "
            f"compensating {MAX_SLIP_US:.0f} us: the machine is too busy to keep the trace's clock"
        )
    return float(min(max(measured, 0.0), MAX_SLIP_US)), warnings


def replay(
    trace_path: str | Path,
    target: str,
    *,
    fmt: str = "auto",
    destroy_data: bool = False,
    speed: float = 1.0,
    window_s: float = 1.0,
    lanes: int | None = None,
    size: int = DEFAULT_SIZE,
    max_requests: int | None = None,
    timeout: float = 3600.0,
    fio: str | None = None,
    catalog: Catalog | None = None,
    slip_us: float | None = None,
) -> ReplayResult:
    """Replay a trace on ``target`` with fio (``fio``: the binary, default fio on PATH).

    ``catalog`` lets the product's own scratch files be replayed on and records a file
    target created here as one (see :func:`collectors.targets.claim_target`).
    ``slip_us`` is taken off every positive gap of the lanes' iologs; None measures it
    first with a short calibration replay of the trace's start (:mod:`traces.replay_clock`).
    """
    if not 0.01 <= speed <= 100:
        raise InvalidInput("speed must be between 0.01 and 100")
    if lanes is not None and not 1 <= lanes <= MAX_LANES:
        raise InvalidInput(f"lanes must be between 1 and {MAX_LANES}")
    if slip_us is not None and not 0 <= slip_us <= MAX_SLIP_US:
        raise InvalidInput(f"slip_us must be between 0 and {MAX_SLIP_US:g}")
    trace = open_trace(trace_path, fmt)
    target_size, warnings = prepare_target(target, destroy_data, size, catalog)
    align = max(logical_block_size(target), 4096)
    c = remap(load_requests(trace, max_requests), target_size, logical_block_size(target))
    n = len(c)
    if lanes is None:
        depth = max_outstanding(c)
        lanes = DEFAULT_LANES if depth is None else min(max(depth, DEFAULT_LANES), MAX_LANES)
    lanes = min(lanes, n)
    workdirs = Path(tempfile.gettempdir())
    remove_stale_workdirs(workdirs, WORKDIR_PREFIX)  # left by replays killed before their cleanup
    with owned_workdir(workdirs, WORKDIR_PREFIX) as tmp:
        run = partial(_run_lanes, target=target, lanes=lanes, speed=speed, align=align, tmp=Path(tmp),
                      timeout=timeout, fio=fio)
        if slip_us is None:
            slip_us, found = _calibrate_slip(c, lanes, speed, run)
            warnings += [w for w in found if w not in warnings]
        lat, found = run(c, slip_us=slip_us, tag="lane")
        warnings += [w for w in found if w not in warnings]
    trace_time = c.time_s[lat["index"].to_numpy()]
    lane_of = lat["index"].to_numpy() % lanes
    lat_s = lat["lat_ns"].to_numpy(np.float64) / 1e9
    lat["lane_wait_us"] = lane_waits(lat_s, trace_time, lane_of, speed) * 1e6
    windows = replay_windows(lat, trace_time, window_s, speed)
    issue_s = issue_times(lat)
    span = float(c.time_s[-1] - c.time_s[0])
    replay_span = float(issue_s.max() - issue_s.min()) * speed
    trace_rate = (n - 1) / span if span > 0 else float("nan")
    replay_rate = (len(lat) - 1) / replay_span if replay_span > 0 else float("nan")
    drift = replay_rate / trace_rate - 1 if span > 0 and replay_span > 0 else float("nan")
    if len(lat) != n:
        warnings.append(f"fio completed {len(lat)} of {n} requests")
    n_limited = int(windows["replay_limited"].sum())
    if n_limited:
        warnings.append(
            f"{n_limited} of {len(windows)} window(s) fell behind the trace's schedule with under one I/O "
            "in flight: fio or the CPU, not the device, could not keep that rate (left out of "
            "latency errors)"
        )
    if np.isfinite(drift) and abs(drift) > DRIFT_WARN:
        warnings.append(
            f"replayed request rate drifted {drift * 100:+.1f} % from the trace's "
            f"({replay_rate:.0f} vs {trace_rate:.0f} IO/s at speed {speed:g})"
        )
    return ReplayResult(
        target, n, speed, lanes, trace_rate, replay_rate, drift, windows, warnings, lat, trace_time,
        slip_us=float(slip_us), residual_slip_us=_measured_slip(lat, c, lanes, speed),
    )
