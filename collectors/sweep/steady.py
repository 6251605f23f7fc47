"""An open-loop point's steady state: its requests after a warm-up, read from fio's per-I/O logs.

A rate-limited point starts from idle, and a token bucket does not forgive that start: on
zram under the block throttle at 2,000 IO/s, 4 KiB Poisson reads at 1,952 IO/s measured
627-775 us mean (p50 5.3-5.6 us, p99 15.5-18.0 ms) because 53-56 requests waited over
1 ms, all in the first 500 ms of a 2 s point and none after.  The replay of a trace at that
rate meets the bucket already busy (its device check and calibration replay run just
before it) and measured 3.9-4.8 us mean.  fio's own remedies keep the start: a
``ramp_time`` of 500 ms restarts the rate's clock when it resets the statistics, and 8-10
such waits came right after it; a warm-up job before the measured one (``stonewall``)
idles the bucket while fio starts the next group's processes, and the point still measured
44-48 us mean.

So a point runs :data:`WARMUP_MS` longer with per-I/O latency logs (``write_lat_log``), and
its latency, IO/s and bandwidth are computed from the requests issued after the warm-up,
by the same processes that warmed the bucket: nothing restarts.  fio's JSON still gives
the row's other fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.fio.results import PERCENTILES
from modeling.errors import NoData
from modeling.units import MIB

WARMUP_MS = 1000
LOG_NAME = "point"


def read_logs(folder: Path) -> pd.DataFrame:
    """Every job's latency log in ``folder``: completion (ms), latency (ns), direction, size."""
    parts = []
    for path in sorted(folder.glob(f"{LOG_NAME}_lat.*.log")):
        if path.stat().st_size:
            df = pd.read_csv(path, header=None, skipinitialspace=True, usecols=[0, 1, 2, 3])
            df.columns = ["time_ms", "lat_ns", "ddir", "bs"]
            parts.append(df)
    if not parts:
        raise NoData("fio wrote no latency log for the open-loop point")
    return pd.concat(parts, ignore_index=True)


def _metrics(lat_us: np.ndarray, sizes: np.ndarray, span_s: float) -> dict[str, float]:
    if not len(lat_us):
        out = {"iops": 0.0, "bandwidth_mib_s": 0.0, "latency_mean_us": float("nan")}
        return {**out, **{f"latency_{name}_us": float("nan") for name, _ in PERCENTILES}}
    out = {
        "iops": len(lat_us) / span_s,
        "bandwidth_mib_s": float(sizes.sum()) / MIB / span_s,
        "latency_mean_us": float(lat_us.mean()),
    }
    for name, pct in PERCENTILES:
        out[f"latency_{name}_us"] = float(np.percentile(lat_us, pct))
    return out


def steady_metrics(log: pd.DataFrame, warmup_ms: int, measured_ms: int) -> dict[str, float]:
    """The row's metrics (combined and per direction) over the requests issued from ``warmup_ms``
    to ``warmup_ms + measured_ms`` (issue time: completion less latency)."""
    issued_ms = log["time_ms"].to_numpy(np.float64) + 0.5 - log["lat_ns"].to_numpy(np.float64) / 1e6
    keep = log[(issued_ms >= warmup_ms) & (issued_ms < warmup_ms + measured_ms)]
    if keep.empty:
        raise NoData(f"the open-loop point completed no request after its {warmup_ms} ms warm-up")
    span_s = measured_ms / 1000.0
    lat_us = keep["lat_ns"].to_numpy(np.float64) / 1e3
    sizes = keep["bs"].to_numpy(np.float64)
    row: dict[str, Any] = _metrics(lat_us, sizes, span_s)
    for code, direction in ((0, "read"), (1, "write")):
        mine = (keep["ddir"] == code).to_numpy()
        for key, value in _metrics(lat_us[mine], sizes[mine], span_s).items():
            row[f"{direction}_{key}"] = value
    row["measured_write_ratio"] = row["write_iops"] / (row["read_iops"] + row["write_iops"])
    row["runtime_s"] = span_s
    row["warmup_s"] = warmup_ms / 1000.0
    row["steady_requests"] = int(len(keep))
    return row
