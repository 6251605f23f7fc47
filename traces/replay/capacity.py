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

import tempfile
from dataclasses import dataclass
from pathlib import Path

from modeling.errors import InvalidInput, NoData
from modeling.store.catalog import Catalog
from traces.replay.run import replay
from traces.synthetic import SyntheticSpec, write_synthetic

# Offered this many times the model's capacity, the lanes never sleep: they issue back to back
OVERLOAD = 3.0


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
