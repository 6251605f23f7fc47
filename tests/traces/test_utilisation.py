"""The open-loop correction (traces.predict.utilisation): cold path on service, visible share of the wait."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.traces.fake_devices import FakeMMcDevice
from tests.traces.test_coldpath import _hist
from traces.predict.coldpath import ColdPath
from traces.predict.openloop import predict_open_loop
from traces.predict.utilisation import LatencyParts, learn_correction

MU = 10_000.0
LOADS = [(1, 1), (2, 1)]
BASE = dict(write_ratio=0.0, queue_depth=1, request_size=4096, randomness=1.0, numjobs=16)


def _windows(rates: list[float], **over: float) -> pd.DataFrame:
    rows = [{**BASE, **over, "iops": r, "arrival_cv2": 1.0, "window_start_s": 10.0 * i,
             "window_end_s": 10.0 * i + 1.0} for i, r in enumerate(rates)]
    win = pd.DataFrame(rows)
    for f, src in (("read_size", "request_size"), ("write_size", "request_size"),
                   ("read_randomness", "randomness"), ("write_randomness", "randomness")):
        win[f] = win[src]
    return win


def _points(rates: list[float], mean_us: list[float], **over: float) -> pd.DataFrame:
    return pd.DataFrame([{**BASE, **over, "offered_iops": r, "iops": r, "latency_mean_us": m,
                          "latency_p99_us": 5 * m} for r, m in zip(rates, mean_us, strict=True)])


def _corrected(corr, win: pd.DataFrame, hist: np.ndarray | None = None) -> np.ndarray:  # type: ignore[no-untyped-def]
    pred = predict_open_loop(FakeMMcDevice(MU, 1), win, LOADS)
    mean_f, _ = corr.factors(win, pred, hist)
    return pred["pred_latency_mean_us"].to_numpy() * mean_f


def test_the_prediction_splits_into_service_and_wait() -> None:
    win = _windows([1000.0, 5000.0])
    pred = predict_open_loop(FakeMMcDevice(MU, 1), win, LOADS)
    parts = LatencyParts.of(pred)
    # M/M/1: service 1/mu, wait rho/(mu - lam)
    assert parts.service == pytest.approx([100.0, 100.0], rel=1e-6)
    assert parts.wait == pytest.approx([1e6 * 0.1 / 9000, 1e6 * 0.5 / 5000], rel=1e-3)
    # the p99's parts: the closed-loop p99 alone (ln(100) / mu on the fake), and the rest
    assert parts.service_p99 == pytest.approx([100.0 * np.log(100)] * 2, rel=1e-6)
    assert parts.service_p99 + parts.wait_p99 == pytest.approx(pred["pred_latency_p99_us"].to_numpy())


def test_a_queue_that_shows_keeps_the_wait_and_learns_the_cold_path() -> None:
    # measured: the M/M/1 wait in full, on a service time that is cold at sparse arrivals
    truth = ColdPath(1.0, 3.0, 2e-3)
    rates = [100.0, 500.0, 2000.0, 5000.0, 8000.0]
    mm1 = [1e6 / MU * float(truth.poisson(np.array([r]))[0]) + 1e6 * (r / MU) / (MU - r) for r in rates]
    corr = learn_correction(FakeMMcDevice(MU, 1), _points(rates, mm1), LOADS)
    assert corr is not None and corr.visible_wait == 1.0
    got = _corrected(corr, _windows([300.0, 1000.0, 6500.0]))
    want = [1e6 / MU * float(truth.poisson(np.array([r]))[0]) + 1e6 * (r / MU) / (MU - r)
            for r in (300.0, 1000.0, 6500.0)]
    assert got == pytest.approx(want, rel=0.08)


def test_a_wait_that_does_not_show_is_left_out() -> None:
    # a synchronous CPU-bound device: the wait comes before fio's issue timestamp, so the
    # measured latency stays at the service time whatever the load
    rates = [100.0, 500.0, 2000.0, 5000.0, 8000.0]
    corr = learn_correction(FakeMMcDevice(MU, 1), _points(rates, [100.0] * 5), LOADS)
    assert corr is not None and corr.visible_wait == 0.0
    win = _windows([3000.0, 7000.0, 9000.0])
    assert _corrected(corr, win) == pytest.approx([100.0, 100.0, 100.0], rel=0.02)
    # bursty arrivals add wait to the method's prediction, and none of it shows either
    assert _corrected(corr, win.assign(arrival_cv2=4.0)) == pytest.approx([100.0] * 3, rel=0.02)


def test_a_burst_runs_on_the_hot_path() -> None:
    truth = ColdPath(1.0, 3.0, 2e-3)
    rates = [100.0, 500.0, 2000.0, 3000.0]
    pts = _points(rates, [1e6 / MU * float(truth.poisson(np.array([r]))[0]) for r in rates])
    corr = learn_correction(FakeMMcDevice(MU, 1), pts, LOADS)
    assert corr is not None
    win = _windows([1000.0])
    plain = _corrected(corr, win)[0]
    gaps = np.tile(np.r_[np.full(49, 20e-6), 50e-3 - 49 * 20e-6], 20)
    bursty = _corrected(corr, win, _hist(gaps))[0]
    assert bursty < 0.6 * plain
    assert bursty == pytest.approx(1e6 / MU * float(truth.gaps(_hist(gaps))[0]), rel=0.15)


def test_saturated_points_and_windows_are_not_corrected() -> None:
    rates = [100.0, 500.0, 2000.0]
    pts = _points(rates, [300.0, 200.0, 150.0])
    # a point served well under its offered rate was saturated: not an open-loop measurement
    sat = _points([9000.0], [1e6])
    sat["iops"] = 6000.0
    with_sat = learn_correction(FakeMMcDevice(MU, 1), pd.concat([pts, sat], ignore_index=True), LOADS)
    without = learn_correction(FakeMMcDevice(MU, 1), pts, LOADS)
    assert with_sat is not None and without is not None
    win = _windows([1000.0, 12_000.0])
    assert _corrected(with_sat, win) == pytest.approx(_corrected(without, win))
    pred = predict_open_loop(FakeMMcDevice(MU, 1), win, LOADS)
    mean_f, p99_f = without.factors(win, pred)
    assert mean_f[1] == 1.0 and p99_f[1] == 1.0  # the saturated window keeps the backlog prediction


def test_each_window_takes_the_nearest_measured_mix() -> None:
    reads = _points([100.0, 1000.0, 3000.0], [200.0] * 3)
    writes = _points([100.0, 1000.0, 3000.0], [400.0] * 3, write_ratio=1.0)
    corr = learn_correction(FakeMMcDevice(MU, 1), pd.concat([reads, writes], ignore_index=True), LOADS)
    assert corr is not None and len(corr.mixes) == 2
    got = [_corrected(corr, _windows([2000.0], write_ratio=wr))[0] for wr in (0.1, 0.9)]
    assert got == pytest.approx([200.0, 400.0], rel=0.1)


def test_no_usable_points_no_correction() -> None:
    pts = _points([100.0], [0.0])
    assert learn_correction(FakeMMcDevice(MU, 1), pts, LOADS) is None


def test_points_whose_mean_is_over_their_p99_are_left_out_and_counted() -> None:
    rates = [100.0, 500.0, 2000.0, 5000.0]
    mean = [200.0, 150.0, 120.0, 140.0]
    clean = learn_correction(FakeMMcDevice(MU, 1), _points(rates, mean), LOADS)
    # the same points plus one at 3,000 IO/s whose mean is 20x its p99 (a start-up transient)
    pts = pd.concat([_points(rates, mean), _points([3000.0], [130.0])], ignore_index=True)
    pts.loc[4, "latency_mean_us"] = 20 * pts.loc[4, "latency_p99_us"]
    corr = learn_correction(FakeMMcDevice(MU, 1), pts, LOADS)
    assert clean is not None and corr is not None
    assert corr.left_out["transient"] == 1 and clean.left_out["transient"] == 0
    assert "1 open-loop point(s) left out" in corr.notes()[0] and clean.notes() == []
    win = _windows([3000.0])
    assert _corrected(corr, win) == pytest.approx(_corrected(clean, win))


def test_a_corrected_p99_below_its_mean_is_raised_to_it_and_counted() -> None:
    from traces.predict.windows import consistent_tail

    values = {"mean": [10.0, 30.0], "p99": [40.0, 20.0]}
    bounds = ("", "_lower", "_upper")
    pred = pd.DataFrame({f"pred_latency_{m}_us{s}": v for m, v in values.items() for s in bounds})
    assert consistent_tail(pred) == 1
    assert pred["pred_latency_p99_us"].tolist() == [40.0, 30.0]
    assert pred["pred_latency_p99_us_upper"].tolist() == [40.0, 30.0]


def test_points_over_the_replay_paths_capacity_are_left_out_and_counted() -> None:
    # a token bucket: flat up to its cap (9,000 IO/s of the model's 10,000), a wall past it; the
    # point at 9,200 IO/s is past the wall and would drag the windows just under it up
    rates = [100.0, 1000.0, 5000.0, 8000.0]
    flat = _points(rates, [100.0] * 4)
    wall = pd.concat([flat, _points([9200.0], [5000.0])], ignore_index=True)
    win = _windows([8600.0])
    plain = learn_correction(FakeMMcDevice(MU, 1), wall, LOADS)
    capped = learn_correction(FakeMMcDevice(MU, 1), wall, LOADS, lambda rows: np.full(len(rows), 0.9))
    assert plain is not None and capped is not None
    assert plain.left_out.get("over_capacity", 0) == 0 and capped.left_out["over_capacity"] == 1
    assert "over the replay path's capacity" in " ".join(capped.notes())
    assert _corrected(plain, win)[0] > 1.5 * _corrected(capped, win)[0]
    assert _corrected(capped, win)[0] < 300.0


def test_points_at_a_token_buckets_wall_are_left_out_even_under_the_measured_capacity() -> None:
    # the fault seen once (issue 22): the replay path's capacity probed at 2,031 IO/s, so fio's point
    # served 2,012 at the wall (1.2 ms mean, p50 8 us) was kept under it, and windows at 1,800 IO/s
    # were predicted 22-104 us where the replay measured 8-9
    rates = [400.0, 1000.0, 1600.0]
    flat = _points(rates, [12.0, 10.0, 9.0])
    flat["latency_p50_us"] = [10.0, 8.5, 8.0]
    wall = _points([2012.0], [1200.0])
    wall["latency_p50_us"] = 8.0
    pts = pd.concat([flat, wall], ignore_index=True)
    win = _windows([1800.0])
    under = lambda rows: np.full(len(rows), 2031.0 / MU)  # noqa: E731 -- the cap just over the point
    clean = learn_correction(FakeMMcDevice(MU, 1), flat, LOADS, under)
    corr = learn_correction(FakeMMcDevice(MU, 1), pts, LOADS, under)
    assert clean is not None and corr is not None
    assert corr.left_out["wall"] == 1 and corr.left_out["over_capacity"] == 0 and clean.left_out["wall"] == 0
    assert any("over 10x their median" in n for n in corr.notes())
    assert _corrected(corr, win) == pytest.approx(_corrected(clean, win))
    assert _corrected(corr, win)[0] < 20.0
    # without a stored median the rule says nothing (older stores): the point is kept
    old = learn_correction(FakeMMcDevice(MU, 1), pts.drop(columns="latency_p50_us"), LOADS, under)
    assert old is not None and old.left_out["wall"] == 0 and _corrected(old, win)[0] > 20.0
