"""Plan files in TOML: a preset with value lists or bounds, or explicit points.

Example::

    name = "my-grid"
    kind = "grid"          # quick, pts, nvmeof, grid, lhs or random
    seed = 7
    [values]
    write_ratios = [0, 0.5, 1]
    queue_depths = [1, 8, 32]
    sizes = ["4k", "64k"]
    randomness = [0, 1]
    numjobs = [1, 4]

or ``kind = "lhs"`` with ``n = 40`` and ``[bounds]`` (``queue_depth = [1, 64]``), or a
list of ``[[points]]`` tables holding workload fields.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from collectors.plans import DEFAULT_SEED, Plan, _workload, build_plan, shuffled
from modeling.errors import InvalidInput


def load_plan_toml(path: Path, *, values: Mapping[str, Sequence[Any]] | None = None,
                   seed: int | None = None, n: int | None = None) -> Plan:
    """Load a plan file; CLI value lists, seed and point count override the file's.

    Keys: ``kind`` (a preset, default ``grid``), ``seed``, ``n``, ``[values]`` (value lists
    such as ``sizes = ["4k", "64k"]``), ``[bounds]`` (``field = [low, high]`` for lhs and
    random), and ``[[points]]`` (explicit workloads; then ``kind`` is ignored).
    """
    try:
        doc = tomllib.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise InvalidInput(f"plan file {path} does not exist") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"plan file {path}: not valid TOML: {exc}") from exc
    known = {"name", "kind", "seed", "n", "values", "bounds", "points"}
    unknown = set(doc) - known
    if unknown:
        raise InvalidInput(f"plan file {path}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    s = int(seed if seed is not None else doc.get("seed", DEFAULT_SEED))
    name = str(doc.get("name") or Path(path).stem)
    if doc.get("points"):
        points = [_workload(**p) for p in doc["points"]]
        plan = shuffled(name, points, s, file=str(path))
    else:
        merged = {**doc.get("values", {}), **(values or {})}
        kind = str(doc.get("kind", "grid"))
        if kind.endswith(".toml") or kind == "adaptive":
            raise InvalidInput(f"plan file {path}: kind {kind!r} cannot be used in a plan file")
        plan = build_plan(kind, values=merged, bounds=doc.get("bounds"), n=n or doc.get("n"), seed=s)
        plan = Plan(name, plan.points, plan.seed, {**plan.settings, "file": str(path), "kind": kind})
    return plan
