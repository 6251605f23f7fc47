"""Replay a trace on a target with fio and measure it per window.

The trace's requests are remapped into the target (``offset mod usable size``, aligned
down to 4096 bytes, or 512 when the trace has sizes that are not multiples of 4096; sizes
rounded up to 512) and dealt round-robin to *lanes*, one fio job each, replaying its own
iolog version 3 (timestamps in microseconds, divided by ``speed``) with ``direct=1`` and
the synchronous ``psync`` engine, logging every I/O (``write_lat_log`` + ``log_offset``).

Why lanes of synchronous I/O: fio sleeps between timed iolog entries without reaping
completions, so with an asynchronous engine and iodepth > 1 every I/O's completion latency
would include those sleeps (measured here: 26 ms instead of 25 us for 4 KiB reads).  A
synchronous job measures each I/O exactly; concurrency comes from the lanes.  The number
of lanes is the trace's maximum number of requests in flight when it has latencies (at
most 64), else 16; a lane whose previous I/O is still running delays its next one, which
shows up as rate drift.  fio applies no delay before the first I/O of an iolog, so every
timestamp is shifted by 1 ms.

Per window (on the trace's time axis) latency mean and p99 are over the window's requests,
IOPS and bandwidth count the completions within the window's replay time.  The replay's
request rate is compared with the trace's; a drift above 2 % is reported as a warning.
"""

from __future__ import annotations

import os
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
DEFAULT_LANES = 16
MAX_LANES = 64
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
            "warnings": self.warnings,
            "windows": self.windows.to_dict(orient="records"),
        }


def _fill(path: str, start: int, size: int) -> None:
    """Write data from ``start`` to ``size`` so that reads there reach the device."""
    block = np.random.default_rng(0).integers(0, 256, 4 * MIB, dtype=np.uint8).tobytes()
    with open(path, "r+b" if os.path.exists(path) else "wb") as fh:
        fh.seek(start)
        pos = start
        while pos < size:
            n = min(len(block), size - pos)
            fh.write(block[:n])
            pos += n
        fh.flush()
        os.fsync(fh.fileno())


def _prepare_target(target: str, destroy_data: bool, size: int) -> tuple[int, list[str]]:
    """Check the target; create or extend a file target with real data.  Returns (size, warnings)."""
    if not _SAFE_PATH.match(target):
        raise InvalidInput(
            f"target path {target!r} has characters fio cannot take safely "
            "(use letters, digits, '.', '_', '-', '/', '+')"
        )
    info = check_target(target, destroy_data)
    if info.kind != "file":
        return int(info.size), []
    # Reads of a file's holes (or of fallocated, unwritten extents) return zeros without
    # touching the device, so a new or short file is written for real, not made sparse.
    if info.size < size:
        _fill(target, info.size, size)
        return size, []
    st = os.stat(target)
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
    if not ok.any():
        return None
    t = np.concatenate([c.time_s[ok], c.time_s[ok] + c.latency_s[ok]])
    step = np.concatenate([np.ones(ok.sum(), np.int64), -np.ones(ok.sum(), np.int64)])
    order = np.lexsort((step, t))  # a completion at the same instant goes first
    return int(np.cumsum(step[order]).max())


def remap(c: TraceChunk, target_size: int) -> TraceChunk:
    """Fit offsets into the target (offset mod usable size), aligned; sizes rounded up to 512."""
    size = ((c.size + 511) // 512) * 512
    align = 4096 if not np.any(size % 4096) else 512
    keep = size <= target_size
    c, size = c.take(keep), size[keep]
    usable = max(target_size - int(size.max()), align)
    off = (c.offset % usable) // align * align
    return TraceChunk(c.time_s, c.is_write, off, size, c.latency_s)


def write_iolog(
    c: TraceChunk, target: str, out: Path, *, speed: float = 1.0, t0: float | None = None
) -> None:
    """Write requests as a fio v3 iolog (timestamps in us from ``t0``, divided by ``speed``)."""
    start = c.time_s[0] if t0 is None else t0
    t_us = np.round((c.time_s - start) * 1e6 / speed).astype(np.int64) + SHIFT_US
    op = np.where(c.is_write, "write", "read")
    with open(out, "w") as fh:
        fh.write(f"fio version 3 iolog\n0 {target} add\n0 {target} open\n")
        fh.writelines(
            f"{t} {target} {o} {a} {s}\n"
            for t, o, a, s in zip(t_us.tolist(), op.tolist(), c.offset.tolist(), c.size.tolist(), strict=True)
        )
        fh.write(f"{int(t_us[-1]) if len(t_us) else 0} {target} close\n")


def read_lat_log(path: Path) -> pd.DataFrame:
    """fio's per-I/O latency log: completion time (ms), latency (ns), direction, size, offset."""
    df = pd.read_csv(path, header=None, skipinitialspace=True)
    df = df.iloc[:, :5]
    df.columns = ["time_ms", "lat_ns", "ddir", "bs", "offset"]
    return df


def replay_windows(
    log: pd.DataFrame, trace_time_s: np.ndarray, window_s: float, speed: float
) -> pd.DataFrame:
    """Per-window measured metrics on the trace's time axis.

    ``trace_time_s[i]`` is the trace arrival time of the request of ``log`` row i: latency
    is attributed to the window of the trace request, whatever the replay's
    timing drift; IOPS and bandwidth count completions within the window's replay time.
    """
    lat_us = log["lat_ns"].to_numpy(np.float64) / 1e3
    wid_req = np.floor(trace_time_s / window_s).astype(np.int64)
    done_s = (log["time_ms"].to_numpy(np.float64) / 1e3 - SHIFT_US / 1e6) * speed
    wid_done = np.floor(np.maximum(done_s, 0.0) / window_s).astype(np.int64)
    size = log["bs"].to_numpy(np.float64)
    dur = window_s / speed
    rows = []
    for k in np.unique(wid_req):
        sel = wid_req == k
        done = wid_done == k
        lat = np.sort(lat_us[sel])
        rows.append(
            {
                "window_start_s": round(k * float(window_s), 9),
                "replay_requests": int(sel.sum()),
                "iops": done.sum() / dur,
                "bandwidth_mib_s": size[done].sum() / dur / MIB,
                "latency_mean_us": float(lat.mean()),
                "latency_p99_us": float(lat[int(np.ceil(0.99 * len(lat))) - 1]),
            }
        )
    return pd.DataFrame(rows)


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
) -> ReplayResult:
    """Replay a trace on ``target`` with fio (``fio``: the binary, default fio on PATH)."""
    if not 0.01 <= speed <= 100:
        raise InvalidInput("speed must be between 0.01 and 100")
    if lanes is not None and not 1 <= lanes <= MAX_LANES:
        raise InvalidInput(f"lanes must be between 1 and {MAX_LANES}")
    trace = open_trace(trace_path, fmt)
    target_size, warnings = _prepare_target(target, destroy_data, size)
    c = remap(load_requests(trace, max_requests), target_size)
    n = len(c)
    if lanes is None:
        depth = max_outstanding(c)
        lanes = DEFAULT_LANES if depth is None else min(max(depth, 1), MAX_LANES)
    lanes = min(lanes, n)
    with tempfile.TemporaryDirectory(prefix="ssdpredict-replay-") as tmp:
        job = ""
        for lane in range(lanes):
            log = Path(tmp) / f"lane{lane}.iolog"
            write_iolog(c.take(slice(lane, None, lanes)), target, log, speed=speed, t0=float(c.time_s[0]))
            job += (
                f"[lane{lane}]\nread_iolog={log}\nioengine=psync\ndirect=1\nthread=1\n"
                f"write_lat_log={Path(tmp) / f'lane{lane}'}\nlog_offset=1\n"
            )
        run_fio(job, timeout=timeout, binary=fio)
        parts = []
        for lane in range(lanes):
            logs = sorted(Path(tmp).glob(f"lane{lane}_lat.*.log"))
            if not logs:
                raise NoData(f"fio wrote no latency log for replay lane {lane}")
            part = read_lat_log(logs[0])
            part["index"] = lane + lanes * np.arange(len(part))  # psync: log order = issue order
            parts.append(part)
    lat = pd.concat(parts, ignore_index=True)
    if not len(lat):
        raise NoData("fio completed no I/O during the replay")
    lat = lat[lat["index"] < n].sort_values("index").reset_index(drop=True)
    windows = replay_windows(lat, c.time_s[lat["index"].to_numpy()], window_s, speed)
    issue_s = lat["time_ms"].to_numpy(np.float64) / 1e3 - lat["lat_ns"].to_numpy(np.float64) / 1e9
    span = float(c.time_s[-1] - c.time_s[0])
    replay_span = float(issue_s.max() - issue_s.min()) * speed
    trace_rate = (n - 1) / span if span > 0 else float("nan")
    replay_rate = (len(lat) - 1) / replay_span if replay_span > 0 else float("nan")
    drift = replay_rate / trace_rate - 1 if span > 0 and replay_span > 0 else float("nan")
    if len(lat) != n:
        warnings.append(f"fio completed {len(lat)} of {n} requests")
    if np.isfinite(drift) and abs(drift) > DRIFT_WARN:
        warnings.append(
            f"replayed request rate drifted {drift * 100:+.1f} % from the trace's "
            f"({replay_rate:.0f} vs {trace_rate:.0f} IO/s at speed {speed:g})"
        )
    return ReplayResult(target, n, speed, lanes, trace_rate, replay_rate, drift, windows, warnings)
