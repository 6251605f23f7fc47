"""Plans: preset sizes, determinism, TOML files, overrides, sampled plans' bounds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collectors.plans.presets import load_plan_toml
from collectors.plans.presets import (
    PTS_SIZES,
    PTS_WRITE_RATIOS,
    adaptive_plan,
    build_plan,
    grid_plan,
    lhs_plan,
    pts_plan,
    quick_plan,
    random_plan,
)
from modeling.errors import InvalidInput
from modeling.workload import MIB
from tests.conftest import REPO


def _key(w: object) -> tuple:
    return tuple(w.as_row().values())  # type: ignore[attr-defined]


def test_quick_plan_fits_make_run() -> None:
    plan = quick_plan()
    assert 36 <= len(plan) <= 48
    assert len({_key(w) for w in plan.points}) == len(plan)
    for field in ("write_ratio", "queue_depth", "request_size", "randomness"):
        assert len({getattr(w, field) for w in plan.points}) >= 2, field  # every dimension varies
    # 1 s runtime + ~0.5 s fio overhead per point stays within about a minute and a quarter
    assert len(plan) * 1.5 <= 75


def test_quick_plan_covers_what_people_ask_first() -> None:
    points = quick_plan().points
    # every size from 4 KiB to 1 MiB by powers of two, each at 1 and at 4 jobs somewhere
    sizes = {w.request_size for w in points}
    assert sizes == {4096 * 2**k for k in range(9)}
    assert {(w.request_size, w.numjobs) for w in points} >= {(4096, 1), (4096, 4), (MIB, 1), (MIB, 4)}
    jobs = [w.numjobs for w in points]
    assert set(jobs) == {1, 4} and jobs.count(1) == jobs.count(4)
    assert {w.queue_depth for w in points} >= {1, 32} and max(w.queue_depth for w in points) == 32
    # the corners of the box are measured, so a question inside it is never an extrapolation
    for field in ("write_ratio", "randomness"):
        assert {min(getattr(w, field) for w in points), max(getattr(w, field) for w in points)} == {0, 1}
    # a space-filling interior: mixes between the corners at many sizes
    assert len({(w.request_size, round(w.write_ratio, 1)) for w in points if 0 < w.write_ratio < 1}) >= 20


def test_quick_plan_value_lists_set_its_box() -> None:
    points = quick_plan({"sizes": ["4k", "64k"], "numjobs": [1]}).points
    assert {w.request_size for w in points} <= {4096 * 2**k for k in range(5)}
    assert {w.numjobs for w in points} == {1}


def test_pts_matrix_is_7_mixes_by_8_sizes() -> None:
    plan = pts_plan()
    assert len(plan) == 56
    assert {w.write_ratio for w in plan.points} == set(PTS_WRITE_RATIOS)
    assert {w.request_size for w in plan.points} == set(PTS_SIZES)
    assert {w.randomness for w in plan.points} == {1.0}


def test_order_is_random_but_deterministic_for_a_seed() -> None:
    a, b, c = pts_plan(seed=7), pts_plan(seed=7), pts_plan(seed=8)
    assert a.points == b.points and a.key == b.key
    assert a.points != c.points and a.key != c.key
    assert sorted(map(_key, a.points)) == sorted(map(_key, c.points))
    sizes = [w.request_size for w in a.points]
    assert sizes != sorted(sizes) and sizes != sorted(sizes, reverse=True)
    assert a.to_dict()["seed"] == 7


def test_grid_overrides() -> None:
    plan = grid_plan({"write_ratios": [0, 1], "queue_depths": [1, 8, 32], "sizes": ["4k"],
                      "randomness": [1], "numjobs": [1, 4]})
    assert len(plan) == 2 * 3 * 1 * 1 * 2
    assert {w.numjobs for w in plan.points} == {1, 4}
    with pytest.raises(InvalidInput, match="unknown value list"):
        grid_plan({"colours": [1]})
    with pytest.raises(InvalidInput, match="request_size"):
        grid_plan({"sizes": [100]})


def test_nvmeof_default_plan_includes_numjobs() -> None:
    plan = build_plan("nvmeof")
    assert len({w.numjobs for w in plan.points}) >= 3


@pytest.mark.parametrize("make", [lhs_plan, random_plan])
def test_sampled_plans_stay_in_bounds(make) -> None:  # type: ignore[no-untyped-def]
    bounds = {"queue_depth": (2, 16), "request_size": ("8k", "256k"), "write_ratio": (0.2, 0.8),
              "numjobs": (1, 4)}
    plan = make(60, bounds, seed=3)
    assert len(plan) == 60
    for w in plan.points:
        assert 2 <= w.queue_depth <= 16 and 8192 <= w.request_size <= 262144
        assert w.request_size % 4096 == 0
        assert 0.2 <= w.write_ratio <= 0.8 and 1 <= w.numjobs <= 4
        assert round(w.write_ratio * 100) == pytest.approx(w.write_ratio * 100)
    assert make(60, bounds, seed=3).points == plan.points


def test_lhs_stratifies_each_dimension() -> None:
    plan = lhs_plan(10, {"write_ratio": (0, 1)}, seed=5)
    # one sample per tenth of the range: the Latin-hypercube property
    assert sorted(min(int(w.write_ratio * 10), 9) for w in plan.points) == list(range(10))


def test_toml_plan_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\nkind = "grid"\nseed = 11\n[values]\nwrite_ratios = [0, 0.5]\n'
        'queue_depths = [1, 4]\nsizes = ["4k", "64k"]\nrandomness = [1]\n'
    )
    plan = load_plan_toml(path)
    assert plan.name == "mine" and plan.seed == 11 and len(plan) == 8
    overridden = build_plan(str(path), values={"queue_depths": [32]})
    assert len(overridden) == 4 and {w.queue_depth for w in overridden.points} == {32}
    explicit = tmp_path / "points.toml"
    explicit.write_text(
        '[[points]]\nwrite_ratio = 0\nqueue_depth = 1\nrequest_size = "4k"\nrandomness = 1\n'
        '[[points]]\nwrite_ratio = 1\nqueue_depth = 8\nrequest_size = "1m"\nrandomness = 0\nnumjobs = 2\n'
    )
    assert len(load_plan_toml(explicit)) == 2


@pytest.mark.parametrize(
    ("text", "match"),
    [("kind = ", "TOML"), ('colour = "red"', "unknown key"), ('kind = "nope"', "unknown plan"),
     ("[[points]]\nwrite_ratio = 2\nqueue_depth = 1\nrequest_size = 4096\nrandomness = 0\n", "write_ratio")],
)
def test_bad_toml_plans(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=match):
        load_plan_toml(path)


def test_head_and_unknown_plan() -> None:
    plan = quick_plan()
    assert plan.head(3).points == plan.points[:3] and plan.head(3).key != plan.key
    with pytest.raises(InvalidInput, match="unknown plan"):
        build_plan("everything")


def test_adaptive_without_measurements_spreads_points() -> None:
    plan = adaptive_plan(pd.DataFrame(), 12, seed=2)
    assert len(plan) == 12 and plan.name == "adaptive"


EXAMPLE_PLAN = REPO / "examples" / "plan.toml"


def test_the_readme_example_plan_loads() -> None:
    plan = load_plan_toml(EXAMPLE_PLAN)
    assert plan.name == "database-grid" and len(plan) == 4 * 4 * 3 * 2 * 2
    assert {w.numjobs for w in plan.points} == {1, 4}
    # the user docs show the example plan in use (docs/measure.md)
    assert "--plan examples/plan.toml" in (REPO / "docs" / "measure.md").read_text()


def test_the_example_plans_commented_alternatives_load(tmp_path: Path) -> None:
    # the two commented variants (a Latin hypercube, explicit points) are valid plans too
    text = EXAMPLE_PLAN.read_text()
    lhs, points = text.split("# Or name the workloads")
    variants = {}
    for name, part in (("lhs", lhs.split("instead")[1]), ("points", points)):
        body = [line[4:] for line in part.splitlines() if line.startswith("#   ")]
        variants[name] = tmp_path / f"{name}.toml"
        variants[name].write_text("\n".join(body) + "\n")
    sampled = load_plan_toml(variants["lhs"])
    assert len(sampled) == 80 and max(w.numjobs for w in sampled.points) <= 8
    (only,) = load_plan_toml(variants["points"]).points
    assert only.request_size == 16384 and only.queue_depth == 8
