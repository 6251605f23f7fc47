"""Light load is anchored in the open-loop points: a Poisson window at a measured point's mix and rate
is predicted as that point measured it (mean and p99), whatever the closed-loop curve says; between
points it follows them, and toward capacity the closed-loop curve takes over (issue 22 item 3)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.traces.fake_devices import FakeMMcDevice
from tests.traces.test_utilisation import LOADS, MU, _points, _windows
from traces.predict.openloop import predict_open_loop
from traces.predict.utilisation import learn_correction

# measured on zram-like devices: not monotone at light load (the cold path), far under the
# closed-loop curve's 100 us service time (another engine's curve), rising toward capacity
RATES = [50.0, 300.0, 1500.0, 4000.0, 7000.0]
MEANS = [55.0, 31.0, 40.0, 48.0, 150.0]
P99S = [400.0, 90.0, 120.0, 200.0, 900.0]


def _predicted(rates: list[float]) -> tuple[np.ndarray, np.ndarray]:
    pts = _points(RATES, MEANS)
    pts["latency_p99_us"] = P99S
    model = FakeMMcDevice(MU, 1)
    corr = learn_correction(model, pts, LOADS)
    assert corr is not None
    win = _windows(rates)
    pred = predict_open_loop(model, win, LOADS)
    mean_f, p99_f = corr.factors(win, pred, None)
    return (pred["pred_latency_mean_us"].to_numpy() * mean_f, pred["pred_latency_p99_us"].to_numpy() * p99_f)


def test_at_each_measured_point_the_prediction_is_the_measurement() -> None:
    mean, p99 = _predicted(RATES)
    assert mean == pytest.approx(MEANS, rel=1e-3)
    assert p99 == pytest.approx(P99S, rel=1e-3)


def test_between_points_it_follows_them_and_toward_capacity_the_curve_rises() -> None:
    mean, _ = _predicted([800.0, 2500.0, 9000.0, 9500.0])
    # between two measured points: near them, not at the closed-loop curve's 100 us and more
    assert 31.0 * 0.8 < mean[0] < 40.0 * 1.2 and 40.0 * 0.8 < mean[1] < 48.0 * 1.2
    # past the last point the closed-loop curve's queue grows toward its capacity of 10,000 IO/s
    assert 150.0 < mean[2] < mean[3]
