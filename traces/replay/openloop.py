"""Open-loop points measured through the replay path: a Poisson trace of a mix replayed at a rate.

``sweep --for-trace`` measures its open-loop points (the traces' own rates and fractions of
each mix's capacity, :func:`collectors.plans.for_trace.open_loop_points`) the way ``trace
replay`` issues a trace: a Poisson trace of the mix at the point's rate, written as an iolog
and replayed through the replay's lanes (:func:`traces.replay.run.replay`: the same engine,
lane count, real-time priority, calibration run and cgroup), instead of by fio's
rate-limited jobs.  The stored row is an open-loop row like fio's (``offered_iops``, the
latency of every replayed request) with ``open_loop_method`` :data:`REPLAYED_RATE`, which the
correction learns from (:mod:`traces.predict.utilisation`) and the replay path's capacity
ignores (that is :data:`modeling.store.open_loop_rows.REPLAYED`'s, :mod:`traces.replay.capacity`).

A replayed point is as long as a fio point's measured part (the sweep's runtime, or long
enough for ``min_requests`` requests, :func:`collectors.sweep.openloop.point_runtime_ms`) and
is not cut: the calibration replay just before it has the device (and a token bucket) busy,
as the validation's replay meets it after its device check and calibration.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from collectors.fio.jobs import JobSettings, effective_workload
from collectors.sweep.openloop import MIN_REQUESTS, point_runtime_ms
from modeling.errors import InvalidInput, NoData
from modeling.store.catalog import Catalog
from modeling.store.open_loop_rows import METHOD, OFFERED
from modeling.units import MIB
from modeling.workload import Workload
from traces.chunks import TraceChunk
from traces.replay.iolog import write_iolog
from traces.replay.run import replay
from traces.synthetic import interarrivals

REPLAYED_RATE = "replay-rate"
"""The :data:`modeling.store.open_loop_rows.METHOD` of an open-loop point replayed at its rate."""
PERCENTILES = (("p50", 50), ("p90", 90), ("p99", 99), ("p99_9", 99.9))
ALIGN = 4096  # offsets on 4 KiB boundaries, as the replay aligns them (traces.replay.run)


def mix_trace(workload: Workload, rate: float, duration_s: float, span: int, seed: int = 7) -> TraceChunk:
    """A Poisson trace of ``workload``'s mix at ``rate`` IO/s for ``duration_s``: its write ratio,
    each direction's size and randomness, offsets within ``span`` (random ones uniform, sequential
    ones after the direction's previous request)."""
    if not (rate > 0 and duration_s > 0):
        raise InvalidInput("a replayed point needs a positive rate and duration")
    w = effective_workload(workload)
    rng = np.random.default_rng(seed)
    n = max(int(round(rate * duration_s)), 2)
    t = np.cumsum(interarrivals(n, rate, "poisson", rng))
    t -= t[0]
    is_write = rng.random(n) < w.write_ratio
    # a workload's per-direction sizes and randomness default to its request size and randomness
    sizes = np.where(is_write, int(w.write_size or w.request_size), int(w.read_size or w.request_size))
    randomness = np.where(is_write, float(w.write_randomness or 0.0), float(w.read_randomness or 0.0))
    if int(sizes.max()) > span:
        raise InvalidInput(f"a {int(sizes.max())} B request does not fit the {span} B span")
    off = (rng.integers(0, np.maximum((span - sizes) // ALIGN, 0) + 1) * ALIGN).astype(np.int64)
    seq = rng.random(n) >= randomness
    for write in (False, True):  # sequential requests follow the previous one of their direction
        idx = np.flatnonzero(is_write == write)
        for j in range(1, len(idx)):
            if seq[idx[j]]:
                nxt = off[idx[j - 1]] + sizes[idx[j - 1]]
                off[idx[j]] = nxt if nxt + sizes[idx[j]] <= span else 0
    return TraceChunk.build(t, is_write, off, sizes)


def replay_open_point(workload: Workload, offered: int, job: JobSettings, *, catalog: Catalog | None = None,
                      min_requests: int = MIN_REQUESTS) -> tuple[dict[str, Any], str]:
    """One open-loop point of ``sweep --for-trace`` measured through the replay path (see the module
    docstring): ``workload``'s mix at ``offered`` IO/s on ``workload.numjobs`` lanes on
    ``job.target`` (span ``job.size``); its stored row and a JSON summary as its raw output."""
    if not offered > 0:
        raise InvalidInput("an open-loop point's rate must be positive")
    w = effective_workload(workload)
    duration = point_runtime_ms(offered, job.runtime_ms, min_requests) / 1000.0
    chunk = mix_trace(w, float(offered), duration, int(job.size), seed=int(offered))
    with tempfile.TemporaryDirectory(prefix="ssdpredict-openreplay-") as tmp:
        path = Path(tmp) / "point.iolog"
        write_iolog(chunk, "/dev/point", path)
        rep = replay(path, job.target, destroy_data=True, window_s=duration, lanes=w.numjobs,
                     size=int(job.size), catalog=catalog)
    if rep.log is None or not len(rep.log):
        raise NoData("the replayed open-loop point completed no request")
    lat_us = rep.log["lat_ns"].to_numpy(np.float64) / 1e3
    is_write = (rep.log["ddir"] == 1).to_numpy(bool)
    size = rep.log["bs"].to_numpy(np.float64)
    row: dict[str, Any] = {**w.as_row(), **_metrics(lat_us, size, float(rep.replay_rate))}
    for name, mine in (("read", ~is_write), ("write", is_write)):
        if mine.any():
            row.update({f"{name}_{k}": v for k, v in
                        _metrics(lat_us[mine], size[mine], float(rep.replay_rate) * mine.mean()).items()})
    row.update({OFFERED: float(rep.trace_rate), "requested_iops": float(offered), "engine": "psync",
                METHOD: REPLAYED_RATE, "replay_requests": int(rep.requests), "target": job.target,
                "measured_write_ratio": float(is_write.mean()), "runtime_s": duration})
    raw = json.dumps({"replay_rate_iops": rep.replay_rate, "trace_rate_iops": rep.trace_rate,
                      "lanes": rep.lanes, "requests": rep.requests, "slip_us": rep.slip_us,
                      "warnings": rep.warnings})
    return row, raw


def _metrics(lat_us: np.ndarray, size: np.ndarray, iops: float) -> dict[str, float]:
    """Served IO/s (given), bandwidth, mean and percentiles of one set of replayed requests."""
    return {"iops": iops, "bandwidth_mib_s": iops * float(size.mean()) / MIB,
            "latency_mean_us": float(lat_us.mean()),
            **{f"latency_{name}_us": float(np.percentile(lat_us, pct)) for name, pct in PERCENTILES}}
