"""The open-loop method on analytic devices whose answer is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modeling.errors import InvalidInput
from tests.traces.fake_devices import FakeMMcDevice, window_table
from traces.predict.openloop import closed_loop_curves, predict_open_loop, predict_windows
from traces.predict.queueing import ServiceCurve, backlog_over, fluid_fixed_point, mean_inflight_poisson

LOADS = [(qd, 1) for qd in (1, 2, 4, 8, 16, 32, 64)]
MU = 10_000.0


def _curve(dev: FakeMMcDevice) -> ServiceCurve:
    return closed_loop_curves(dev, window_table([1.0]), LOADS).curve(0, "value")


@pytest.mark.parametrize("servers", [1, 4])
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.95])
def test_poisson_mean_latency_is_the_mmc_closed_form(servers: int, rho: float) -> None:
    dev = FakeMMcDevice(MU, servers)
    lam = rho * servers * MU
    out = predict_open_loop(dev, window_table([lam]), LOADS).iloc[0]
    expected = dev.erlang_c_response_s(lam)
    assert out["pred_latency_mean_us"] == pytest.approx(expected * 1e6, rel=1e-6)
    assert out["pred_inflight"] == pytest.approx(lam * expected, rel=1e-6)  # Little
    assert out["utilisation"] == pytest.approx(rho) and not out["saturated"]
    assert out["pred_iops"] == pytest.approx(lam)


@pytest.mark.parametrize("servers", [1, 4])
def test_fluid_fixed_point_is_the_mean_number_in_service(servers: int) -> None:
    dev = FakeMMcDevice(MU, servers)
    curve = _curve(dev)
    for rho in (0.05, 0.3, 0.7, 0.99):
        lam = rho * servers * MU
        lf = fluid_fixed_point(curve, lam)
        assert lf == pytest.approx(lam / MU, rel=1e-9)
        # L = lam x R(L), R(L) = L / X(L); under one in flight the QD1 response time
        response = 1 / curve.iops[0] if lf < 1 else lf / float(np.interp(lf, curve.outstanding, curve.iops))
        assert lf == pytest.approx(lam * response, rel=1e-9)
    assert math.isinf(fluid_fixed_point(curve, servers * MU))


def test_mm1_p99_is_the_exponential_quantile() -> None:
    dev = FakeMMcDevice(MU, 1)
    for rho in (0.1, 0.5, 0.9):
        lam = rho * MU
        out = predict_open_loop(dev, window_table([lam]), LOADS).iloc[0]
        assert out["pred_latency_p99_us"] == pytest.approx(math.log(100) / (MU - lam) * 1e6)


def test_burstiness_scales_the_waiting_time_only() -> None:
    dev = FakeMMcDevice(MU, 1)
    lam = 0.6 * MU
    poisson = predict_open_loop(dev, window_table([lam], ca2=1.0), LOADS).iloc[0]["pred_latency_mean_us"]
    bursty = predict_open_loop(dev, window_table([lam], ca2=4.0), LOADS).iloc[0]["pred_latency_mean_us"]
    regular = predict_open_loop(dev, window_table([lam], ca2=0.0), LOADS).iloc[0]["pred_latency_mean_us"]
    service = 1e6 / MU
    assert bursty - service == pytest.approx((poisson - service) * 2.5)
    assert regular - service == pytest.approx((poisson - service) * 0.5)


def test_saturation_is_flagged_and_the_backlog_grows_and_drains() -> None:
    dev = FakeMMcDevice(MU, 2)
    cap = 2 * MU
    lam = [0.5 * cap, 1.2 * cap, 1.2 * cap, 0.5 * cap]
    out = predict_open_loop(dev, window_table(lam, duration=0.5), LOADS)
    assert out["saturated"].tolist() == [False, True, True, False]
    assert out["capacity_iops"].tolist() == pytest.approx([cap] * 4)
    assert out["utilisation"].iloc[1] == pytest.approx(1.2)
    # window 2: backlog from 0 to 0.2 cap x 0.5 s, mean half of it, served at cap
    growth = 0.2 * cap * 0.5
    full = 2 / cap  # two requests in flight at capacity: the saturating load's response time
    assert out["pred_latency_mean_us"].iloc[1] == pytest.approx((full + growth / 2 / cap) * 1e6)
    # window 3 starts with that backlog and adds as much again
    assert out["pred_latency_mean_us"].iloc[2] == pytest.approx((full + 1.5 * growth / cap) * 1e6)
    # window 4 drains 2 x growth at 0.5 cap: empty after 0.4 s of 0.5 s, so above steady state
    steady = dev.erlang_c_response_s(0.5 * cap) * 1e6
    assert out["pred_latency_mean_us"].iloc[3] > steady * 2
    assert out["pred_iops"].iloc[1] == pytest.approx(cap)  # served, not offered


def test_backlog_path() -> None:
    b = backlog_over(0.0, 150.0, 100.0, 2.0)
    assert (b.end, b.mean) == (100.0, 50.0)
    d = backlog_over(100.0, 50.0, 100.0, 4.0)  # drains in 2 s of 4
    assert d.end == 0.0 and d.mean == pytest.approx(100 * 2 / 2 / 4)


def test_intervals_bracket_the_value() -> None:
    dev = FakeMMcDevice(MU, 4)
    out = predict_open_loop(dev, window_table([5_000.0, 20_000.0, 38_000.0]), LOADS)
    for m in ("pred_latency_mean_us", "pred_latency_p99_us"):
        assert (out[f"{m}_lower"] < out[m]).all() and (out[m] < out[f"{m}_upper"]).all()
    assert (out["pred_latency_p99_us"] >= out["pred_latency_mean_us"]).all()


def test_curve_uses_the_best_split_of_each_in_flight_count() -> None:
    dev = FakeMMcDevice(MU, 1)
    loads = [(1, 1), (2, 1), (1, 2), (4, 1), (2, 2)]
    c = closed_loop_curves(dev, window_table([1.0]), loads)
    assert c.outstanding.tolist() == [1.0, 2.0, 4.0]
    assert mean_inflight_poisson(c.curve(0, "value"), 0.5 * MU) == pytest.approx(1.0)  # rho / (1 - rho)


def test_trace_qd_method_and_unknown_method() -> None:
    dev = FakeMMcDevice(MU, 4)
    win = window_table([1000.0])
    win["queue_depth"] = 8
    out = predict_windows(dev, win, method="trace-qd").iloc[0]
    assert out["pred_latency_mean_us"] == pytest.approx(8 / (4 * MU) * 1e6)
    assert out["pred_inflight"] == 8
    with pytest.raises(InvalidInput):
        predict_windows(dev, win, method="magic")
    with pytest.raises(InvalidInput):
        predict_windows(dev, win, loads=[])


def test_characterisation_measures_arrival_burstiness() -> None:
    from traces.characterize import characterize_chunks
    from traces.chunks import TraceChunk, TraceInfo

    rng = np.random.default_rng(1)
    n = 20_000
    t_poisson = np.cumsum(rng.exponential(1e-4, n))
    t_regular = np.arange(n) * 1e-4
    for t, expected in ((t_poisson, 1.0), (t_regular, 0.0)):
        chunk = TraceChunk.build(t, np.zeros(n, bool), np.arange(n) * 4096, np.full(n, 4096))
        win = characterize_chunks(TraceInfo("csv"), [chunk], window_s=0.5).windows
        assert win["arrival_cv2"].to_numpy() == pytest.approx(expected, abs=0.06)


def test_a_capacity_ceiling_caps_the_curve_and_moves_saturation() -> None:
    dev = FakeMMcDevice(MU, 2)
    cap = 2 * MU
    lam = [0.5 * cap, 0.8 * cap]
    free = predict_open_loop(dev, window_table(lam), LOADS)
    capped = predict_open_loop(dev, window_table(lam), LOADS, ceiling=0.7)
    assert free["capacity_iops"].tolist() == pytest.approx([cap, cap])
    assert capped["capacity_iops"].tolist() == pytest.approx([0.7 * cap, 0.7 * cap])
    # 80 % of the model's capacity is over the capped device's: saturated there only
    assert free["saturated"].tolist() == [False, False]
    assert capped["saturated"].tolist() == [False, True]
    # below the cap, a slower device queues longer
    assert capped["pred_latency_mean_us"].iloc[0] > free["pred_latency_mean_us"].iloc[0]
    with pytest.raises(InvalidInput, match="ceiling"):
        predict_open_loop(dev, window_table(lam), LOADS, ceiling=0.0)
    # over 1 (a path measured to serve more than closed loop reached) the capacity rises with it
    raised = predict_open_loop(dev, window_table([*lam, 1.2 * cap]), LOADS, ceiling=1.3)
    assert raised["capacity_iops"].tolist() == pytest.approx([1.3 * cap] * 3)
    assert raised["saturated"].tolist() == [False, False, False]


def _slowed(pred, slow):  # type: ignore[no-untyped-def]
    """A fake's predictions with each request ``slow`` times longer."""
    for c in pred.columns:
        if c.startswith("pred_iops"):
            pred[c] = pred[c] / slow
        elif c.startswith("pred_latency"):
            pred[c] = pred[c] * slow
    return pred


class _StepDevice(FakeMMcDevice):
    """Reads at mu, writes at mu / 4, with the step a tree makes: a ratio under 0.4 is read-like."""

    def predict_frame(self, df, metrics=None, model="auto"):  # type: ignore[no-untyped-def]
        out = super().predict_frame(df, metrics, model)
        wr = df["write_ratio"].to_numpy(np.float64)
        return _slowed(out, np.where(wr >= 0.4, 1.0 + 3.0 * wr, 1.0))  # x (1 + 3 wr) from the cut


def test_curves_between_swept_write_ratios_are_blended() -> None:
    dev = _StepDevice(10_000.0, 1)
    swept = [0.0, 0.4, 1.0]

    def service_us(wr: float, ratios: list[float] | None) -> float:
        curves = closed_loop_curves(dev, window_table([1.0]).assign(write_ratio=wr), LOADS, ratios)
        return 1e6 / curves.iops["value"][0, 0]

    # the model alone jumps at the cut: 0.39 reads like 0, 0.41 like 0.4
    assert service_us(0.41, None) > 2 * service_us(0.39, None)
    # blended, one request's time is linear between the swept ratios: continuous at 0.4
    assert service_us(0.39, swept) == pytest.approx(service_us(0.41, swept), rel=0.05)
    assert service_us(0.2, swept) == pytest.approx((100.0 + 220.0) / 2, rel=1e-6)
    # at a swept ratio, and outside the swept range, the model's own answer
    assert service_us(0.4, swept) == pytest.approx(220.0)
    assert service_us(0.3, [0.0, 0.2]) == pytest.approx(service_us(0.3, None))


class _SizeStepDevice(FakeMMcDevice):
    """One request's time 1 + size / 4 KiB times 1/mu, read the way a tree cuts: under 16 KiB as 4 KiB."""

    def predict_frame(self, df, metrics=None, model="auto"):  # type: ignore[no-untyped-def]
        out = super().predict_frame(df, metrics, model)
        size = df["request_size"].to_numpy(np.float64)
        return _slowed(out, 1.0 + np.where(size < 16384, 4096.0, size) / 4096.0)


def test_curves_between_swept_sizes_are_blended() -> None:
    dev = _SizeStepDevice(10_000.0, 1)

    def service_us(size: int, sizes: list[int] | None) -> float:
        win = window_table([1.0]).assign(request_size=size, read_size=size, write_size=size)
        return 1e6 / closed_loop_curves(dev, win, LOADS, None, sizes).iops["value"][0, 0]

    assert service_us(8192, None) == pytest.approx(200.0)  # the model alone: 8 KiB reads as 4 KiB
    # one request's time linear in size between 4 KiB (200 us) and 16 KiB (500 us)
    assert service_us(8192, [4096, 16384]) == pytest.approx(300.0)
    assert service_us(16384, [4096, 16384]) == pytest.approx(500.0)
