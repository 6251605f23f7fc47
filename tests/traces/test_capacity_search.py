"""The capacity search on analytic devices whose answer is known in closed form (M/M/1, M/M/c).

The devices are the fake exponential servers of :mod:`tests.traces.fake_devices`: a model
stand-in at the narrowest boundary (``predict_frame``), since no real device has a closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from modeling.errors import InvalidInput
from tests.traces.fake_devices import FakeMMcDevice, window_table
from traces.capacity.mix_latency import MixCurves
from traces.capacity.search import GRID, search_capacity
from traces.capacity.slo import parse_slo
from traces.predict.utilisation import learn_correction
from traces.predict.windows import DeviceCurveSource, predict_table

LOADS = [(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)]
MU = 10_000.0


def _curves(dev: FakeMMcDevice, source: DeviceCurveSource | None = None, ca2: float = 1.0) -> MixCurves:
    return MixCurves.of(dev, window_table([1.0]), source or DeviceCurveSource(LOADS), ca2)


@pytest.mark.parametrize("target_us", [600.0, 1000.0, 5000.0, 20_000.0])
def test_mm1_p99_capacity_is_mu_minus_ln100_over_t(target_us: float) -> None:
    answer = search_capacity(_curves(FakeMMcDevice(MU, 1)), 0, parse_slo(f"p99<={target_us}us"))
    expected = MU - math.log(100) / (target_us * 1e-6)
    assert answer.outcome == "limited"
    assert answer.iops == pytest.approx(expected, rel=1e-4)
    assert answer.iops <= expected * (1 + 1e-9)  # the answer meets the target, never just over it
    assert answer.latency_p99_us <= target_us
    assert answer.binding == parse_slo(f"p99<={target_us}us").targets[0].__str__()
    # in flight by Little's law at the answer: lam x W, W = 1 / (mu - lam) on M/M/1
    assert answer.inflight == pytest.approx(answer.iops / (MU - answer.iops), rel=1e-3)
    assert answer.utilisation == pytest.approx(answer.iops / MU)
    assert answer.capacity_iops == pytest.approx(MU)


def test_mm1_mean_capacity_and_the_tighter_target_binds() -> None:
    dev = _curves(FakeMMcDevice(MU, 1))
    mean_only = search_capacity(dev, 0, parse_slo("mean<=250us"))
    assert mean_only.iops == pytest.approx(MU - 1 / 250e-6, rel=1e-4)
    # p99 <= 1 ms allows 5,395 IO/s, mean <= 250 us only 6,000: the p99 binds
    both = search_capacity(dev, 0, parse_slo("mean<=250us,p99<=1ms"))
    assert both.binding == "p99<=1ms"
    assert both.iops == pytest.approx(MU - math.log(100) / 1e-3, rel=1e-4)
    tight_mean = search_capacity(dev, 0, parse_slo("p99<=1ms,mean<=150us"))
    assert tight_mean.binding == "mean<=150us"
    assert tight_mean.iops == pytest.approx(MU - 1 / 150e-6, rel=1e-4)


def test_burstiness_scales_the_wait_and_lowers_the_capacity() -> None:
    # Allen-Cunneen on M/M/1: mean = 1/mu + k lam / (mu (mu - lam)), k = (C2 + 1) / 2
    t, c2 = 300e-6, 4.0
    k, w = (c2 + 1) / 2, t - 1 / MU
    expected = w * MU**2 / (k + w * MU)
    bursty = search_capacity(_curves(FakeMMcDevice(MU, 1), ca2=c2), 0, parse_slo("mean<=300us"))
    assert bursty.iops == pytest.approx(expected, rel=1e-4)
    poisson = search_capacity(_curves(FakeMMcDevice(MU, 1)), 0, parse_slo("mean<=300us"))
    assert bursty.iops < poisson.iops


def test_mmc_capacity_meets_the_erlang_c_mean_at_the_answer() -> None:
    dev = FakeMMcDevice(MU, 4)
    answer = search_capacity(_curves(dev), 0, parse_slo("mean<=150us"))
    assert answer.outcome == "limited" and answer.capacity_iops == pytest.approx(4 * MU)
    assert dev.erlang_c_response_s(answer.iops) * 1e6 == pytest.approx(150.0, rel=1e-4)


def test_the_interval_comes_from_the_model_bounds() -> None:
    answer = search_capacity(_curves(FakeMMcDevice(MU, 1)), 0, parse_slo("p99<=1ms"))
    # the fake's bounds are +-10 % on IO/s and latency: a real interval around the answer
    assert answer.iops_lower < 0.95 * answer.iops < answer.iops < answer.iops_upper / 1.05


def test_a_device_that_meets_the_target_even_at_saturation() -> None:
    answer = search_capacity(_curves(FakeMMcDevice(MU, 1)), 0, parse_slo("p99<=100s"))
    assert answer.outcome == "saturation" and answer.binding is None
    assert answer.iops == pytest.approx(MU)  # throughput, not latency, is the limit
    assert answer.iops_lower == pytest.approx(0.9 * MU) and answer.iops_upper == pytest.approx(1.1 * MU)
    assert any("even at saturation" in n for n in answer.notes)


def test_a_device_that_cannot_meet_the_target_at_any_load() -> None:
    answer = search_capacity(_curves(FakeMMcDevice(MU, 1)), 0, parse_slo("p99<=100us"))
    assert answer.outcome == "never" and answer.iops == 0 and answer.iops_upper == 0
    # the lightest load's p99: service alone, ln(100) / mu, plus a little queueing
    assert answer.latency_p99_us == pytest.approx(1e6 * math.log(100) / (MU - GRID[0] * MU), rel=1e-6)
    assert any("cannot meet p99<=100us at any load" in n and "lightest load" in n for n in answer.notes)


def test_the_answer_says_when_it_lies_beyond_what_was_measured() -> None:
    answer = search_capacity(_curves(FakeMMcDevice(MU, 1)), 0, parse_slo("p99<=1ms"))
    assert answer.beyond_measured
    assert any("no open-loop points" in n for n in answer.notes)
    # with open-loop points up to 9,000 IO/s, the same answer is within what was measured ...
    measured = _with_points(FakeMMcDevice(MU, 1), [500.0, 2000.0, 5000.0, 9000.0])
    inside = search_capacity(measured, 0, parse_slo("p99<=1ms"))
    assert not inside.beyond_measured, inside.notes
    # ... and with points only up to 2,000 IO/s it is not
    sparse = search_capacity(_with_points(FakeMMcDevice(MU, 1), [200.0, 500.0, 2000.0]), 0,
                             parse_slo("p99<=1ms"))
    assert sparse.beyond_measured and any("fastest open-loop point" in n for n in sparse.notes)


def _with_points(dev: FakeMMcDevice, rates: list[float], cold: float = 2.0) -> MixCurves:
    """The device with open-loop points: its M/M/1 latency, with a service time ``cold``x slower at
    sparse arrivals (1 / (1 + rate x 1 ms) of the way)."""
    base = window_table([1.0]).iloc[0].to_dict()
    rows = []
    for r in rates:
        ratio = 1 + (cold - 1) / (1 + r * 1e-3)
        mean = 1e6 * (ratio / MU + (r / MU) / (MU - r))
        rows.append({**base, "offered_iops": r, "iops": r, "latency_mean_us": mean,
                     "latency_p99_us": 4 * mean})
    points = pd.DataFrame(rows)
    correction = learn_correction(dev, points, LOADS)
    assert correction is not None
    return _curves(dev, DeviceCurveSource(LOADS, correction))


def test_latency_at_a_rate_is_what_trace_predict_says_for_that_window() -> None:
    # the fast path (curves once, arithmetic per rate) held equal to the per-window table
    dev = FakeMMcDevice(MU, 2)
    mc = _with_points(dev, [300.0, 1000.0, 4000.0, 12_000.0])
    rates = [50.0, 700.0, 6000.0, 15_000.0]
    windows = window_table(rates)
    windows["window_start_s"] = np.arange(len(rates)) * 1e6  # far apart: no backlog between them
    windows["window_end_s"] = windows["window_start_s"] + 1.0
    windows["bandwidth_mib_s"] = windows["iops"] * 4096 / 2**20
    char = type("Char", (), {"windows": windows, "gap_hist": None})()
    table = predict_table(dev, char, mc.source)  # type: ignore[arg-type]
    for bound, suffix in (("value", ""), ("lower", "_lower"), ("upper", "_upper")):
        at = mc.latency(0, np.array(rates), bound)
        assert at.mean_us == pytest.approx(table[f"pred_latency_mean_us{suffix}"].to_numpy(), rel=1e-9)
        assert at.p99_us == pytest.approx(table[f"pred_latency_p99_us{suffix}"].to_numpy(), rel=1e-9)


def test_a_cold_path_that_breaks_the_target_at_light_load_is_reported() -> None:
    # sparse arrivals 5x slower: 500 us mean at light load, under 300 us between 2k and 6k IO/s
    mc = _with_points(FakeMMcDevice(MU, 1), [100.0, 300.0, 1000.0, 3000.0, 6000.0, 9000.0], cold=5.0)
    answer = search_capacity(mc, 0, parse_slo("mean<=300us"))
    assert answer.outcome == "limited"
    assert float(mc.latency(0, np.array([answer.iops]), "value").mean_us[0]) <= 300.0
    assert float(mc.latency(0, np.array([GRID[0] * MU]), "value").mean_us[0]) > 300.0
    assert any("cold I/O path" in n for n in answer.notes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("p99<=1ms,mean<=200us", None),
        ("p99 < 0.5 ms", None),
        ("p95<=1ms", "cannot target 'p95'"),
        ("p99<=1parsec", "not a duration"),
        ("p99<=250", "give the limit a unit"),
        ("p99>=1ms", "not a latency target"),
        ("p99<=0ms", "must be positive"),
        ("p99<=1ms,p99<=2ms", "targeted twice"),
        ("", "at least one latency target"),
    ],
)
def test_slo_grammar(text: str, message: str | None) -> None:
    if message is None:
        slo = parse_slo(text)
        assert all(t.limit_us > 0 for t in slo.targets)
        assert parse_slo(str(slo)) == slo  # the text form reads back
        return
    with pytest.raises(InvalidInput, match=message):
        parse_slo(text)


def test_slo_units() -> None:
    assert [t.limit_us for t in parse_slo("p99<=1ms,mean<=200us").targets] == [1000.0, 200.0]
    assert parse_slo("mean<=1.5us").targets[0].limit_us == pytest.approx(1.5)
    assert parse_slo("p99<=2s").targets[0].limit_us == 2e6
    assert str(parse_slo("mean<=0.5us")) == "mean<=0.5us"  # below a microsecond still reads back


def test_a_target_met_only_near_a_measured_rate_is_found() -> None:
    """A curve that falls with the rate (the cold path) and then rises (the queue) can dip under a
    target between two grid rates only: the search looks at the measured rates too."""
    mc = _with_points(FakeMMcDevice(MU, 1), [100.0, 300.0, 1000.0, 3000.0, 6000.0, 9000.0], cold=5.0)
    dip = float(mc.latency(0, np.array([3000.0]), "value").mean_us[0])
    grid = mc.latency(0, GRID * MU, "value").mean_us
    assert (grid > dip * 1.001).all()  # no grid rate meets a target just over the dip
    answer = search_capacity(mc, 0, parse_slo(f"mean<={dip * 1.001:.3f}us"))
    assert answer.outcome == "limited" and answer.iops >= 3000.0
    assert answer.latency_mean_us <= dip * 1.001
