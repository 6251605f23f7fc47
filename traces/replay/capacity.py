"""How many IO/s the timed replay path itself delivers on a target: the open-loop reference's capacity.

The device model's capacity comes from closed-loop sweeps (fio keeps ``numjobs`` psync jobs
busy).  A trace replay reaches the same device through iolog lanes (:mod:`traces.replay.run`):
each request is read from an iolog, waited for, issued from one of 16 or more real-time
processes, and logged.  On a CPU-bound device such as zram on two cores that path costs
a share of the same CPUs the device runs on, so the replay saturates below the closed-loop
capacity.  Measured on zram, 1 MiB random reads (load average 0.4): 10,013 IO/s closed
loop with 16 psync jobs against 7,410 IO/s through a 16-lane timed replay of a Poisson
trace offered at 20,000 IO/s (-26 %; 2 lanes reached 10,347, but 16 lanes are what a
replay runs).  A window offered 85 % of the model's capacity is therefore over the
replay's, falls behind and is measured saturated while predicted unsaturated.

So, for validation, the reference's capacity is what the replay path delivers, measured
with that path: a Poisson trace offered well above the capacity at the mix is replayed and
its served rate (requests over the replay's span) is the capacity.
:func:`capacity_ceiling` turns that into the fraction of the model's capacity that the
open-loop prediction then caps its service curve at
(:func:`traces.predict.openloop.predict_open_loop`), so that "saturated" means the same for the
prediction and the measurement.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from collectors.fio.jobs import JobSettings, effective_workload
from modeling.store.open_loop_rows import METHOD, OFFERED, REPLAYED
from modeling.units import MIB
from modeling.workload import Workload

from modeling.errors import InvalidInput, NoData
from modeling.store.catalog import Catalog
from traces.replay.run import replay
from traces.synthetic import SyntheticSpec, write_synthetic

# Offered this many times the model's capacity, the lanes never sleep: they issue back to back
# (as sweep --for-trace offers its capacity points: collectors.plans.for_trace.OVERLOAD)
OVERLOAD = 3.0
# a capacity point replays this long, or fewer requests than MAX_REQUESTS
POINT_S = 1.0
MAX_REQUESTS = 60_000


@dataclass(frozen=True)
class ReplayCapacity:
    """The replay path's served rate at a mix, and the rate it was offered."""

    iops: float
    offered_iops: float
    lanes: int
    requests: int

    def ceiling(self, model_capacity: float) -> float:
        """The fraction of ``model_capacity`` the replay path delivers (at most 1)."""
        return capacity_ceiling(self.iops, model_capacity)


def capacity_ceiling(replay_iops: float, model_capacity: float) -> float:
    """``replay_iops / model_capacity``, at most 1: a replay faster than the model changes nothing."""
    if not (model_capacity > 0 and replay_iops > 0):
        raise InvalidInput("capacities must be positive")
    return min(1.0, replay_iops / model_capacity)


def measure_replay_capacity(
    target: str,
    model_capacity: float,
    *,
    write_ratio: float = 0.0,
    size: int = 4096,
    duration_s: float = 0.5,
    lanes: int | None = None,
    destroy_data: bool = False,
    catalog: Catalog | None = None,
) -> ReplayCapacity:
    """Replay a Poisson trace offered at :data:`OVERLOAD` x ``model_capacity`` and count what is served."""
    if not model_capacity > 0:
        raise InvalidInput("the model's capacity must be positive")
    offered = OVERLOAD * model_capacity
    spec = SyntheticSpec(offered, duration_s, "poisson", write_ratio, size, seed=7)
    with tempfile.TemporaryDirectory(prefix="ssdpredict-capacity-") as tmp:
        path, _ = write_synthetic(spec, Path(tmp))
        rep = replay(path, target, destroy_data=destroy_data, window_s=duration_s, lanes=lanes,
                     catalog=catalog)
    if not rep.replay_rate > 0:
        raise NoData("the capacity replay served no measurable rate")
    return ReplayCapacity(float(rep.replay_rate), offered, rep.lanes, rep.requests)


def replay_capacity_point(workload: Workload, offered: int, job: JobSettings, *,
                          catalog: Catalog | None = None, duration_s: float = POINT_S,
                          ) -> tuple[dict[str, Any], str]:
    """One capacity point of ``sweep --for-trace``: a Poisson trace of ``workload``'s mix offered
    at ``offered`` IO/s (beyond the capacity) replayed on ``job.target`` through the replay path
    on ``workload.numjobs`` lanes; its stored row (served IO/s, latency, ``offered_iops``,
    ``open_loop_method`` ``replay``) and a JSON summary as its raw output.

    The row is an open-loop point served under its offered rate: the correction leaves it out
    (:data:`traces.predict.utilisation.MIN_SERVED`) and the prediction takes the replay path's
    capacity from it (:func:`traces.predict.engines.replay_ceilings`).
    """
    if not offered > 0:
        raise InvalidInput("a capacity point's offered rate must be positive")
    w = effective_workload(workload)
    duration = min(duration_s, MAX_REQUESTS / offered)
    size = int(w.read_size or w.request_size) if w.write_ratio < 0.5 else int(w.write_size or w.request_size)
    spec = SyntheticSpec(float(offered), duration, "poisson", w.write_ratio, size,
                         randomness=float(w.randomness), span=int(job.size), seed=7)
    with tempfile.TemporaryDirectory(prefix="ssdpredict-capacity-") as tmp:
        path, _ = write_synthetic(spec, Path(tmp))
        rep = replay(path, job.target, destroy_data=True, window_s=duration, lanes=w.numjobs,
                     size=int(job.size), catalog=catalog)
    if not rep.replay_rate > 0 or rep.log is None or not len(rep.log):
        raise NoData("the capacity replay served no measurable rate")
    lat_us = rep.log["lat_ns"].to_numpy(np.float64) / 1e3
    row: dict[str, Any] = {
        **w.as_row(), "iops": float(rep.replay_rate), OFFERED: float(rep.trace_rate),
        "bandwidth_mib_s": float(rep.replay_rate) * size / MIB, "latency_mean_us": float(lat_us.mean()),
        **{f"latency_{name}_us": float(np.percentile(lat_us, pct))
           for name, pct in (("p50", 50), ("p90", 90), ("p99", 99), ("p99_9", 99.9))},
        "engine": "psync", METHOD: REPLAYED, "replay_requests": int(rep.requests),
        "target": job.target,
    }
    raw = json.dumps({"replay_rate_iops": rep.replay_rate, "trace_rate_iops": rep.trace_rate,
                      "lanes": rep.lanes, "requests": rep.requests, "warnings": rep.warnings})
    return row, raw
