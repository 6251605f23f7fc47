"""Replay a trace on a target with fio and measure it per window.

The lanes' iologs are written by :mod:`traces.replay.iolog`, the per-window measurements
cut from fio's logs by :mod:`traces.replay.windows`.

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
requests and taken off every gap of the real replay's iologs (:mod:`traces.replay.clock`;
``slip_us`` and ``residual_slip_us`` in the result).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.devices.reference import logical_block_size
from collectors.devices.throttle import cgroup_for
from collectors.fio.runner import fio_binary, run_guarded
from collectors.sweep.openloop import LANES, MAX_LANES, replay_lanes
from modeling.errors import FioError, InvalidInput, NoData
from modeling.store.catalog import Catalog
from modeling.store.files.workdirs import owned_workdir, remove_stale_workdirs
from traces.chunks import TraceChunk
from traces.formats.reader import open_trace
from traces.replay.clock import LEAD_OUT_US, MAX_SLIP_US, calibration_prefix, lane_slip
from traces.replay.iolog import (
    DEFAULT_SIZE, SHIFT_US, Fit, load_requests, max_outstanding, prepare_target, remap, write_iolog,
)
from traces.replay.windows import DRIFT_WARN, issue_times, lane_waits, read_lat_log, replay_windows

DEFAULT_LANES = LANES
RT_PRIORITY = "20"
WORKDIR_PREFIX = "ssdpredict-replay-"


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
    # what fitting the trace into the target changed (sizes rounded up, offsets moved)
    fit: Fit | None = None

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
            "fit": self.fit.to_dict() if self.fit is not None else None,
            "warnings": self.warnings,
            "windows": self.windows.to_dict(orient="records"),
        }


def _fio_command(job_file: Path, fio: str | None = None) -> tuple[list[str], str | None]:
    """fio at real-time priority where allowed (see the module docstring), else plain, with why."""
    cmd = [fio_binary(fio), "--output-format=json", str(job_file)]
    chrt = shutil.which("chrt")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and chrt:
        return [chrt, "--fifo", RT_PRIORITY, *cmd], None
    return cmd, (
        "fio ran at normal priority (real-time needs root and chrt): timing may drift on a busy machine"
    )


def _run_replay_fio(job: str, tmp: Path, timeout: float, fio: str | None, cgroup: Path | None) -> list[str]:
    job_file = tmp / "replay.fio"
    job_file.write_text(job)
    cmd, why = _fio_command(job_file, fio)
    # under the sweep's guard: a killed replay (even by kill -9) takes fio and its lanes with it
    returncode, stdout, stderr = run_guarded(cmd, timeout=timeout, cgroup=cgroup)
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
    # every lane ends at the same time, after the trace's last arrival (traces/replay/clock.py)
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
    # in a throttled reference's cgroup, which caps only its own I/O (collectors/devices/throttle.py)
    warnings = _run_replay_fio(job, tmp, timeout, fio, cgroup_for(target))
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
    """The lanes' slip per sleeping entry in a run (us; :func:`traces.replay.clock.lane_slip`)."""
    index = lat["index"].to_numpy()
    return lane_slip(issue_times(lat), c.time_s[index] - c.time_s[0], index % lanes, speed)


def _calibrate_slip(c: TraceChunk, lanes: int, speed: float, run: Any) -> tuple[float, list[str]]:
    """The slip to take off each gap: measured on a replay of the trace's first requests, uncompensated."""
    m = calibration_prefix(c, lanes, speed)
    if not m:
        return 0.0, []  # too sparse for the slip to matter (traces/replay/clock.py)
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


def check_resize(trace_path: str | Path, target: str, *, fmt: str = "auto", resize: str = "round-up",
                 max_requests: int | None = None) -> None:
    """Refuse (InvalidInput), before any side effect, a trace that the ``resize`` rule refuses."""
    if resize != "round-up":
        requests = load_requests(open_trace(trace_path, fmt), max_requests)
        remap(requests, 1 << 62, logical_block_size(target), resize)


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
    resize: str = "round-up",
) -> ReplayResult:
    """Replay a trace on ``target`` with fio (``fio``: the binary, default fio on PATH).

    ``catalog`` lets the product's own scratch files be replayed on and records a file
    target created here as one (see :func:`collectors.targets.claim_target`).
    ``slip_us`` is taken off every positive gap of the lanes' iologs; None measures it
    first with a short calibration replay of the trace's start (:mod:`traces.replay.clock`).
    ``resize``: what to do with requests the target cannot take (:func:`traces.replay.iolog.remap`);
    whatever was changed is counted in ``fit`` and warned about.
    """
    if not 0.01 <= speed <= 100:
        raise InvalidInput("speed must be between 0.01 and 100")
    if lanes is not None and not 1 <= lanes <= MAX_LANES:
        raise InvalidInput(f"lanes must be between 1 and {MAX_LANES}")
    if slip_us is not None and not 0 <= slip_us <= MAX_SLIP_US:
        raise InvalidInput(f"slip_us must be between 0 and {MAX_SLIP_US:g}")
    requests = load_requests(open_trace(trace_path, fmt), max_requests)
    block = logical_block_size(target)
    remap(requests, 1 << 62, block, resize)  # a refusal comes before the target is created or claimed
    target_size, warnings = prepare_target(target, destroy_data, size, catalog)
    align = max(block, 4096)
    c, fit = remap(requests, target_size, block, resize)
    warnings += fit.warnings()
    n = len(c)
    if lanes is None:
        depth = max_outstanding(c)
        lanes = replay_lanes(depth)
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
    lat["trace_bs"] = fit.trace_size[lat["index"].to_numpy()]
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
        slip_us=float(slip_us), residual_slip_us=_measured_slip(lat, c, lanes, speed), fit=fit,
    )

