"""Sweep plans: which workloads to measure, in which (randomised) order.

A :class:`Plan` is an ordered list of workloads plus the seed that shuffled it.  Its
:attr:`Plan.key` hashes the points in order, so the same plan always has the same key and
an interrupted sweep of it can be found and resumed.  Point order is randomised so that
drift (heat, garbage collection) does not line up with one workload dimension.

Presets: ``quick`` (48 points for ``make run``: sizes 4 KiB-1 MiB, numjobs 1 and 4),
``pts`` (the SNIA PTS IOPS matrix, 7 mixes x 8 block sizes), ``nvmeof`` (includes
numjobs), a full ``grid`` over value lists, ``lhs`` (Latin hypercube,
``scipy.stats.qmc``), ``random`` and ``adaptive`` (points where the current model is
least certain).  TOML plan files
(:mod:`collectors.plans.files`, read there and built here) describe any of them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from pydantic import ValidationError

from collectors.plans.files import PlanFile, read_plan_toml
from modeling.errors import InvalidInput
from modeling.workload import KIB, MIB, Workload, parse_size

DEFAULT_SEED: Final = 20100817
PRESETS: Final = ("quick", "pts", "nvmeof", "pmem", "grid", "lhs", "random", "adaptive")

# CLI/TOML value-list names -> workload fields.
VALUE_LISTS: Final[Mapping[str, str]] = {
    "write_ratios": "write_ratio",
    "queue_depths": "queue_depth",
    "sizes": "request_size",
    "randomness": "randomness",
    "numjobs": "numjobs",
}
DEFAULT_VALUES: Final[Mapping[str, tuple[Any, ...]]] = {
    "write_ratios": (0.0, 0.5, 1.0),
    "queue_depths": (1, 16),
    "sizes": (4 * KIB, 128 * KIB),
    "randomness": (0.0, 1.0),
    "numjobs": (1,),
}
DEFAULT_BOUNDS: Final[Mapping[str, tuple[float, float]]] = {
    "write_ratio": (0.0, 1.0),
    "queue_depth": (1, 64),
    "request_size": (4 * KIB, 1 * MIB),
    "randomness": (0.0, 1.0),
    "numjobs": (1, 1),
}
_LOG_FIELDS: Final = frozenset({"queue_depth", "request_size", "numjobs"})
PTS_WRITE_RATIOS: Final = (0.0, 0.05, 0.35, 0.5, 0.65, 0.95, 1.0)
PTS_SIZES: Final = (512, 4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 1024 * KIB)


@dataclass(frozen=True)
class Plan:
    """An ordered list of workloads to measure, with its name and shuffle seed."""

    name: str
    points: tuple[Workload, ...]
    seed: int = DEFAULT_SEED
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Stable hash of the points in order (name and settings excluded)."""
        rows = [w.as_row() for w in self.points]
        digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
        return digest[:20]

    def head(self, n: int | None) -> Plan:
        """The first ``n`` points of the plan (all when ``n`` is None)."""
        if n is None or n >= len(self.points):
            return self
        if n < 1:
            raise InvalidInput("--points must be at least 1")
        return Plan(self.name, self.points[:n], self.seed, {**self.settings, "head": n})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, stored with the sweep."""
        return {
            "name": self.name,
            "seed": self.seed,
            "key": self.key,
            "settings": self.settings,
            "points": [w.as_row() for w in self.points],
        }

    def __len__(self) -> int:
        return len(self.points)


def plan_point(**values: Any) -> Workload:
    """One plan point from workload fields; a bad value names the point and the field."""
    try:
        return Workload(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        raise InvalidInput(f"invalid plan point {values}: {loc}: {err['msg']}") from exc


def shuffled(name: str, points: Sequence[Workload], seed: int, **settings: Any) -> Plan:
    """A plan of ``points`` (duplicates dropped) in an order randomised by ``seed``."""
    unique = list(dict.fromkeys(points))
    if not unique:
        raise InvalidInput(f"plan {name!r} has no points")
    order = np.random.default_rng(seed).permutation(len(unique))
    return Plan(name, tuple(unique[i] for i in order), seed, dict(settings))


def _values(overrides: Mapping[str, Sequence[Any]] | None, name: str) -> tuple[Any, ...]:
    values = (overrides or {}).get(name)
    return tuple(values) if values else DEFAULT_VALUES[name]


def grid_points(values: Mapping[str, Sequence[Any]] | None = None) -> list[Workload]:
    """Every combination of the value lists (defaults for the lists not given)."""
    unknown = set(values or {}) - set(VALUE_LISTS)
    if unknown:
        raise InvalidInput(f"unknown value list(s) {sorted(unknown)}; known: {sorted(VALUE_LISTS)}")
    lists = [_values(values, name) for name in VALUE_LISTS]
    return [
        plan_point(**dict(zip(VALUE_LISTS.values(), combo, strict=True)))
        for combo in itertools.product(*lists)
    ]


def grid_plan(values: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED) -> Plan:
    """The full grid over the value lists, shuffled."""
    return shuffled("grid", grid_points(values), seed, values=_jsonable(values))


def _bounds(bounds: Mapping[str, Sequence[Any]] | None) -> dict[str, tuple[float, float]]:
    merged: dict[str, tuple[float, float]] = dict(DEFAULT_BOUNDS)
    for name, pair in (bounds or {}).items():
        if name not in DEFAULT_BOUNDS:
            raise InvalidInput(f"unknown bound {name!r}; known: {sorted(DEFAULT_BOUNDS)}")
        if len(pair) != 2:
            raise InvalidInput(f"bound {name!r} needs [low, high]")
        low, high = (float(parse_size(v)) if name == "request_size" else float(v) for v in pair)
        if low > high:
            raise InvalidInput(f"bound {name!r}: low {low} is above high {high}")
        merged[name] = (low, high)
    return merged


def _scale(unit: np.ndarray, bounds: Mapping[str, tuple[float, float]]) -> list[Workload]:
    """Map unit-cube samples to workloads (log scale for depth, size and jobs)."""
    points = []
    for row in unit:
        values: dict[str, Any] = {}
        for u, (name, (low, high)) in zip(row, bounds.items(), strict=True):
            if name in _LOG_FIELDS:
                value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
            else:
                value = low + u * (high - low)
            if name == "request_size":
                # whole 4 KiB multiples: O_DIRECT on 4K-sector disks needs that alignment.
                values[name] = _round_size(value, low, high)
            elif name in ("queue_depth", "numjobs"):
                values[name] = int(min(max(round(value), low), high))
            else:
                values[name] = round(value, 2)  # fio takes whole percentages
        points.append(plan_point(**values))
    return points


def _round_size(value: float, low: float, high: float) -> int:
    # whole 4 KiB multiples where the bounds allow: O_DIRECT on 4K-sector disks needs them.
    step = 4096 if math.floor(high / 4096) * 4096 >= max(low, 4096) else 512
    lo, hi = math.ceil(low / step) * step, math.floor(high / step) * step
    return int(min(max(round(value / step) * step, lo), hi))


def lhs_points(n: int, bounds: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED
               ) -> list[Workload]:
    """``n`` Latin-hypercube samples within ``bounds``."""
    if n < 1:
        raise InvalidInput("the number of points must be at least 1")
    from scipy.stats import qmc  # heavy import (~1 s), only needed for sampled plans

    b = _bounds(bounds)
    sampler = qmc.LatinHypercube(d=len(b), seed=np.random.default_rng(seed))
    return _scale(sampler.random(n), b)


def lhs_plan(n: int, bounds: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED
             ) -> Plan:
    """A Latin-hypercube plan of ``n`` points within ``bounds``."""
    return shuffled("lhs", lhs_points(n, bounds, seed=seed), seed, n=n, bounds=_jsonable(bounds))


def random_plan(n: int, bounds: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED
                ) -> Plan:
    """``n`` uniformly random points within ``bounds``."""
    if n < 1:
        raise InvalidInput("the number of points must be at least 1")
    b = _bounds(bounds)
    unit = np.random.default_rng(seed).random((n, len(b)))
    return shuffled("random", _scale(unit, b), seed, n=n, bounds=_jsonable(bounds))


QUICK_BOUNDS: Final[Mapping[str, tuple[float, float]]] = {
    "write_ratio": (0.0, 1.0),
    "queue_depth": (1, 32),
    "request_size": (4 * KIB, 1 * MIB),
    "randomness": (0.0, 1.0),
    "numjobs": (1, 4),
}
"""The box the quick plan covers: what people ask about first."""
QUICK_INTERIOR: Final = 32
"""Space-filling points of the quick plan, beside its 16 corners (48 points, about a minute)."""


def half_fraction_corners(d: int) -> np.ndarray:
    """The 2^(d-1) corners of the unit cube whose signs multiply to +1 (a resolution-d design).

    Every main effect and every two-factor interaction stays separable, with half the
    runs of the full corner grid.
    """
    signs = np.array(list(itertools.product((-1, 1), repeat=d)))
    return (signs[signs.prod(axis=1) == 1] + 1) / 2


def quick_plan(values: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED) -> Plan:
    """48 points for ``make run``: sizes 4 KiB-1 MiB, queue depth 1-32, numjobs 1 and 4, any mix.

    16 corners (a half fraction of the 32 corners of the box, so that each dimension's
    extremes are measured and every question inside the box is an interpolation) and 32
    interior points of a Latin hypercube optimised for space filling (centred
    discrepancy), their sizes rounded to powers of two.  Numjobs is two-level: the
    hypercube's fifth column split at one half gives exactly as many points at 1 job as
    at 4.  Value lists (``sizes = ["4k", "64k"]``...) set the box to their smallest and
    largest values.
    """
    bounds: dict[str, tuple[float, float]] = dict(QUICK_BOUNDS)
    bounds.update(_bounds_from_values({k: v for k, v in (values or {}).items() if v}))
    from scipy.stats import qmc  # heavy import (~1 s), only needed for sampled plans

    sampler = qmc.LatinHypercube(d=len(bounds), optimization="random-cd", rng=np.random.default_rng(seed))
    interior = sampler.random(QUICK_INTERIOR)
    names = list(bounds)
    nj = names.index("numjobs")
    interior[:, nj] = (interior[:, nj] >= 0.5).astype(float)
    # sizes at powers of two from the smallest: the sizes applications issue and people ask about
    low, high = bounds["request_size"]
    octaves = max(round(math.log2(high / low)), 1)
    size = names.index("request_size")
    interior[:, size] = np.round(interior[:, size] * octaves) / octaves
    unit = np.vstack([half_fraction_corners(len(bounds)), interior])
    return shuffled("quick", _scale(unit, bounds), seed, values=_jsonable(values))


def pts_plan(values: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED) -> Plan:
    """The SNIA PTS IOPS matrix: 7 read/write mixes x 8 block sizes, random, QD 32."""
    values = dict(values or {})
    values.setdefault("write_ratios", PTS_WRITE_RATIOS)
    values.setdefault("sizes", PTS_SIZES)
    values.setdefault("randomness", (1.0,))
    values.setdefault("queue_depths", (32,))
    return shuffled("pts", grid_points(values), seed, values=_jsonable(values))


def nvmeof_plan(values: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED) -> Plan:
    """The default NVMe-oF plan: submission parallelism (numjobs) is a dimension."""
    values = dict(values or {})
    values.setdefault("numjobs", (1, 4, 16))
    values.setdefault("queue_depths", (1, 32))
    return shuffled("nvmeof", grid_points(values), seed, values=_jsonable(values))


PMEM_SIZES: Final = (64, 256, 4 * KIB, 64 * KIB)
"""Persistent memory is written in cache lines: the pmem plan starts at 64 bytes."""


def pmem_plan(values: Mapping[str, Sequence[Any]] | None = None, *, seed: int = DEFAULT_SEED) -> Plan:
    """The default persistent-memory plan: synchronous engines, so jobs carry the parallelism
    (no queue depth)."""
    values = dict(values or {})
    if any(int(q) != 1 for q in values.get("queue_depths", (1,))):
        raise InvalidInput("the pmem engines (libpmem, dev-dax) are synchronous: no queue depth above 1; "
                           "use --numjobs for parallelism")
    values["queue_depths"] = (1,)
    values.setdefault("sizes", PMEM_SIZES)
    values.setdefault("numjobs", (1, 2, 4))
    return shuffled("pmem", grid_points(values), seed, values=_jsonable(values))


def adaptive_plan(measurements: Any, budget: int, *, bounds: Mapping[str, Sequence[Any]] | None = None,
                  seed: int = DEFAULT_SEED, metric: str = "iops", candidates: int = 2000,
                  reference_model: Any = None) -> Plan:
    """``budget`` points where the device's current model is least certain.

    With ``reference_model`` (a reference device's ``DeviceModel``) the points are those
    that best calibrate a transfer from it instead (``propose_transfer_points``).
    """
    if budget < 1:
        raise InvalidInput("--budget must be at least 1")
    pool = lhs_points(candidates, bounds, seed=seed)
    if reference_model is not None:
        from modeling.training.adaptive import propose_transfer_points
        from modeling.workload import WORKLOAD_FIELDS

        w = np.array([[float(getattr(p, f)) for f in WORKLOAD_FIELDS] for p in pool])
        pred = reference_model.predict_matrix(w, metrics=[metric])[metric][0]
        chosen = propose_transfer_points(np.log(np.maximum(pred, 1e-12)), pool, budget)
        return shuffled("adaptive", chosen, seed, budget=budget, metric=metric, bounds=_jsonable(bounds),
                        reference={"device": reference_model.device, "version": reference_model.version})
    if measurements is None or len(measurements) == 0:
        # nothing measured yet: no model to be uncertain about, so spread points evenly.
        chosen = lhs_points(budget, bounds, seed=seed)
    else:
        from modeling.training.adaptive import propose_points  # heavy (scikit-learn), only for adaptive plans

        chosen = list(propose_points(measurements, pool, budget, metric=metric))
    return shuffled("adaptive", chosen, seed, budget=budget, metric=metric, bounds=_jsonable(bounds))


def build_plan(kind: str, *, values: Mapping[str, Sequence[Any]] | None = None,
               bounds: Mapping[str, Sequence[Any]] | None = None, n: int | None = None,
               seed: int | None = None, measurements: Any = None, reference_model: Any = None) -> Plan:
    """Build a preset plan by name, or load a ``.toml`` plan file (``kind`` is its path).

    ``reference_model`` (adaptive plans only) picks the points that calibrate a transfer.
    """
    if reference_model is not None and kind != "adaptive":
        raise InvalidInput("--reference needs --plan adaptive")
    s = DEFAULT_SEED if seed is None else seed
    values = {k: v for k, v in (values or {}).items() if v}
    if kind.endswith(".toml"):
        return load_plan_toml(Path(kind), values=values, seed=seed, n=n)
    if kind == "quick":
        return quick_plan(values, seed=s)
    if kind == "pts":
        return pts_plan(values, seed=s)
    if kind == "nvmeof":
        return nvmeof_plan(values, seed=s)
    if kind == "pmem":
        return pmem_plan(values, seed=s)
    if kind == "grid":
        return grid_plan(values, seed=s)
    bounds = {**_bounds_from_values(values), **(bounds or {})}
    if kind == "lhs":
        return lhs_plan(n or 40, bounds, seed=s)
    if kind == "random":
        return random_plan(n or 40, bounds, seed=s)
    if kind == "adaptive":
        return adaptive_plan(measurements, n or 20, bounds=bounds, seed=s, reference_model=reference_model)
    raise InvalidInput(f"unknown plan {kind!r}: use one of {', '.join(PRESETS)} or a .toml file")


def load_plan_toml(path: Path, *, values: Mapping[str, Sequence[Any]] | None = None,
                   seed: int | None = None, n: int | None = None) -> Plan:
    """Build the plan a TOML plan file describes; CLI value lists, seed and point count win."""
    return plan_from_file(read_plan_toml(path), values=values, seed=seed, n=n)


def plan_from_file(spec: PlanFile, *, values: Mapping[str, Sequence[Any]] | None = None,
                   seed: int | None = None, n: int | None = None) -> Plan:
    """The plan of a read plan file: its explicit points, or its preset with its lists and bounds."""
    s = seed if seed is not None else (spec.seed if spec.seed is not None else DEFAULT_SEED)
    if spec.points:
        return shuffled(spec.name, [plan_point(**p) for p in spec.points], s, file=str(spec.path))
    merged = {**spec.values, **(values or {})}
    plan = build_plan(spec.kind, values=merged, bounds=spec.bounds, n=n or spec.n, seed=s)
    settings = {**plan.settings, "file": str(spec.path), "kind": spec.kind}
    return Plan(spec.name, plan.points, plan.seed, settings)


def _bounds_from_values(values: Mapping[str, Sequence[Any]]) -> dict[str, tuple[Any, Any]]:
    """Value-list overrides bound the sampled plans by their smallest and largest value."""
    out: dict[str, tuple[Any, Any]] = {}
    for name, vals in values.items():
        field_name = VALUE_LISTS.get(name)
        if field_name is None:
            raise InvalidInput(f"unknown value list {name!r}")
        nums = [parse_size(v) if field_name == "request_size" else float(v) for v in vals]
        out[field_name] = (min(nums), max(nums))
    return out


def _jsonable(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
