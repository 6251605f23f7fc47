"""PackedForest gives exactly each scikit-learn tree's prediction, on one row and on several."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor

from modeling.estimators import packed_forest, parallel
from modeling.estimators.packed_forest import PackedForest


@pytest.fixture(scope="module")
def forest() -> tuple[ExtraTreesRegressor, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.random((300, 6)).astype(np.float32)
    y = np.sin(6 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(300)
    model = ExtraTreesRegressor(n_estimators=25, min_samples_leaf=2, random_state=0).fit(X, y)
    return model, rng.random((40, 6)).astype(np.float32)


@pytest.mark.parametrize("rows", [1, 2, 7, 40])
def test_leaf_values_equal_each_trees_prediction(forest, rows: int) -> None:
    model, X = forest
    packed = PackedForest([t.tree_ for t in model.estimators_])
    expected = np.stack([t.tree_.predict(X[:rows])[:, 0] for t in model.estimators_])
    np.testing.assert_array_equal(packed.leaf_values(X[:rows]), expected)


def test_a_row_on_a_threshold_goes_left_as_in_scikit_learn(forest) -> None:
    model, _ = forest
    tree = model.estimators_[0].tree_
    x = np.full((1, 6), 0.5, dtype=np.float32)
    x[0, tree.feature[0]] = np.float32(tree.threshold[0])
    packed = PackedForest([tree])
    np.testing.assert_array_equal(packed.leaf_values(x)[0], tree.predict(x)[:, 0])


def test_tree_by_tree_spreads_large_batches_without_changing_a_number(forest, monkeypatch) -> None:
    model, _ = forest
    trees = [t.tree_ for t in model.estimators_]
    X = np.random.default_rng(5).random((3000, 6)).astype(np.float32)
    expected = np.stack([t.predict(X)[:, 0] for t in trees])
    monkeypatch.setattr(parallel, "cpus", lambda: 3)  # threads even on a 1-CPU runner
    calls: list[int] = []
    real = parallel._executor

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(parallel, "_executor", counting)
    median = lambda v: np.median(v, axis=0)  # noqa: E731
    np.testing.assert_array_equal(packed_forest.tree_by_tree(trees, X, median), median(expected))
    assert calls, "a 3000-row batch should have gone to the thread pool"
    np.testing.assert_array_equal(packed_forest.tree_by_tree(trees, X[:10], median), median(expected[:, :10]))


def test_a_large_batch_is_predicted_once_per_cell_with_the_same_numbers(forest, monkeypatch) -> None:
    """Rows on few levels of some features (a sweep's grid) share cells: each cell is predicted once."""
    from modeling.estimators.trees import ExtraTreesModel

    rng = np.random.default_rng(8)
    # measured on a grid (a sweep's few levels), asked anywhere along the first field
    X = rng.choice([0.0, 0.3, 0.5, 0.7, 1.0], (300, 4)).astype(np.float32)
    X[:, 1:] = rng.choice([0.1, 0.9], (300, 3))
    y = np.sin(6 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(300)
    model = ExtraTreesModel(n_estimators=20, min_samples_leaf=1).fit(X, y + 3.0)
    batch = rng.random((4000, 4)).astype(np.float32)
    batch[:, 1:] = rng.choice([0.1, 0.9], (4000, 3))
    # rows at the float32 nearest a threshold, after other rows of their cells
    batch[-50:, 0] = np.float32(model.cells_.thresholds[0][:50])
    rows: list[int] = []
    real = packed_forest.tree_by_tree
    monkeypatch.setattr(
        "modeling.estimators.trees.tree_by_tree", lambda t, x, c: rows.append(len(x)) or real(t, x, c)
    )
    got = model.predict_fast(batch)
    assert rows and rows[0] < 0.75 * len(batch), "the batch is predicted once per distinct cell"
    expected = np.mean(np.stack([t.predict(batch)[:, 0] for t in model.trees_]), axis=0)
    np.testing.assert_array_equal(got, np.sign(expected) * np.expm1(np.abs(expected)))
    rows.clear()
    distinct = rng.random((4000, 4)).astype(np.float32)  # nearly every row its own cell: no detour
    np.testing.assert_array_equal(model.predict_fast(distinct), model.predict_fast(distinct[::-1])[::-1])
    assert rows == [4000, 4000]
