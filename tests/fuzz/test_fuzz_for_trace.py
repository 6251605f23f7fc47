"""Fuzzing ``sweep --for-trace``'s plan (issue 25, fuzz): traces of odd sizes, rates and mixes,
odd budgets and block sizes.  Every input gives a plan whose points are valid workloads (and
whose open-loop points, from closed-loop capacities, are valid too), or a domain error; never
another exception.  The traces are generic CSV files characterised for real (the CLI's path:
characterize, then plan_for_traces)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.plans.for_trace import open_loop_points, plan_for_traces
from modeling.errors import SsdPredictError
from modeling.workload import MAX_REQUEST_SIZE, Workload
from tests.fuzz.conftest import FUZZ
from traces.characterize import characterize

pytestmark = pytest.mark.slow  # run by `make test-slow` (and CI), not by `make test`

_DIR = Path(tempfile.mkdtemp(prefix="ssdpredict-fuzz-for-trace-"))

SIZES = st.one_of(
    st.sampled_from([1, 7, 511, 512, 513, 4096, 4097, 65536, MAX_REQUEST_SIZE, MAX_REQUEST_SIZE + 1, 2**31,
                     2**40]),
    st.integers(1, 2**21),
)
GAPS = st.one_of(  # seconds between requests: bursts, steady rates, long silences
    st.sampled_from([0.0, 1e-9, 1e-6, 1e-3, 0.5, 3.0, 1e4]),
    st.floats(0, 10, allow_nan=False),
)
OPS = st.sampled_from(["read", "write", "R", "W"])


@st.composite
def trace(draw: st.DrawFn) -> str:
    """A generic CSV trace: requests at odd sizes and rates, a latency column sometimes."""
    n = draw(st.integers(1, 60))
    latency = draw(st.booleans())
    t, offset, lines = draw(st.floats(0, 100, allow_nan=False)), 0, []
    one_size = draw(st.one_of(st.none(), SIZES))
    for _ in range(n):
        t += draw(GAPS)
        size = one_size or draw(SIZES)
        offset = draw(st.one_of(st.just(offset), st.integers(0, 2**40)))
        lat = f",{draw(st.floats(0, 1e5, allow_nan=False)):.3f}" if latency else ""
        lines.append(f"{t:.9f},{draw(OPS)},{offset},{size}{lat}")
        offset += size
    return "timestamp_s,op,offset,size" + (",latency_us" if latency else "") + "\n" + "\n".join(lines) + "\n"


# usable budgets (a ladder has at most 7 loads) and block sizes: the traces reach the plan
BUDGETS = st.one_of(st.integers(7, 400), st.just(10**6))
BLOCKS = st.sampled_from([512, 1024, 4096, 65536, 2**20])
# and odd ones: under one ladder, zero, negative; not a power of two, under a sector
ODD_BUDGETS = st.one_of(st.integers(-(2**63), 8), st.sampled_from([-1, 0, 1, 4, 5, 6, 2**63]))
ODD_BLOCKS = st.one_of(st.sampled_from([-512, 0, 1, 511, 513, 3000, 2**62]), BLOCKS)


def _characterised(texts: list[str], window_s: float) -> list[object]:
    chars = []
    for i, text in enumerate(texts):
        path = _DIR / f"t{i}.csv"
        path.write_text(text)
        chars.append(characterize(str(path), "csv", window_s=window_s))
    return chars


@FUZZ
@given(texts=st.lists(trace(), min_size=1, max_size=3), budget=BUDGETS, block=BLOCKS,
       window_s=st.sampled_from([1e-3, 0.5, 1.0, 60.0]), capacity=st.floats(0, 1e7, allow_nan=False))
def test_any_traces_give_a_plan_or_a_domain_error(
    texts: list[str], budget: int, block: int, window_s: float, capacity: float
) -> None:
    _plan_or_refusal(texts, budget, block, window_s, capacity)


@FUZZ
@given(texts=st.lists(trace(), min_size=1, max_size=2), budget=ODD_BUDGETS, block=ODD_BLOCKS)
def test_odd_budgets_and_block_sizes_give_a_plan_or_a_domain_error(
    texts: list[str], budget: int, block: int
) -> None:
    _plan_or_refusal(texts, budget, block, 1.0, 1e5)


def _plan_or_refusal(texts: list[str], budget: int, block: int, window_s: float, capacity: float) -> None:
    try:
        chars = _characterised(texts, window_s)
        plan = plan_for_traces(chars, budget=budget, block_size=block)  # type: ignore[arg-type]
    except SsdPredictError:
        return
    assert 1 <= len(plan.closed) <= budget and plan.mixes
    for point in plan.closed.points:
        Workload.model_validate(point.as_row())  # every planned point is a valid workload
        assert point.read_size % block == 0 and point.write_size % block == 0
    assert math.isfinite(plan.seconds(1000)) and plan.to_dict()["closed_points"] == len(plan.closed)
    # the open-loop phase, from closed-loop capacities the device might have measured
    measured = pd.DataFrame([{**p.as_row(), "iops": capacity * p.numjobs} for p in plan.closed.points])
    try:
        points = open_loop_points(plan, measured)
    except SsdPredictError:
        return
    for workload, rate in points:
        assert isinstance(rate, int) and rate >= 1 and workload.numjobs == plan.lanes
    assert len(points) >= len(plan.mixes) and np.isfinite([r for _, r in points]).all()
