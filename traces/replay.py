"""Replay a trace on a target with fio and measure it per window.

The trace is converted to a fio iolog version 3 (timestamps in microseconds, divided by
``speed``; offsets remapped into the target with ``offset mod usable size`` and aligned
down to 4096 bytes, or 512 when the trace has sizes that are not multiples of 4096; sizes
rounded up to 512).  fio replays it with ``direct=1``, libaio and a per-I/O latency log
(``write_lat_log`` + ``log_offset``), from which per-window IOPS, bandwidth and latency
(mean, p99) are computed on the trace's time axis.  fio applies no delay before the first
I/O of an iolog, so every timestamp is shifted by 1 ms; it also leaves the last
iodepth-1 completions out of its per-I/O log, so iodepth-1 padding reads follow the trace.  The replay's request rate is
compared with the trace's; a drift above 2 % is reported as a warning.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.fio.runner import run_fio
from collectors.safety import check_target
from modeling.errors import InvalidInput, NoData
from modeling.workload import MIB
from traces.model import Trace, TraceChunk
from traces.reader import open_trace

DRIFT_WARN = 0.02
SHIFT_US = 1000
DEFAULT_SIZE = 256 * MIB
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+\-]+$")


@dataclass
class ReplayResult:
    """Per-window measurements of a replay and how faithful its timing was."""

    target: str
    requests: int
    speed: float
    trace_rate: float
    replay_rate: float
    drift: float
    windows: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "target": self.target, "requests": self.requests, "speed": self.speed,
            "trace_rate_iops": self.trace_rate, "replay_rate_iops": self.replay_rate,
            "rate_drift": self.drift, "warnings": self.warnings,
            "windows": self.windows.to_dict(orient="records"),
        }


def _prepare_target(target: str, destroy_data: bool, size: int) -> int:
    if not _SAFE_PATH.match(target):
        raise InvalidInput(f"target path {target!r} has characters fio cannot take safely "
                           "(use letters, digits, '.', '_', '-', '/', '+')")
    info = check_target(target, destroy_data)
    if info.kind == "file" and info.size < size:
        # A new or short file is extended (sparse) so the trace's offsets have room.
        with open(target, "ab") as fh:
            fh.truncate(size)
        return size
    return int(info.size)


def write_iolog(trace: Trace, target: str, target_size: int, out: Path, *, speed: float = 1.0,
                max_requests: int | None = None, pad: int = 0) -> tuple[int, float, TraceChunk]:
    """Write the fio v3 iolog; return (requests, trace span in s, the remapped requests)."""
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
    size = ((c.size + 511) // 512) * 512
    align = 4096 if not np.any(size % 4096) else 512
    keep = size <= target_size
    c, size = c.take(keep), size[keep]
    usable = max(target_size - int(size.max()), align)
    off = (c.offset % usable) // align * align
    t_us = np.round((c.time_s - c.time_s[0]) * 1e6 / speed).astype(np.int64) + SHIFT_US
    op = np.where(c.is_write, "write", "read")
    with open(out, "w") as fh:
        fh.write(f"fio version 3 iolog\n0 {target} add\n0 {target} open\n")
        fh.writelines(f"{t} {target} {o} {a} {s}\n" for t, o, a, s in zip(t_us.tolist(), op.tolist(),
                                                                          off.tolist(), size.tolist()))
        # fio 3.33 does not log the last iodepth-1 completions: trailing padding reads take
        # their place and are dropped from the results.
        fh.writelines(f"{int(t_us[-1]) + 2000} {target} read 0 {align}\n" for _ in range(pad))
        fh.write(f"{int(t_us[-1]) + 2000} {target} close\n")
    remapped = TraceChunk(c.time_s, c.is_write, off, size, c.latency_s)
    return len(c), float(c.time_s[-1] - c.time_s[0]), remapped


def read_lat_log(path: Path) -> pd.DataFrame:
    """fio's per-I/O latency log: completion time (ms), latency (ns), direction, size, offset."""
    df = pd.read_csv(path, header=None, skipinitialspace=True)
    df = df.iloc[:, :5]
    df.columns = ["time_ms", "lat_ns", "ddir", "bs", "offset"]
    return df


def replay_windows(log: pd.DataFrame, trace_time_s: np.ndarray, window_s: float, speed: float) -> pd.DataFrame:
    """Per-window measured metrics on the trace's time axis.

    ``log`` rows are in issue order, so row i is trace request i (fio issues an iolog in
    order): latency is attributed to the window of the trace request, whatever the replay's
    timing drift; IOPS and bandwidth count completions within the window's replay time.
    """
    lat_us = log["lat_ns"].to_numpy(np.float64) / 1e3
    wid_req = np.floor(trace_time_s[: len(log)] / window_s).astype(np.int64)
    done_s = (log["time_ms"].to_numpy(np.float64) / 1e3 - SHIFT_US / 1e6) * speed
    wid_done = np.floor(np.maximum(done_s, 0.0) / window_s).astype(np.int64)
    size = log["bs"].to_numpy(np.float64)
    dur = window_s / speed
    rows = []
    for k in np.unique(wid_req):
        sel = wid_req == k
        done = wid_done == k
        lat = np.sort(lat_us[sel])
        rows.append({
            "window_start_s": k * float(window_s),
            "replay_requests": int(sel.sum()),
            "iops": done.sum() / dur,
            "bandwidth_mib_s": size[done].sum() / dur / MIB,
            "latency_mean_us": float(lat.mean()),
            "latency_p99_us": float(lat[int(np.ceil(0.99 * len(lat))) - 1]),
        })
    return pd.DataFrame(rows)


def replay(trace_path: str | Path, target: str, *, fmt: str = "auto", destroy_data: bool = False,
           speed: float = 1.0, window_s: float = 1.0, iodepth: int = 64, size: int = DEFAULT_SIZE,
           max_requests: int | None = None, timeout: float = 3600.0) -> ReplayResult:
    """Replay a trace on ``target`` with fio; see the module docstring."""
    if not 0.01 <= speed <= 100:
        raise InvalidInput("speed must be between 0.01 and 100")
    if not 1 <= iodepth <= 4096:
        raise InvalidInput("iodepth must be between 1 and 4096")
    trace = open_trace(trace_path, fmt)
    target_size = _prepare_target(target, destroy_data, size)
    with tempfile.TemporaryDirectory(prefix="ssdpredict-replay-") as tmp:
        log = Path(tmp) / "replay.iolog"
        n, span, remapped = write_iolog(trace, target, target_size, log, speed=speed, max_requests=max_requests,
                                 pad=iodepth - 1)
        prefix = Path(tmp) / "replay"
        job = (
            "[replay]\n"
            f"read_iolog={log}\n"
            "ioengine=libaio\ndirect=1\n"
            f"iodepth={int(iodepth)}\n"
            f"write_lat_log={prefix}\nlog_offset=1\n"
        )
        run_fio(job, timeout=timeout)
        lat_logs = sorted(Path(tmp).glob("replay_lat.*.log"))
        if not lat_logs:
            raise NoData("fio wrote no latency log for the replay")
        lat = pd.concat([read_lat_log(p) for p in lat_logs], ignore_index=True)
    if not len(lat):
        raise NoData("fio completed no I/O during the replay")
    issue = lat["time_ms"].to_numpy(np.float64) / 1e3 - lat["lat_ns"].to_numpy(np.float64) / 1e9
    lat = lat.iloc[np.argsort(issue, kind="stable")[:n]].reset_index(drop=True)  # drop the padding
    windows = replay_windows(lat, remapped.time_s, window_s, speed)
    issue_s = lat["time_ms"].to_numpy(np.float64) / 1e3 - lat["lat_ns"].to_numpy(np.float64) / 1e9
    replay_span = float(issue_s.max() - issue_s.min()) * speed
    trace_rate = (n - 1) / span if span > 0 else float("nan")
    replay_rate = (len(lat) - 1) / replay_span if replay_span > 0 else float("nan")
    drift = replay_rate / trace_rate - 1 if span > 0 and replay_span > 0 else float("nan")
    warnings = []
    if len(lat) != n:
        warnings.append(f"fio completed {len(lat)} of {n} requests")
    if np.isfinite(drift) and abs(drift) > DRIFT_WARN:
        warnings.append(f"replayed request rate drifted {drift * 100:+.1f} % from the trace's "
                        f"({replay_rate:.0f} vs {trace_rate:.0f} IO/s at speed {speed:g})")
    return ReplayResult(target, n, speed, trace_rate, replay_rate, drift, windows, warnings)
