"""A sweep designed for capacity questions: the mixes asked about, up to and past saturation.

``sweep --for-capacity`` measures what ``capacity`` needs (docs/capacity.md) and nothing else:

* **Mixes.** The ``--workload`` mixes given (write ratio, size, randomness), or the grid of
  ``--write-ratios`` x ``--sizes`` x ``--randomness`` (default 0, 0.4 and 1 writes at 16 KiB,
  random).  A model needs :data:`TRAIN_MIN_POINTS` closed-loop points: fewer (one mix) add the
  first mix's ladder at twice and half its size.
* **Loads.** Each mix closed loop over a ladder of synchronous (``psync``) jobs at
  ``queue_depth=1``, ``numjobs`` 1, 2, 4, 8, 16: how the open-loop points issue (16 lanes), so
  the curve's top is the capacity those points are fractions of.
* **Open-loop points** (:func:`open_loop_points`, after the closed-loop phase: their rates are
  fractions of each mix's measured capacity): :data:`FRACTIONS`, inside the knee where the
  answer to a latency target lies (a token bucket at 200 IO/s queues Poisson arrivals from half
  its rate on, docs/benchmarks.md), and one at 1.2, beyond saturation, which measures what an
  open-loop stream is really served (:mod:`traces.capacity.ceiling`).  A fraction whose rate is
  under :data:`MIN_RATE` IO/s is left out (too sparse to say anything in a point's time: 0.1 of
  a 200 IO/s device), and fractions that round to the same rate are measured once.  Each point
  runs long enough for ``min_requests`` requests, at most 10 s
  (:func:`collectors.sweep.openloop.point_runtime_ms`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from collectors.plans.capacities import closed_rows, mix_capacity
from collectors.plans.presets import Plan
from collectors.sweep.openloop import LANES, MIN_REQUESTS, open_loop_seconds
from collectors.sweep.steady import WARMUP_MS
from modeling.errors import InvalidInput
from modeling.training import MIN_ROWS
from modeling.workload import KIB, MAX_REQUEST_SIZE, Workload

FRACTIONS = (0.1, 0.3, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.2)
"""Of each mix's closed-loop capacity (the bench's validated points, docs/benchmarks.md)."""
LADDER = (1, 2, 4, 8, 16)
"""Closed-loop psync jobs: up to the open-loop points' lanes."""
MIN_RATE = 2 * LANES
"""IO/s under which a fraction's point is left out: two requests a second a lane."""
DEFAULT_MIXES = {"write_ratios": (0.0, 0.4, 1.0), "sizes": (16 * KIB,), "randomness": (1.0,)}
TRAIN_MIN_POINTS = MIN_ROWS
SIZE_FACTORS = (2.0, 0.5, 4.0, 0.25)
"""Sizes of the first mix's extra ladders when the mixes give too few points to train on."""
MIX_FIELDS = ("write_ratio", "request_size", "randomness", "read_size", "write_size",
              "read_randomness", "write_randomness")


@dataclass
class CapacityPlan:
    """The closed-loop plan, the mixes its open-loop points are measured at, and their fractions."""

    closed: Plan
    mixes: list[Workload]
    ladder: list[int]
    fractions: tuple[float, ...] = FRACTIONS
    notes: list[str] = field(default_factory=list)

    def seconds(self, runtime_ms: int, ramp_ms: int = 0, min_requests: int = MIN_REQUESTS,
                overhead_s: float = 1.0, warmup_ms: int = WARMUP_MS) -> float:
        """About how long the plan takes, before the closed-loop phase: its points, then the
        open-loop points counted at the sweep's runtime (their rates are not known yet)."""
        closed = len(self.closed) * ((runtime_ms + ramp_ms) / 1000.0 + overhead_s)
        per_point = (runtime_ms + ramp_ms + warmup_ms) / 1000.0 + overhead_s
        return closed + len(self.mixes) * len(self.fractions) * per_point

    def open_loop_seconds(self, capacities: Sequence[float], runtime_ms: int, ramp_ms: int = 0,
                          min_requests: int = MIN_REQUESTS, overhead_s: float = 1.0,
                          warmup_ms: int = WARMUP_MS) -> float:
        """About how long the open-loop phase takes, given each mix's closed-loop capacity (IO/s):
        a sparse point runs long enough for ``min_requests``."""
        points = [(w, r) for w, c in zip(self.mixes, capacities, strict=True)
                  for r in rates_of(c, self.fractions)]
        return open_loop_seconds(points, runtime_ms, ramp_ms, min_requests, overhead_s, warmup_ms)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, stored with the sweeps' info."""
        return {"mixes": [m.as_row() for m in self.mixes], "ladder": self.ladder,
                "fractions": list(self.fractions), "closed_points": len(self.closed), "notes": self.notes}


def grid_mixes(values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """The mixes of ``--write-ratios`` x ``--sizes`` x ``--randomness`` (each defaulted)."""
    unknown = sorted(set(values) - set(DEFAULT_MIXES))
    if unknown:
        raise InvalidInput(f"--for-capacity takes the mixes' value lists only (--write-ratios, --sizes, "
                           f"--randomness), not --{unknown[0].replace('_', '-')}")
    v = {k: list(values.get(k) or default) for k, default in DEFAULT_MIXES.items()}
    return [{"write_ratio": float(wr), "request_size": int(size), "randomness": float(rnd)}
            for wr in v["write_ratios"] for size in v["sizes"] for rnd in v["randomness"]]


def plan_for_capacity(mixes: Sequence[Mapping[str, Any]], ladder: Sequence[int] = LADDER,
                      fractions: Sequence[float] = FRACTIONS) -> CapacityPlan:
    """The sweep plan for ``mixes`` (mappings of a workload's mix fields, see the module docstring)."""
    if not mixes:
        raise InvalidInput("--for-capacity needs at least one workload mix")
    ladder = sorted({int(n) for n in ladder})
    if not ladder or ladder[0] < 1:
        raise InvalidInput("the ladder of jobs must be whole numbers from 1")
    if not fractions or not all(0 < f < 1.5 for f in fractions):
        raise InvalidInput("open-loop fractions must be between 0 and 1.5 of the capacity")
    base = [Workload(**{k: v for k, v in m.items() if k in MIX_FIELDS}, queue_depth=1, numjobs=1)
            for m in mixes]
    base = list(dict.fromkeys(base))
    points = [w.model_copy(update={"numjobs": n}) for w in base for n in ladder]
    notes = [f"{len(base)} mix(es) x {len(ladder)} loads ({', '.join(map(str, ladder))} psync jobs, "
             f"queue depth 1), then open-loop points at {', '.join(f'{f:g}' for f in fractions)} of each "
             "mix's capacity"]
    first = base[0]
    for factor in SIZE_FACTORS:
        if len(points) >= TRAIN_MIN_POINTS:
            break
        sizes = {f: int(getattr(first, f) * factor) for f in ("request_size", "read_size", "write_size")}
        if min(sizes.values()) < 512 or max(sizes.values()) > MAX_REQUEST_SIZE:
            continue
        points += [first.model_copy(update={**sizes, "numjobs": n}) for n in ladder]
        notes.append(f"{len(base) * len(ladder)} closed-loop points are under the {TRAIN_MIN_POINTS} a model "
                     f"needs: the first mix's ladder added at {factor:g}x its size")
    closed = Plan("for-capacity", tuple(dict.fromkeys(points)), settings={"ladder": ladder})
    return CapacityPlan(closed, base, ladder, tuple(float(f) for f in fractions), notes)


def rates_of(capacity: float, fractions: Sequence[float]) -> list[int]:
    """The offered IO/s of one mix's open-loop points: each fraction of ``capacity`` rounded, the
    sparse ones (under :data:`MIN_RATE`) left out, each rate once."""
    rates = {int(round(f * capacity)) for f in fractions}
    return sorted(r for r in rates if r >= MIN_RATE)


def mix_capacities(plan: CapacityPlan, measured: pd.DataFrame) -> list[float]:
    """The most IO/s each planned mix's closed-loop points measured."""
    closed = closed_rows(measured)
    return [mix_capacity(closed, w) for w in plan.mixes]


def open_loop_points(plan: CapacityPlan, measured: pd.DataFrame) -> list[tuple[Workload, int]]:
    """``(workload of the open-loop lanes, offered IO/s)`` per mix and fraction of its capacity."""
    out: list[tuple[Workload, int]] = []
    for w, capacity in zip(plan.mixes, mix_capacities(plan, measured), strict=True):
        lanes = w.model_copy(update={"numjobs": LANES})
        out += [(lanes, r) for r in rates_of(capacity, plan.fractions)]
    return out


def mix_text(mix: Mapping[str, Any]) -> str:
    """A mix as ``--workload`` takes it: ``write_ratio=0.3,request_size=16k,randomness=1`` (and any
    per-direction field that differs from the mix's own)."""
    from modeling.units import format_size

    parts = [f"write_ratio={float(mix['write_ratio']):g}",
             f"request_size={format_size(int(mix['request_size']))}",
             f"randomness={float(mix['randomness']):g}"]
    for f, same in (("read_size", "request_size"), ("write_size", "request_size"),
                    ("read_randomness", "randomness"), ("write_randomness", "randomness")):
        value = mix.get(f)
        if value is not None and not pd.isna(value) and float(value) != float(mix[same]):
            parts.append(f"{f}={format_size(int(value))}" if "size" in f else f"{f}={float(value):g}")
    return ",".join(parts)


def planned_mixes(sweep_info: Mapping[str, Any]) -> list[str]:
    """The mixes (as :func:`mix_text`) a ``--for-capacity`` sweep measured, from its stored info."""
    return [mix_text(m) for m in (sweep_info.get("for_capacity") or {}).get("mixes", [])]


def suggested_command(device: str, target: str | None, mixes: Sequence[Mapping[str, Any]]) -> str:
    """The ``sweep --for-capacity`` command that measures ``mixes`` on ``device``'s ``target``."""
    where = target or "TARGET"
    destroy = " --destroy-data" if where.startswith("/dev/") else ""
    shown = list(dict.fromkeys(mix_text(m) for m in mixes))
    return (f"ssdpredict sweep --device {device} --target {where}{destroy} --for-capacity "
            + " ".join(f'--workload "{m}"' for m in shown))
