"""A sweep designed from traces: their mixes, in-flight range and rates, issued as the replay issues them.

``sweep --for-trace`` measures what a trace prediction needs and nothing else:

* **Mixes.** Every window of every trace is a point in (write ratio, log2 read size, log2
  write size, randomness); a k-means (each trace weighing the same, its windows by their
  requests) cuts them into ``budget // len(ladder)`` mixes (all of them when there are
  fewer).  Sizes are rounded to the target's logical block size (the smallest request it
  takes).
* **Loads.** Each mix is measured closed loop over a ladder of synchronous (``psync``)
  jobs, ``queue_depth=1`` and ``numjobs`` 1, 2, 4, ... up to the replay's lane count (16,
  or the traces' most requests in flight, at most 64): how ``trace replay`` issues a trace,
  so the curve's QD1 is the replay's service time and its top is the replay's capacity.
* **Open-loop points.** Per mix, Poisson arrivals (:mod:`collectors.sweep.openloop`, as
  many psync lanes as the replay) at the traces' own offered rates (the median and the
  95th percentile of the mix's windows) and at :data:`FRACTIONS` of the capacity the
  closed-loop points measured, so the prediction's light load is anchored in what the
  replay will meet.  Their rates need the closed-loop capacities: :func:`open_loop_points`
  builds them after the closed-loop phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from collectors.plans.capacities import closed_rows, mix_capacity
from collectors.plans.presets import Plan
from collectors.sweep.openloop import MIN_REQUESTS, open_loop_seconds, replay_lanes
from collectors.sweep.steady import WARMUP_MS
from modeling.errors import InvalidInput, NoData
from modeling.training import MIN_ROWS
from modeling.workload import MAX_REQUEST_SIZE, Workload

FRACTIONS = (0.2, 0.5, 0.8, 0.95)
DEFAULT_BUDGET = 48
OWN_RATE_QUANTILES = (0.5, 0.95)
TRAIN_MIN_POINTS = MIN_ROWS  # a model needs this many closed-loop points
FEATURES = ("write_ratio", "read_size", "write_size", "randomness")
# the smallest difference in write ratio or randomness (and 0.4 of a size doubling: the size
# features are log2 x 0.25) that makes two mixes; randomness is planned on this grid.  A
# Poisson trace of random 1 MiB reads over 64 MiB reads 1 in 64 requests in sequence, and its
# windows' randomness spreads over 0.96-1.0
MIX_GRID = 0.1
# capacity points (see capacity_points): offered this many times the closed-loop capacity, for
# mixes whose windows reach NEAR_CAPACITY of it.  Neither 3x nor 1x measures what the
# validation's 4 s replays meet (zram, 1 MiB reads, 2 CPUs): 3x served 8,673 IO/s and 1x
# 9,171 of 11,132 in the sweep, while the replays of traces offered 7,000-9,250 a window
# were served 5,100-6,500 (docs/benchmarks.md, the user's trace flow); 3x caps lower
OVERLOAD = 3.0
NEAR_CAPACITY = 0.3


class Characterised(Protocol):
    """A characterised trace (:class:`traces.characterize.Characterization`): windows and a summary."""

    windows: pd.DataFrame
    summary: dict[str, Any]


@dataclass
class MixSpec:
    """One planned mix: its workload at one job, its windows' offered rates, its share of requests."""

    workload: Workload
    own_rates: list[float]
    share: float


@dataclass
class TracePlan:
    """The closed-loop plan, the mixes its open-loop points are measured at, and the lanes."""

    closed: Plan
    mixes: list[MixSpec]
    lanes: int
    ladder: list[int]
    fractions: tuple[float, ...] = FRACTIONS
    notes: list[str] = field(default_factory=list)

    @property
    def n_open_loop(self) -> int:
        """How many open-loop points the plan will measure (before rates that coincide are merged)."""
        return sum(len(m.own_rates) + len(self.fractions) for m in self.mixes)

    def seconds(self, runtime_ms: int, ramp_ms: int = 0, min_requests: int = MIN_REQUESTS,
                overhead_s: float = 1.0, warmup_ms: int = WARMUP_MS) -> float:
        """About how long the whole plan takes: closed-loop points, then open-loop points.

        The capacity fractions' rates are not known before the closed-loop phase: they are
        counted at the sweep's runtime, the traces' own rates at theirs.
        """
        closed = len(self.closed) * ((runtime_ms + ramp_ms) / 1000.0 + overhead_s)
        own = [(m.workload, int(r)) for m in self.mixes for r in m.own_rates]
        per_point = (runtime_ms + ramp_ms + warmup_ms) / 1000.0 + overhead_s
        frac = len(self.mixes) * len(self.fractions) * per_point
        own_s = open_loop_seconds(own, runtime_ms, ramp_ms, min_requests, overhead_s, warmup_ms)
        return closed + own_s + frac

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, stored with the sweep's info."""
        return {"lanes": self.lanes, "ladder": self.ladder, "fractions": list(self.fractions),
                "mixes": [{**m.workload.as_row(), "own_rates": m.own_rates, "share": m.share}
                          for m in self.mixes],
                "closed_points": len(self.closed), "open_loop_points": self.n_open_loop, "notes": self.notes}


def _grid(value: float) -> float:
    return round(round(value / MIX_GRID) * MIX_GRID, 2)


def _round_size(size: float, block: int) -> int:
    return int(min(max(block, round(size / block) * block), MAX_REQUEST_SIZE))


def _weighted_kmeans(x: np.ndarray, w: np.ndarray, k: int, iters: int = 50) -> np.ndarray:
    """Cluster labels of the rows of ``x``: weighted Lloyd from a farthest-first start.

    The start is the heaviest row, then each row farthest from those chosen, so that the
    mixes bracket the traces (a rare mix far from the rest still gets its own point);
    deterministic, no seed.
    """
    chosen = [int(np.argmax(w))]
    dmin = ((x - x[chosen[0]]) ** 2).sum(axis=1)
    while len(chosen) < k:
        nxt = int(np.argmax(dmin))
        chosen.append(nxt)
        dmin = np.minimum(dmin, ((x - x[nxt]) ** 2).sum(axis=1))
    centres = x[chosen].copy()
    labels = np.full(len(x), -1, dtype=np.int64)
    for _ in range(iters):
        new = np.argmin(((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            mine = labels == j
            if mine.any():
                centres[j] = np.average(x[mine], axis=0, weights=w[mine])
    return labels


def _windows(traces: Sequence[Characterised]) -> pd.DataFrame:
    frames = []
    for ch in traces:
        win = ch.windows
        if win.empty:
            continue
        cols = {f: win[f] if f in win else win["request_size" if "size" in f else "randomness"]
                for f in ("read_size", "write_size", "read_randomness", "write_randomness")}
        frames.append(pd.DataFrame({
            "write_ratio": win["write_ratio"], "randomness": win["randomness"], **cols,
            "requests": win["requests"], "iops": win["iops"], "queue_depth": win["queue_depth"],
            # each trace weighs the same in all, its windows by their requests
            "weight": win["requests"] / float(win["requests"].sum()),
        }))
    if not frames:
        raise NoData("the traces have no windows with requests")
    return pd.concat(frames, ignore_index=True).dropna(subset=["write_ratio", "read_size", "write_size"])


def lanes_for(traces: Sequence[Characterised]) -> int:
    """The replay's lane count for these traces: 16, or their most requests in flight (<= 64)."""
    most = max((float(ch.windows["queue_depth"].max()) for ch in traces if len(ch.windows)), default=1.0)
    return replay_lanes(most)


def plan_for_traces(traces: Sequence[Characterised], *, budget: int = DEFAULT_BUDGET,
                    block_size: int = 512) -> TracePlan:
    """The sweep plan for ``traces`` (see the module docstring) on a target of ``block_size`` blocks."""
    if not traces:
        raise InvalidInput("--for-trace needs at least one trace")
    if block_size < 512 or block_size & (block_size - 1) or block_size > MAX_REQUEST_SIZE:
        # (over the largest request, every size would be clamped to one that is not a whole block)
        raise InvalidInput(
            f"logical block size {block_size} is not a power of two in 512..{MAX_REQUEST_SIZE}")
    win = _windows(traces)
    lanes = lanes_for(traces)
    ladder = [1 << i for i in range(int(np.log2(lanes)) + 1)]
    if ladder[-1] != lanes:
        ladder.append(lanes)
    if budget < len(ladder):
        raise InvalidInput(f"--budget {budget} is under one mix's ladder of {len(ladder)} loads "
                           f"({', '.join(map(str, ladder))} jobs)")
    x = np.column_stack([win["write_ratio"], np.log2(win["read_size"].clip(lower=512)),
                         np.log2(win["write_size"].clip(lower=512)), win["randomness"]])
    # a size doubling counts as a quarter of the write-ratio range (traces.predict.utilisation)
    x = x * np.array([1.0, 0.25, 0.25, 1.0])
    w = win["weight"].to_numpy(np.float64)
    # mixes apart by less than a grid step are one mix: a window of random offsets whose
    # randomness reads 0.998 is the same mix as one at 1.0 and must not take a ladder of its own
    k = min(budget // len(ladder), len(np.unique(np.round(x / MIX_GRID), axis=0)))
    labels = _weighted_kmeans(x, w, k)
    mixes: list[MixSpec] = []
    points: list[Workload] = []
    for j in range(k):
        mine = labels == j
        if not mine.any():
            continue
        part, pw = win[mine], w[mine]
        avg = {f: float(np.average(part[f], weights=pw)) for f in
               ("write_ratio", "randomness", "read_randomness", "write_randomness")}
        sizes = {f: _round_size(float(np.average(part[f], weights=pw)), block_size)
                 for f in ("read_size", "write_size")}
        wr = round(avg["write_ratio"], 2)
        main = sizes["write_size"] if wr >= 0.5 else sizes["read_size"]
        base = Workload(write_ratio=wr, queue_depth=1, numjobs=1, request_size=main,
                        randomness=_grid(avg["randomness"]), read_size=sizes["read_size"],
                        write_size=sizes["write_size"], read_randomness=_grid(avg["read_randomness"]),
                        write_randomness=_grid(avg["write_randomness"]))
        rates = {round(float(np.quantile(part["iops"], q)), 1) for q in OWN_RATE_QUANTILES}
        share = float(pw.sum() / w.sum())
        same = next((m for m in mixes if m.workload == base), None)
        if same is not None:  # clusters that differ below the rounding are one mix
            same.own_rates = sorted(set(same.own_rates) | {r for r in rates if r > 0})
            same.share += share
            continue
        mixes.append(MixSpec(base, sorted(r for r in rates if r > 0), share))
        points += [base.model_copy(update={"numjobs": n}) for n in ladder]
    unique = list(dict.fromkeys(points))
    notes = [f"{len(win)} windows of {len(traces)} trace(s) in {len(mixes)} mixes x {len(ladder)} loads "
             f"({', '.join(map(str, ladder))} psync jobs); sizes rounded to {block_size} B"]
    unique += bracket(mixes, ladder, unique, block_size, budget, notes)
    closed = Plan("for-trace", tuple(unique), settings={"budget": budget, "block_size": block_size,
                                                         "lanes": lanes})
    return TracePlan(closed, mixes, lanes, ladder, notes=notes)


def bracket(mixes: list[MixSpec], ladder: list[int], points: list[Workload], block_size: int, budget: int,
            notes: list[str]) -> list[Workload]:
    """Ladders at twice, half, four times ... the heaviest mix's sizes, while the plan has fewer than
    :data:`TRAIN_MIN_POINTS` closed-loop points and the budget allows a whole ladder more.

    Traces of one mix (a synthetic Poisson trace: 4 KiB random reads) give one ladder of 5
    points, under what ``train`` needs (8); sizes around the trace's own give the model
    something to interpolate between.  A note says what was added.
    """
    heavy = max(mixes, key=lambda m: m.share).workload
    added: list[Workload] = []
    for factor in (2.0, 0.5, 4.0, 0.25, 8.0):
        if len(points) + len(added) >= TRAIN_MIN_POINTS or len(points) + len(added) + len(ladder) > budget:
            break
        sizes = {f: int(getattr(heavy, f) * factor) for f in ("request_size", "read_size", "write_size")}
        if min(sizes.values()) < block_size or max(sizes.values()) > MAX_REQUEST_SIZE:
            continue
        added += [heavy.model_copy(update={**sizes, "numjobs": n}) for n in ladder]
        notes.append(f"the traces' mixes give {len(points)} closed-loop points, under the {TRAIN_MIN_POINTS} "
                     f"a model needs: the heaviest mix's ladder added at {factor:g}x its sizes")
    return added


def mix_capacities(plan: TracePlan, measured: pd.DataFrame) -> list[tuple[MixSpec, float]]:
    """Each planned mix and the capacity (most IO/s) its closed-loop points measured."""
    closed = closed_rows(measured)
    return [(mix, mix_capacity(closed, mix.workload)) for mix in plan.mixes]


def open_loop_points(plan: TracePlan, measured: pd.DataFrame) -> list[tuple[Workload, int]]:
    """``(workload of the replay's lanes, offered IO/s)`` per mix: its traces' own rates and
    the plan's fractions of the capacity its closed-loop points measured."""
    out: list[tuple[Workload, int]] = []
    for mix, capacity in mix_capacities(plan, measured):
        rates = {max(int(round(r)), 1) for r in mix.own_rates}
        rates |= {max(int(round(f * capacity)), plan.lanes) for f in plan.fractions}
        lanes = mix.workload.model_copy(update={"numjobs": plan.lanes})
        out += [(lanes, r) for r in sorted(rates)]
    return out


def capacity_points(plan: TracePlan, measured: pd.DataFrame) -> list[tuple[Workload, int]]:
    """``(workload of the replay's lanes, offered IO/s)``: the mixes whose traces come near their
    capacity (a window's rate at least :data:`NEAR_CAPACITY` of it), offered :data:`OVERLOAD` x it.

    Replayed so (:mod:`traces.replay.capacity`), such a point measures what the replay path
    itself serves at the mix, which the prediction caps its capacity at.  Mixes whose traces
    stay far below capacity (the shared traces: wsrch's 16 KiB reads at 430-510 IO/s where
    psync serves tens of thousands) never meet that cap and are not replayed.
    """
    out: list[tuple[Workload, int]] = []
    for mix, capacity in mix_capacities(plan, measured):
        if max(mix.own_rates, default=0.0) >= NEAR_CAPACITY * capacity:
            lanes = mix.workload.model_copy(update={"numjobs": plan.lanes})
            out.append((lanes, int(round(OVERLOAD * capacity))))
    return out
