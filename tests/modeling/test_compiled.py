"""Lookup-table compilation gives exactly the model's own predictions."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.estimators.compiled import compile_estimator
from modeling.estimators.families import CartRegressor, ExtraTreesModel, XGBoostModel
from modeling.features import compute_features
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import synthetic_rows


@pytest.mark.parametrize(
    "est",
    [
        XGBoostModel(n_estimators=50, max_depth=6),
        XGBoostModel(n_estimators=30, linear_base=True, objective="absolute"),
        CartRegressor(),
        CartRegressor(linear_base=True, min_samples_leaf=2),
    ],
)
def test_compiled_matches_model_on_and_between_grid_points(est):
    rows = synthetic_rows()
    X = compute_features(workload_matrix(rows), "extended")
    est.fit(X, rows["iops"].to_numpy())
    compiled = compile_estimator(est)
    assert compiled is not None
    rng = np.random.default_rng(1)
    between = X[rng.integers(0, len(X), 500)] + rng.normal(0, 0.5, (500, X.shape[1])).astype(np.float32)
    queries = np.ascontiguousarray(np.vstack([X, between]), dtype=np.float32)
    np.testing.assert_allclose(compiled.predict_fast(queries), est.predict_fast(queries), rtol=1e-9)
    # a few rows take the plain-Python search (SMALL_ROWS): the same cells as searchsorted
    few = np.concatenate([compiled.cell_index(queries[k : k + 3]) for k in range(0, 60, 3)])
    assert few.tolist() == compiled.cell_index(queries[:60]).tolist()
    assert len(set(few.tolist())) > 5


@pytest.mark.parametrize(
    "est", [XGBoostModel(n_estimators=50, max_depth=6), ExtraTreesModel(n_estimators=20)]
)
def test_too_fine_a_grid_is_not_compiled(est):
    rng = np.random.default_rng(0)
    X = rng.random((400, 6)).astype(np.float32)
    est.fit(X, rng.random(400) + 1)
    assert compile_estimator(est) is None  # continuous features: the model is used directly
