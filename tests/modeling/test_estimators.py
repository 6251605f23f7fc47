"""Every estimator passes scikit-learn's common estimator checks; the feature transformer works."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from modeling.estimators.families import (
    CartRegressor,
    ExtraTreesModel,
    GaussianProcessModel,
    LoadGatedModel,
    XGBoostModel,
)
from modeling.features import FEATURE_NAMES, compute_features
from modeling.workload_matrix import workload_matrix


@parametrize_with_checks(
    [
        CartRegressor(),
        CartRegressor(linear_base=True, log_target=False),
        ExtraTreesModel(n_estimators=5),
        XGBoostModel(n_estimators=10),
        XGBoostModel(n_estimators=10, linear_base=True, objective="absolute"),
        ExtraTreesModel(n_estimators=5, loss="relative", min_samples_leaf=2),
        CartRegressor(loss="relative", log_target=False),
        GaussianProcessModel(n_restarts=0),
        GaussianProcessModel(n_restarts=0, nu=2.5, linear_base=True, log_target=False),
        # a gate fitted on a 40-row subsample: the subsampling path, and a cheap Gaussian process
        LoadGatedModel(n_estimators=10, gate_rows=40),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_xgboost_rejects_unknown_objective():
    with pytest.raises(ValueError, match="objective"):
        XGBoostModel(objective="nope").fit(np.ones((4, 2)), np.arange(4.0))


def test_tree_losses_and_gp_options_are_checked():
    X, y = np.arange(8.0).reshape(-1, 1), np.arange(1.0, 9.0)
    with pytest.raises(ValueError, match="loss"):
        ExtraTreesModel(loss="huber").fit(X, y)
    with pytest.raises(ValueError, match="nu"):
        GaussianProcessModel(nu=3.0).fit(X, y)
    with pytest.raises(ValueError, match="limited to 4 rows"):
        GaussianProcessModel(max_rows=4).fit(X, y)


def test_gp_prediction_matches_scikit_learn():
    """The stored arrays predict what scikit-learn's own fitted process predicts."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 5, size=(60, 3))
    X[:, 2] = 7.0  # a constant column is dropped, as on sweeps with one request size
    y = np.exp(0.4 * X[:, 0]) * (1.5 + np.sin(X[:, 1]))
    model = GaussianProcessModel(n_restarts=1).fit(X, y)
    z = np.log1p(y)
    Z = (X[:, :2] - X[:, :2].mean(axis=0)) / X[:, :2].std(axis=0)
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(np.ones(2), (1e-2, 1e3), nu=1.5) + WhiteKernel(
        1e-2, (1e-8, 1.0)
    )
    reference = GaussianProcessRegressor(kernel, n_restarts_optimizer=1, random_state=0)
    reference.fit(Z, (z - z.mean()) / z.std())
    test = rng.uniform(0, 5, size=(25, 3))
    test[:, 2] = 7.0
    Zt = (test[:, :2] - X[:, :2].mean(axis=0)) / X[:, :2].std(axis=0)
    expected = np.expm1(reference.predict(Zt) * z.std() + z.mean())
    np.testing.assert_allclose(model.predict(test), expected, rtol=1e-6)


def test_gp_extrapolates_a_trend_where_trees_plateau():
    """Held-out ends of a power law: the process follows the trend, a tree repeats its edge."""
    x = np.arange(1.0, 8.0)[:, None]  # log2 of queue depth 2..128
    y = 1000.0 * 2.0 ** (0.8 * x[:, 0])
    inner = slice(1, -1)
    gp = GaussianProcessModel().fit(x[inner], y[inner])
    cart = CartRegressor().fit(x[inner], y[inner])
    ends = [0, -1]
    gp_err = np.abs(gp.predict(x[ends]) / y[ends] - 1)
    cart_err = np.abs(cart.predict(x[ends]) / y[ends] - 1)
    assert np.all(gp_err < 0.1) and np.all(cart_err > 0.4)


def _closed_loop(qd: np.ndarray, nj: np.ndarray) -> np.ndarray:
    """IOPS of a closed-loop device: 100 us service time, 50k IOPS ceiling, a soft knee."""
    n = qd * nj
    return 1.0 / (1.0 / (n / 100e-6) ** 4 + 1.0 / 50e3**4) ** 0.25


def test_load_gated_model_gets_both_ends_of_a_sweep_right():
    """Hold out the lightest and heaviest loads: plain trees repeat a neighbour, the gate follows the law."""
    levels = 2.0 ** np.arange(7)
    qd, nj = (a.ravel() for a in np.meshgrid(levels, levels))
    X = np.column_stack([np.log2(qd), np.log2(nj), np.log2(qd * nj)])
    y = _closed_loop(qd, nj)
    ends = np.isin(qd * nj, [1, 4096])
    gated = LoadGatedModel(n_col=2, qd_col=0, nj_col=1).fit(X[~ends], y[~ends])
    plain = XGBoostModel(n_estimators=300, max_depth=6, learning_rate=0.05).fit(X[~ends], y[~ends])
    gated_err = np.abs(gated.predict(X[ends]) / y[ends] - 1)
    plain_err = np.abs(plain.predict(X[ends]) / y[ends] - 1)
    assert gated_err.max() < 0.2 and plain_err.max() > 0.4
    # elasticity: IOPS grows with load while the device is idle, not once it is saturated
    e = gated.elasticity(np.ascontiguousarray(X, dtype=np.float32))
    assert e[(qd * nj) == 2].min() > 0.7 and e[(qd * nj) >= 512].max() < 0.2


def test_load_gated_model_checks_its_inputs():
    X, y = np.arange(16.0).reshape(8, 2), np.arange(1.0, 9.0)
    with pytest.raises(ValueError, match="positive"):
        LoadGatedModel().fit(X, y - 5)
    with pytest.raises(ValueError, match="load columns"):
        LoadGatedModel(n_col=5).fit(X, y)


def test_relative_loss_ignores_a_spike_that_squared_loss_chases():
    """One tenfold outlier among equal neighbours: the relative loss predicts the typical value."""
    X = np.repeat(np.arange(4.0), 5)[:, None]
    y = np.full(len(X), 100.0)
    y[7] = 1000.0  # a tail-latency spike
    rel = ExtraTreesModel(n_estimators=20, loss="relative", min_samples_leaf=5).fit(X, y)
    sq = ExtraTreesModel(n_estimators=20, min_samples_leaf=5).fit(X, y)
    assert rel.predict([[1.0]])[0] == pytest.approx(100.0, rel=1e-6)
    assert sq.predict([[1.0]])[0] > 130.0


def test_log_target_fits_power_law_better_than_raw():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, size=(200, 1))
    y = 2.0 ** x[:, 0]
    test = np.linspace(0.5, 9.5, 50)[:, None]
    truth = 2.0 ** test[:, 0]
    log_err = np.mean(np.abs(XGBoostModel(n_estimators=50).fit(x, y).predict(test) / truth - 1))
    raw_err = np.mean(
        np.abs(XGBoostModel(n_estimators=50, log_target=False).fit(x, y).predict(test) / truth - 1)
    )
    assert log_err < raw_err


def test_feature_sets_and_defaults():
    frame = pd.DataFrame(
        {
            "write_ratio": [0.5],
            "queue_depth": [8],
            "request_size": [4096],
            "randomness": [1.0],
            "numjobs": [np.nan],
            "write_size": [65536],
        }
    )
    w = workload_matrix(frame)
    ext = compute_features(w, "extended")
    names = FEATURE_NAMES["extended"]
    assert ext.shape == (1, len(names))
    assert ext[0, names.index("log2_numjobs")] == 0.0  # numjobs defaulted to 1
    assert ext[0, names.index("log2_outstanding_io")] == 3.0
    assert ext[0, names.index("log2_read_size")] == 12.0  # read_size defaulted to request_size
    assert ext[0, names.index("log2_write_size")] == 16.0
    assert ext[0, names.index("log2_mean_size")] == pytest.approx(np.log2((4096 + 65536) / 2))
    assert compute_features(w, "basic").shape == (1, len(FEATURE_NAMES["basic"])) == (1, 4)
