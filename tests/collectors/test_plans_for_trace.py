"""The sweep designed from traces: real trace files characterised, the plan's mixes, loads and rates."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.plans.for_trace import (
    FRACTIONS, NEAR_CAPACITY, OVERLOAD, TRAIN_MIN_POINTS, capacity_points, open_loop_points, plan_for_traces,
)
from modeling.training.fit import MIN_ROWS
from modeling.errors import InvalidInput, NoData
from tests.conftest import TEST_DATA, data_path
from traces.characterize import characterize

TRACES = TEST_DATA / "traces"


def _char(name: str):  # type: ignore[no-untyped-def]
    return characterize(str(data_path(TRACES / name)))


def test_plan_covers_the_traces_mixes_in_psync_lanes_within_the_budget() -> None:
    wsrch, msr = _char("wsrch-small.trace"), _char("msr-sample.csv")
    plan = plan_for_traces([wsrch, msr], budget=30, block_size=4096)
    assert plan.lanes == 16 and plan.ladder == [1, 2, 4, 8, 16]
    assert len(plan.closed) <= 30 and len(plan.closed) == len(plan.mixes) * len(plan.ladder)
    assert all(w.queue_depth == 1 and w.numjobs in plan.ladder for w in plan.closed.points)
    # every size is a whole number of the target's blocks (msr's 8 KiB writes stay, 24 KiB reads stay)
    assert all(w.read_size % 4096 == 0 and w.write_size % 4096 == 0 for w in plan.closed.points)
    # both traces' kinds of mix are there: wsrch's reads and msr's writes
    assert min(m.workload.write_ratio for m in plan.mixes) < 0.05
    assert max(m.workload.write_ratio for m in plan.mixes) > 0.5
    assert sum(m.share for m in plan.mixes) == pytest.approx(1.0)
    # the traces' own rates: wsrch offers 200-500 IO/s a window, msr 1-3
    read_rates = [r for m in plan.mixes if m.workload.write_ratio < 0.05 for r in m.own_rates]
    assert any(200 < r < 700 for r in read_rates) and all(r < 700 for r in read_rates)
    assert plan.seconds(1000) > len(plan.closed)


def test_fewer_distinct_mixes_than_the_budget_plans_each_once() -> None:
    tpcc = _char("tpcc-small.trace")  # one window
    plan = plan_for_traces([tpcc], budget=100, block_size=512)
    assert len(plan.mixes) == 1
    w = plan.mixes[0].workload
    assert 0.3 < w.write_ratio < 0.45 and w.request_size == 8192
    # one ladder is 5 points, under the 8 a model trains on: the ladder at twice the sizes is added
    assert TRAIN_MIN_POINTS == MIN_ROWS
    assert len(plan.closed) == 10 and sorted({p.request_size for p in plan.closed.points}) == [8192, 16384]
    assert any("at 2x its sizes" in n for n in plan.notes)
    # ... within the budget only: the user's 5 points stay 5
    assert len(plan_for_traces([tpcc], budget=9, block_size=512).closed) == 5


def test_open_loop_rates_are_own_rates_and_fractions_of_measured_capacity() -> None:
    plan = plan_for_traces([_char("tpcc-small.trace")], budget=5, block_size=512)
    w = plan.mixes[0].workload
    rows = [{**w.model_copy(update={"numjobs": n}).as_row(), "iops": 1000.0 * n} for n in plan.ladder]
    points = open_loop_points(plan, pd.DataFrame(rows))
    rates = sorted(r for _, r in points)
    capacity = 16_000
    assert set(rates) >= {round(f * capacity) for f in FRACTIONS}
    assert round(plan.mixes[0].own_rates[0]) in rates
    assert all(p.numjobs == plan.lanes and p.queue_depth == 1 for p, _ in points)
    with pytest.raises(NoData):
        open_loop_points(plan, pd.DataFrame([{**rows[0], "write_ratio": 1.0}]))


def test_bad_budget_and_block_size_are_one_line_errors() -> None:
    ch = _char("tpcc-small.trace")
    with pytest.raises(InvalidInput, match="under one mix's ladder"):
        plan_for_traces([ch], budget=3)
    with pytest.raises(InvalidInput, match="block size"):
        plan_for_traces([ch], block_size=1000)
    with pytest.raises(InvalidInput):
        plan_for_traces([])


def test_only_mixes_whose_traces_come_near_capacity_get_a_replay_capacity_point() -> None:
    plan = plan_for_traces([_char("tpcc-small.trace")], budget=5, block_size=512)
    own = max(plan.mixes[0].own_rates)  # tpcc's one window: 51,280 IO/s
    w = plan.mixes[0].workload

    def rows(capacity: float) -> pd.DataFrame:
        return pd.DataFrame([{**w.model_copy(update={"numjobs": n}).as_row(), "iops": capacity * n / 16}
                             for n in plan.ladder])

    near = capacity_points(plan, rows(own / NEAR_CAPACITY * 0.9))
    assert [(p.numjobs, r) for p, r in near] == [(16, round(OVERLOAD * own / NEAR_CAPACITY * 0.9))]
    assert capacity_points(plan, rows(own / NEAR_CAPACITY * 1.1)) == []


class _Char:
    """A characterised trace built from its windows (what the plan reads of one)."""

    def __init__(self, windows: pd.DataFrame) -> None:
        self.windows, self.summary = windows, {}


def test_mixes_apart_by_a_hair_of_randomness_are_one_mix() -> None:
    n = 40
    win = pd.DataFrame({"write_ratio": 0.0, "request_size": 1 << 20, "read_size": 1 << 20,
                        "write_size": 1 << 20, "requests": 1000, "iops": 2000.0, "queue_depth": 2.0,
                        # random offsets: now and then a window reads a few sequential ones
                        "randomness": [1.0 if i % 3 else 0.96 for i in range(n)]})
    plan = plan_for_traces([_Char(win)], budget=48, block_size=4096)
    assert len(plan.mixes) == 1 and plan.mixes[0].workload.randomness == 1.0
    assert len(plan.closed) == 2 * len(plan.ladder)  # one mix, and its ladder at twice the size


def test_the_closed_loop_key_holds_what_the_caller_measures_differently(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from collectors.sweep.run import sweep_key
    from collectors.sweep.settings import SweepSettings

    plan = plan_for_traces([_char("tpcc-small.trace")], budget=5, block_size=512).closed
    settings = SweepSettings(target=str(tmp_path / "t.img"))
    assert sweep_key("d", plan, settings) == sweep_key("d", plan, settings, None)
    assert sweep_key("d", plan, settings, {"priority": "normal"}) != sweep_key("d", plan, settings,
                                                                              {"priority": "real-time"})
