"""The open-loop path's own throughput caps the capacity: points offered beyond what it serves."""

from __future__ import annotations

from pathlib import Path

import math

import numpy as np
import pandas as pd
import pytest

from modeling.store import DataDir
from tests.service.utils import quick_train
from tests.traces.fake_devices import FakeMMcDevice, window_table
from tests.traces.helpers import write_generic
from tests.traces.conftest import synthetic_rows as rows
from tests.traces.test_capacity_fleet import open_loop_points
from traces.capacity.ceiling import open_loop_ceilings
from traces.capacity.device import MIX_FIELDS, device_capacity, mix_table, parse_mix
from traces.capacity.headroom import trace_headroom
from traces.capacity.mix_latency import LatencyAt, MixCurves
from traces.capacity.search import search_capacity
from traces.capacity.slo import parse_slo
from traces.characterize import characterize
from traces.predict.openloop import cap_curves, closed_loop_curves
from traces.predict.queueing import steady_state
from traces.predict.windows import DeviceCurveSource

MIX = "write_ratio=0.5,request_size=4k,randomness=1"
CAP = 2e9 / 4096  # the closed-loop capacity of rows(1.0) at MIX: its bandwidth limit


def saturated_point(offered: float, served: float) -> dict[str, float]:
    """An open-loop point at MIX served less than it was offered."""
    base = open_loop_points(1.0)[-1]
    return {**base, "offered_iops": offered, "iops": served, "bandwidth_mib_s": served * 4096 / 2**20}


def test_a_saturated_point_gives_its_mix_a_share_and_the_nearest_mix_takes_it() -> None:
    frame = pd.DataFrame(rows(1.0) + open_loop_points(1.0) + [saturated_point(1.2 * CAP, 0.85 * CAP)])
    frame["sweep_id"] = 1
    ceilings = open_loop_ceilings(frame)
    assert ceilings is not None
    assert ceilings.shares.tolist() == pytest.approx([0.85])
    # the fastest point served in full: open_loop_points' 0.8 of its M/M/1 rate, a share of CAP
    fastest = max(p["offered_iops"] for p in open_loop_points(1.0))
    assert ceilings.limits.tolist() == pytest.approx([fastest / CAP])
    # any mix asked takes the nearest measured mix's share; its limit is a share of the capped capacity
    asked = mix_table([parse_mix(MIX), parse_mix("write_ratio=1,request_size=64k,randomness=0")])
    assert ceilings.for_mixes(asked).tolist() == pytest.approx([0.85, 0.85])
    assert ceilings.limits_for(asked).tolist() == pytest.approx([fastest / CAP / 0.85] * 2)
    assert any("served 85%" in n for n in ceilings.notes())


def test_points_served_in_full_give_a_limit_and_no_ceiling() -> None:
    frame = pd.DataFrame(rows(1.0) + open_loop_points(1.0) + [saturated_point(0.9 * CAP, 0.96 * 0.9 * CAP)])
    frame["sweep_id"] = 1
    ceilings = open_loop_ceilings(frame)
    assert ceilings is not None and ceilings.shares.tolist() == [1.0]
    assert ceilings.limits.tolist() == pytest.approx([0.9])
    assert not any("beyond saturation" in n for n in ceilings.notes())
    assert open_loop_ceilings(pd.DataFrame(rows(1.0))) is None  # no open-loop points at all


def test_the_search_stops_at_the_limit_and_says_so() -> None:
    mu = 10_000.0
    source = DeviceCurveSource([(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)])
    mc = MixCurves.of(FakeMMcDevice(mu, 1), window_table([1.0]), source)
    mc.limits = np.array([0.7])
    loose = search_capacity(mc, 0, parse_slo("p99<=100s"))
    assert loose.outcome == "measured" and loose.iops == pytest.approx(0.7 * mu) and loose.binding is None
    assert loose.iops_lower <= loose.iops <= loose.iops_upper == pytest.approx(0.7 * mu)
    assert any("fastest open-loop rate measured" in n for n in loose.notes)
    # a target that binds below the limit is answered as without it: mu - ln(100) / t
    tight = search_capacity(mc, 0, parse_slo("p99<=1ms"))
    assert tight.outcome == "limited" and tight.iops == pytest.approx(mu - math.log(100) / 1e-3, rel=1e-4)


def test_a_share_caps_the_curve_and_a_saturation_answer_with_it() -> None:
    mu = 10_000.0
    dev = FakeMMcDevice(mu, 1)
    source = DeviceCurveSource([(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)])
    capped = MixCurves.of(dev, window_table([1.0]), source, 1.0, np.array([0.8]))
    assert capped.capacity(0) == pytest.approx(0.8 * mu)
    answer = search_capacity(capped, 0, parse_slo("p99<=100s"))
    assert answer.outcome == "saturation" and answer.iops == pytest.approx(0.8 * mu)
    # one exponential server capped at 0.8 mu is the M/M/1 of rate 0.8 mu
    light = np.array([0.2 * mu])
    assert capped.latency(0, light).mean_us[0] == pytest.approx(1e6 / (0.8 * mu - 0.2 * mu))
    # ... and at the cap there is no steady state
    assert np.isinf(capped.latency(0, np.array([0.8 * mu])).mean_us[0])


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory: pytest.TempPathFactory) -> DataDir:
    """``plain`` (open-loop points served in full) and ``capped`` (the same, plus a point offered
    1.2x its capacity and served 0.85x): one sweep each, real CART models."""
    d = DataDir(tmp_path_factory.mktemp("ceiling-home"))
    for name, extra in (("plain", []), ("capped", [saturated_point(1.2 * CAP, 0.85 * CAP)])):
        d.catalog.ensure_device(name)
        d.catalog.add_measurements(name, rows(1.0) + open_loop_points(1.0) + extra)
        quick_train(d, name)
    return d


def test_device_capacity_takes_the_open_loop_ceiling_and_says_so(two_devices: DataDir) -> None:
    mixes, slo = mix_table([parse_mix(MIX)]), parse_slo("p99<=10s")
    plain = device_capacity(two_devices, "plain", mixes, slo)
    capped = device_capacity(two_devices, "capped", mixes, slo)
    a, b = plain.answers[0], capped.answers[0]
    assert b.capacity_iops == pytest.approx(0.85 * a.capacity_iops, rel=1e-6)
    assert any("beyond saturation were served 85%" in n for n in capped.notes), capped.notes
    assert not any("beyond saturation" in n for n in plain.notes)
    # both stop at the fastest point served in full, the same rate
    fastest = max(p["offered_iops"] for p in open_loop_points(1.0))
    assert a.outcome == b.outcome == "measured"
    assert a.iops == pytest.approx(fastest * a.capacity_iops / CAP, rel=1e-6)
    assert b.iops == pytest.approx(a.iops, rel=1e-6)


def test_the_ceiling_follows_the_bench_reference_layout(tmp_path: Path) -> None:
    # closed-loop and open-loop points in separate sweeps (as `sweep` then `sweep --open-loop`
    # store them): the newest open-loop sweep's saturated point still counts
    d = DataDir(tmp_path)
    d.catalog.ensure_device("two")
    d.catalog.add_measurements("two", rows(1.0))
    d.catalog.add_measurements("two", open_loop_points(1.0) + [saturated_point(1.2 * CAP, 0.9 * CAP)])
    ceilings = open_loop_ceilings(d.catalog.measurements("two"))
    assert ceilings is not None and ceilings.shares.tolist() == pytest.approx([0.9])


def test_an_undefined_latency_counts_as_over_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    # a zero p99 part times an infinite wait is NaN: the search treats it as a failing rate
    # (it crashed in Brent's method on the throttled reference before)
    mu = 10_000.0
    source = DeviceCurveSource([(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)])
    mc = MixCurves.of(FakeMMcDevice(mu, 1), window_table([1.0]), source)
    real = mc.latency

    def latency(i: int, rates: np.ndarray, bound: str = "value") -> LatencyAt:
        at = real(i, rates, bound)
        bad = np.asarray(rates) > 0.6 * mu
        return LatencyAt(
            at.rates, np.where(bad, np.nan, at.mean_us), np.where(bad, np.nan, at.p99_us), at.inflight
        )

    monkeypatch.setattr(mc, "latency", latency)
    answer = search_capacity(mc, 0, parse_slo("p99<=100s"))
    assert answer.outcome == "limited" and 0.5 * mu < answer.iops <= 0.6 * mu


@pytest.mark.parametrize("servers", [1, 4])
@pytest.mark.parametrize("ca2", [1.0, 4.0])
def test_the_grid_steady_states_equal_the_scalar_ones(servers: int, ca2: float) -> None:
    # the search's grid goes through the array form; Brent's single rates through the scalar one
    from traces.capacity.mix_latency import steady_states
    from traces.predict.queueing import steady_state

    mu = 10_000.0
    source = DeviceCurveSource([(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)])
    mc = MixCurves.of(FakeMMcDevice(mu, servers), window_table([1.0]), source, ca2)
    curve = mc.curves.curve(0, "value")
    rates = np.concatenate(
        [np.geomspace(1.0, 0.5 * curve.capacity, 7), curve.capacity * (1 - np.geomspace(0.5, 1e-4, 7))]
    )
    mean, p99 = steady_states(curve, rates, ca2)
    for r, m, p in zip(rates, mean, p99, strict=True):
        st = steady_state(curve, float(r), ca2)
        assert m == pytest.approx(st.mean_s, rel=1e-9) and p == pytest.approx(st.p99_s, rel=1e-9)


def test_trace_headroom_takes_the_open_loop_ceiling_as_capacity_does(
    two_devices: DataDir, tmp_path: Path
) -> None:
    # a trace of the measured mix (half writes, 4 KiB random) at 2,000 IO/s; a loose target
    # binds nowhere, so every window's speed-up is its capacity answer over its own rate
    rng = np.random.default_rng(3)
    n = 1200
    t = np.cumsum(rng.exponential(1 / 2000.0, n))
    path = write_generic(
        tmp_path / "t.csv", t, rng.random(n) < 0.5, rng.integers(0, 2**20, n) * 4096, np.full(n, 4096)
    )
    slo = parse_slo("p99<=10s")
    for device in ("plain", "capped"):
        h = trace_headroom(two_devices, device, path, slo, window_s=None, window_requests=600)
        # stopped at the fastest open-loop point served in full, as `capacity` is (without the
        # ceiling the windows answered `saturation` at the closed-loop capacity, 30x further)
        assert h.outcome == "measured", h.notes
        assert any("fastest open-loop point served in full" in n for n in h.notes)
        win = characterize(str(path), window_requests=600).windows
        mixes = mix_table([{k: win.at[j, k] for k in MIX_FIELDS} for j in range(len(win))])
        expected = [a.iops for a in device_capacity(two_devices, device, mixes, slo).answers]
        assert (h.table["speedup"] * h.table["offered_iops"]).tolist() == pytest.approx(expected, rel=1e-6)
    assert any("beyond saturation were served 85%" in n for n in h.notes)  # the capped device


def test_a_point_served_above_the_closed_loop_capacity_lifts_the_ceiling() -> None:
    # a saturated point served 1.1x the closed-loop capacity: the path serves more than closed loop
    frame = pd.DataFrame(rows(1.0) + open_loop_points(1.0) + [saturated_point(1.3 * CAP, 1.1 * CAP)])
    frame["sweep_id"] = 1
    ceilings = open_loop_ceilings(frame)
    assert ceilings is not None and ceilings.shares.tolist() == pytest.approx([1.1])
    assert any("served up to 110%" in n for n in ceilings.notes())
    # without a saturated point, the fastest served in full lifts it (offered 1.2x, served 1.19x)
    full = saturated_point(1.2 * CAP, 1.19 * CAP)  # 99 % of its offered rate: served in full
    frame = pd.DataFrame(rows(1.0) + open_loop_points(1.0) + [full])
    frame["sweep_id"] = 1
    ceilings = open_loop_ceilings(frame)
    assert ceilings is not None and ceilings.shares.tolist() == pytest.approx([1.19])
    # its limit is the offered 1.2x: as a share of the raised capacity, 1 (the answer may reach it)
    assert ceilings.limits.tolist() == pytest.approx([1.19])
    assert ceilings.limits_for(mix_table([parse_mix(MIX)])).tolist() == pytest.approx([1.0])


def test_a_collapsed_overload_point_does_not_lower_the_ceiling_under_a_faster_point_served_in_full() -> None:
    # served in full at 0.95x, then offered 1.2x and served only 0.7x (the path collapsed)
    points = [saturated_point(0.95 * CAP, 0.95 * CAP), saturated_point(1.2 * CAP, 0.7 * CAP)]
    frame = pd.DataFrame(rows(1.0) + open_loop_points(1.0) + points)
    frame["sweep_id"] = 1
    ceilings = open_loop_ceilings(frame)
    assert ceilings is not None
    assert ceilings.shares.tolist() == pytest.approx([0.95])  # not 0.7
    assert ceilings.limits.tolist() == pytest.approx([0.95])
    # an overload point that served the most still sets it (the path ran out there)
    overload = saturated_point(1.2 * CAP, 0.97 * CAP)
    frame = pd.DataFrame(rows(1.0) + open_loop_points(1.0) + [points[0], overload])
    frame["sweep_id"] = 1
    ceilings = open_loop_ceilings(frame)
    assert ceilings is not None and ceilings.shares.tolist() == pytest.approx([0.97])


def test_a_share_over_one_extends_the_curve_beyond_the_closed_loop_capacity() -> None:
    # one exponential server (mu) measured at loads 1-64; the path serves 1.2 mu
    mu = 10_000.0
    dev = FakeMMcDevice(mu, 1)
    source = DeviceCurveSource([(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)])
    plain = MixCurves.of(dev, window_table([1.0]), source)
    raised = MixCurves.of(dev, window_table([1.0]), source, 1.0, np.array([1.2]))
    assert raised.capacity(0) == pytest.approx(1.2 * mu)
    assert raised.max_load() == plain.max_load() == 64  # the largest measured load, not the added one
    # the measured curve is kept: light load as before (the queue's share of it is small there)
    light = np.array([0.05 * mu])
    assert raised.latency(0, light).mean_us[0] == pytest.approx(plain.latency(0, light).mean_us[0], rel=0.01)
    # between the two capacities a steady state exists and the latency rises towards the new one
    between = raised.latency(0, np.array([1.05 * mu, 1.1 * mu, 1.19 * mu])).mean_us
    assert np.all(np.isfinite(between)) and np.all(np.diff(between) > 0)
    assert np.isinf(raised.latency(0, np.array([1.2 * mu])).mean_us[0])
    # a loose target is met up to the raised capacity
    answer = search_capacity(raised, 0, parse_slo("p99<=100s"))
    assert answer.outcome == "saturation" and answer.iops == pytest.approx(1.2 * mu)
    assert answer.capacity_iops == pytest.approx(1.2 * mu)


def test_extending_one_window_leaves_a_capped_or_plain_window_as_it_was() -> None:
    dev = FakeMMcDevice(10_000.0, 2)
    win = window_table([1.0, 1.0, 1.0])
    loads = [(qd, 1) for qd in (1, 2, 4, 8, 16)]
    curves = closed_loop_curves(dev, win, loads)
    both = cap_curves(curves, np.array([1.0, 0.6, 1.3]))
    alone = {c: cap_curves(closed_loop_curves(dev, win.iloc[[0]], loads), c) for c in (1.0, 0.6)}
    assert both.outstanding.tolist() == [1, 2, 4, 8, 16, 16 * 1.3]
    assert [both.curve(i, "value").capacity for i in range(3)] == pytest.approx([2e4, 1.2e4, 2.6e4])
    # the window at slope 1: the added load's response time is the top load's, and so is its p99
    top = both.curve(2, "value")
    assert top.outstanding[-1] / top.iops[-1] == pytest.approx(top.outstanding[-2] / top.iops[-2])
    assert top.p99_s[-1] == pytest.approx(top.p99_s[-2])
    for i, c in ((0, 1.0), (1, 0.6)):
        one, other = both.curve(i, "value"), alone[c].curve(0, "value")
        for rate in (0.3 * other.capacity, 0.9 * other.capacity, 0.99 * other.capacity):
            a, b = steady_state(one, rate), steady_state(other, rate)
            assert a.mean_s == pytest.approx(b.mean_s, rel=1e-9)
            assert a.p99_s == pytest.approx(b.p99_s, rel=1e-9)
