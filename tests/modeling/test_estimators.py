"""Every estimator passes scikit-learn's common estimator checks; the feature transformer works."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from modeling.estimators import CartRegressor, ExtraTreesModel, XGBoostModel
from modeling.features import FEATURE_NAMES, WorkloadFeatures, compute_features, workload_matrix


@parametrize_with_checks(
    [
        CartRegressor(),
        CartRegressor(linear_base=True, log_target=False),
        ExtraTreesModel(n_estimators=5),
        XGBoostModel(n_estimators=10),
        XGBoostModel(n_estimators=10, linear_base=True, objective="absolute"),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_xgboost_rejects_unknown_objective():
    with pytest.raises(ValueError, match="objective"):
        XGBoostModel(objective="nope").fit(np.ones((4, 2)), np.arange(4.0))


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
    basic = WorkloadFeatures("basic").fit(frame)
    assert list(basic.get_feature_names_out()) == list(FEATURE_NAMES["basic"])
    assert basic.transform(frame).shape == (1, 4)
    with pytest.raises(ValueError, match="feature set"):
        WorkloadFeatures("fancy").fit(frame)
