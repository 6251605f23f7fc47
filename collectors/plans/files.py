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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling.errors import InvalidInput

KNOWN_KEYS = frozenset({"name", "kind", "seed", "n", "values", "bounds", "points"})


@dataclass(frozen=True)
class PlanFile:
    """A plan file's content, checked: :func:`collectors.plans.presets.build_plan` builds the plan."""

    path: Path
    name: str
    kind: str = "grid"
    seed: int | None = None
    n: int | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    bounds: Mapping[str, Any] | None = None
    points: tuple[Mapping[str, Any], ...] = ()


def read_plan_toml(path: Path) -> PlanFile:
    """Read and check a plan file.

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
    unknown = set(doc) - KNOWN_KEYS
    if unknown:
        raise InvalidInput(f"plan file {path}: unknown key(s) {sorted(unknown)}; known: {sorted(KNOWN_KEYS)}")
    points = tuple(doc.get("points") or ())
    kind = str(doc.get("kind", "grid"))
    if not points and (kind.endswith(".toml") or kind == "adaptive"):
        raise InvalidInput(f"plan file {path}: kind {kind!r} cannot be used in a plan file")
    return PlanFile(
        path=Path(path), name=str(doc.get("name") or Path(path).stem), kind=kind,
        seed=int(doc["seed"]) if "seed" in doc else None, n=doc.get("n"),
        values=dict(doc.get("values", {})), bounds=doc.get("bounds"), points=points,
    )
