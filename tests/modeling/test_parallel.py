"""Large batches split into row blocks over threads give the serial numbers."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.estimators import parallel
from modeling.estimators.gaussian_process import GaussianProcessModel


def test_by_row_blocks_covers_every_row_once_in_order(monkeypatch) -> None:
    monkeypatch.setattr(parallel, "cpus", lambda: 3)
    seen: list[tuple[int, int]] = []

    def fn(start: int, stop: int) -> np.ndarray:
        seen.append((start, stop))
        return np.arange(start, stop)

    np.testing.assert_array_equal(parallel.by_row_blocks(fn, 5000), np.arange(5000))
    assert len(seen) == 3 and sorted(seen)[0][0] == 0 and sorted(seen)[-1][1] == 5000
    seen.clear()
    parallel.by_row_blocks(fn, 100)  # small inputs stay on the calling thread, in one block
    assert seen == [(0, 100)]


@pytest.fixture(scope="module")
def gp() -> GaussianProcessModel:
    rng = np.random.default_rng(2)
    X = rng.random((120, 4))
    y = np.exp(1 + X[:, 0] + 0.5 * np.sin(4 * X[:, 1]))
    return GaussianProcessModel(n_restarts=0).fit(X, y)


def test_gaussian_process_batch_equals_the_serial_result(gp, monkeypatch) -> None:
    X32 = np.random.default_rng(3).random((5000, 4)).astype(np.float32)
    direction = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    monkeypatch.setattr(parallel, "cpus", lambda: 1)
    serial_pred, serial_slope = gp.predict_fast(X32), gp.slope(X32, direction)
    monkeypatch.setattr(parallel, "cpus", lambda: 3)
    np.testing.assert_allclose(gp.predict_fast(X32), serial_pred, rtol=1e-9)
    np.testing.assert_allclose(gp.slope(X32, direction), serial_slope, rtol=1e-9, atol=1e-15)
    # and a single row agrees with its row of the batch
    np.testing.assert_allclose(gp.slope(X32[7:8], direction), serial_slope[7:8], rtol=1e-9)


@pytest.mark.parametrize("nu", [1.5, 2.5])
@pytest.mark.parametrize("rows", [1, 3000])
def test_gp_slope_is_the_derivative_of_its_prediction(nu: float, rows: int, monkeypatch) -> None:
    monkeypatch.setattr(parallel, "cpus", lambda: 2)
    rng = np.random.default_rng(4)
    X = rng.random((80, 3))
    y = 2.0 + X[:, 0] ** 2 + np.sin(3 * X[:, 1])
    model = GaussianProcessModel(nu=nu, n_restarts=0, log_target=False).fit(X, y)
    Q = rng.random((rows, 3))
    direction = np.array([0.3, -1.0, 0.5])
    h = 1e-3  # inputs are rounded to float32 inside predict: a smaller step would be rounding noise
    numeric = (model.predict(Q + h * direction) - model.predict(Q - h * direction)) / (2 * h)
    analytic = model.slope(Q.astype(np.float32), direction.astype(np.float32))
    np.testing.assert_allclose(analytic, numeric, rtol=2e-3, atol=2e-3)
