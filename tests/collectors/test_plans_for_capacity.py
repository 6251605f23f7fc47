"""``sweep --for-capacity``'s plan: the mixes' ladders, the open-loop fractions chosen from each
mix's capacity, the time estimate, and the command ``capacity`` suggests."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.plans.for_capacity import (
    FRACTIONS,
    grid_mixes,
    mix_text,
    open_loop_points,
    plan_for_capacity,
    rates_of,
    suggested_command,
)
from modeling.errors import InvalidInput, NoData

READS = {"write_ratio": 0.0, "request_size": 16384, "randomness": 1.0}
MIXED = {"write_ratio": 0.4, "request_size": 16384, "randomness": 1.0}


def test_each_mix_gets_the_ladder_and_one_mix_alone_more_sizes() -> None:
    plan = plan_for_capacity([READS, MIXED, READS])  # a mix given twice is measured once
    assert [w.numjobs for w in plan.closed.points] == [1, 2, 4, 8, 16] * 2
    assert all(w.queue_depth == 1 for w in plan.closed.points) and len(plan.mixes) == 2
    one = plan_for_capacity([READS])  # 5 points are under the 8 a model needs: 2x the size added
    assert sorted({w.request_size for w in one.closed.points}) == [16384, 32768]
    assert len(one.closed) == 10 and "2x its size" in one.notes[-1] and len(one.mixes) == 1
    with pytest.raises(InvalidInput):
        plan_for_capacity([])
    with pytest.raises(InvalidInput):
        plan_for_capacity([READS], fractions=(0.5, 2.0))


def test_the_fractions_come_from_the_capacity() -> None:
    # a 200 IO/s device: 0.1 of it (20 IO/s) is too sparse; every other fraction its own rate
    assert rates_of(200.0, FRACTIONS) == [60, 120, 140, 160, 170, 180, 190, 240]
    assert rates_of(10_000.0, FRACTIONS)[0] == 1000 and len(rates_of(10_000.0, FRACTIONS)) == 9
    assert rates_of(30.0, (0.9, 0.95)) == []
    plan = plan_for_capacity([READS, MIXED])
    closed = pd.DataFrame([{**READS, "queue_depth": 1, "numjobs": n, "iops": 50.0 * n} for n in (1, 4)]
                          + [{**MIXED, "queue_depth": 1, "numjobs": 1, "iops": 1000.0}])
    points = open_loop_points(plan, closed)
    assert [r for w, r in points if w.write_ratio == 0] == [60, 120, 140, 160, 170, 180, 190, 240]
    assert [r for w, r in points if w.write_ratio > 0][0] == 100 and all(w.numjobs == 16 for w, _ in points)
    # the time: sparse points run long enough for their requests (at most 10 s)
    slow, fast = plan.open_loop_seconds([200.0, 10_000.0], 1000), plan.open_loop_seconds([1e4, 1e4], 1000)
    assert slow > fast > 0 and plan.seconds(1000) > 0
    with pytest.raises(NoData):
        open_loop_points(plan, closed[closed["write_ratio"] == 0])


def test_grid_mixes_and_the_suggested_command() -> None:
    assert len(grid_mixes({})) == 3 and len(grid_mixes({"sizes": [4096, 65536], "write_ratios": [0.0]})) == 2
    with pytest.raises(InvalidInput):
        grid_mixes({"queue_depths": [1]})
    assert mix_text({**READS, "read_size": 16384, "write_size": 4096}) == (
        "write_ratio=0,request_size=16k,randomness=1,write_size=4k")
    cmd = suggested_command("ref", "/dev/zram1", [MIXED, MIXED])
    assert cmd == ('ssdpredict sweep --device ref --target /dev/zram1 --destroy-data --for-capacity '
                   '--workload "write_ratio=0.4,request_size=16k,randomness=1"')
    assert "--target TARGET --for-capacity" in suggested_command("ref", None, [READS])
