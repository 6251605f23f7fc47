"""``trace validate``'s probe of the replay path's capacity, taken right before the replay.

``sweep --for-trace`` measures what the replay path serves at each mix its traces come near
the capacity of (:func:`traces.replay.capacity.replay_capacity_point`), and the prediction
caps each window's capacity there (:mod:`traces.predict.ceiling`).  On a CPU-bound device
that capacity is not one number: on the zram reference (2 cores, 1 MiB random reads) one
1 s capacity replay measured 8,268 IO/s in a sweep while the validation's replays minutes
later were served 8,090-8,985 a window (7 of 8 kept up, all 8 predicted saturated); back to
back, two identical capacity replays measured 7,140 and 9,117.  So the validation measures
the capacity again beside its replay, with the sweep's own workload and offered rate,
:data:`PROBES` times, and predicts with the median; the sweep's value, each probe and their
spread are reported beside it (``capacity_probe``), and the prediction's note says which one
it used.

Only mixes the trace's windows come near are probed (a window at :data:`NEAR_CAPACITY` of
the sweep's replay capacity or more, as the sweep chose them), and only where the sweep
measured one: other traces pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from collectors.fio.jobs import JobSettings
from collectors.plans.for_trace import NEAR_CAPACITY, OVERLOAD
from modeling.store.catalog import Catalog
from modeling.store.open_loop_rows import replayed_mask
from modeling.workload import Workload
from traces.predict.ceiling import ReplayCeilings
from traces.predict.engines import kind_words, size_words
from traces.predict.utilisation import mix_keys, nearest_mix
from traces.replay.capacity import replay_capacity_point
from traces.replay.iolog import DEFAULT_SIZE, prepare_target

PROBES = 3


@dataclass
class CapacityProbe:
    """One mix's replay-path capacity: the sweep's, the probes taken now, and which one is used."""

    mix: str
    swept_iops: float
    closed_iops: float
    probes: list[float]

    @property
    def iops(self) -> float:
        """The median of the probes: what the prediction uses."""
        return float(np.median(self.probes))

    @property
    def spread(self) -> float:
        """(largest - smallest) / median of the probes."""
        return (max(self.probes) - min(self.probes)) / self.iops

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the note."""
        return {"mix": self.mix, "swept_iops": self.swept_iops, "closed_loop_iops": self.closed_iops,
                "probes_iops": self.probes, "probed_iops": self.iops, "spread": self.spread, "used": "probe",
                "note": self.note}

    @property
    def note(self) -> str:
        """One line: the sweep's capacity, the probes' median and spread, and which one was used."""
        shown = ", ".join(f"{p:,.0f}" for p in self.probes)
        change = self.iops / self.swept_iops - 1
        return (f"replay path's capacity for {self.mix}: sweep --for-trace measured "
                f"{self.swept_iops:,.0f} IO/s, probed now {self.iops:,.0f} ({change:+.0%}; median of "
                f"{shown}, spread {self.spread:.0%}); the prediction uses the probe")


@dataclass
class CapacityProber:
    """Probes the replay path on ``target`` for a trace's prediction (``predict_trace``'s ``probe``);
    what it measured is kept in ``found``."""

    target: str
    destroy_data: bool
    catalog: Catalog | None = None
    repeats: int = PROBES
    found: list[CapacityProbe] = field(default_factory=list)

    def __call__(self, ceilings: ReplayCeilings, open_loop: pd.DataFrame,
                 windows: pd.DataFrame) -> ReplayCeilings:
        """``ceilings`` with the probed served rate of every mix the trace's ``windows`` come near."""
        rows = open_loop[replayed_mask(open_loop)]
        if rows.empty or windows.empty:
            return ceilings
        near = nearest_mix(windows, ceilings.keys)
        row_mix = nearest_mix(rows, ceilings.keys)
        rate = windows["iops"].to_numpy(np.float64)
        todo = []
        for i in np.unique(near):
            swept = float(ceilings.served[i])
            mine = rows[row_mix == i]
            near_it = np.nanmax(rate[near == i]) >= NEAR_CAPACITY * swept
            if not mine.empty and np.isfinite(swept) and near_it:
                todo.append((int(i), swept, mine))
        if not todo:
            return ceilings
        # claimed (a file target created or grown) as the replay would, so the probes read real data
        span, _ = prepare_target(self.target, self.destroy_data, DEFAULT_SIZE, self.catalog)
        job = JobSettings(target=self.target, engine="psync", size=min(span, DEFAULT_SIZE))
        served: dict[int, float] = {}
        for i, swept, mine in todo:
            workload = Workload.from_row(mine.iloc[-1].to_dict())
            offered = int(round(OVERLOAD * float(ceilings.capacity[i])))
            probes = [float(replay_capacity_point(workload, offered, job, catalog=self.catalog)[0]["iops"])
                      for _ in range(self.repeats)]
            wr, log_size, _ = mix_keys(mine.iloc[[-1]])[0]
            mix = f"{size_words(2.0**log_size)} {kind_words(wr)}"
            self.found.append(CapacityProbe(mix, swept, float(ceilings.capacity[i]), probes))
            served[i] = self.found[-1].iops
        return ceilings.probed(served)
