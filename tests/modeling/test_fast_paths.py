"""The single-row path answers exactly what the matrix path answers.

One test per estimator family: a device model whose every metric (the four percentiles
too) uses that family, asked row by row (modeling/serving/row_path.py) and as a matrix
(modeling/serving/matrix_path.py), for every scope choice, at workloads inside and beyond
the measured load and size (the physics of modeling/serving/physics/, whose single-row
forms sit beside the matrix ones); ``DeviceModel.predict``'s choice of path for every
form of input; the family's own one-row estimator path against its batch path; and the
feature rows against the feature matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from modeling.errors import InvalidInput
from modeling.estimators.families import ESTIMATORS
from modeling.features import FEATURE_SETS, compute_features, features_row
from modeling.serving.physics.extrapolation import extrapolation_row
from modeling.serving import device_model
from modeling.serving.device_model import DeviceModel
from modeling.serving.metric_models import ScopeModel
from modeling.serving.physics.ladder import needed_rungs
from modeling.training.fit import fit_device_model
from modeling.training.selection import Candidate, make_candidate
from modeling.workload import REGION_NAMES, SERVED_METRICS, Workload, WORKLOAD_FIELDS
from modeling.workload_matrix import outstanding_io
from tests.modeling.conftest import synthetic_rows
from tests.modeling.test_physics import SMALL_GRID, with_percentiles

FAMILIES: dict[str, Candidate] = {
    "cart": make_candidate("extended", "cart", min_samples_leaf=1, linear_base=True),
    "extra_trees": make_candidate(
        "extended", "extra_trees", n_estimators=10, min_samples_leaf=3, loss="relative"
    ),
    "xgboost": make_candidate("extended", "xgboost", n_estimators=30, max_depth=4, learning_rate=0.3),
    "gp": make_candidate("extended", "gp", n_restarts=0),
    "load_gated": make_candidate("extended", "load_gated", n_col=5, qd_col=1, nj_col=4, n_estimators=30),
}


def test_every_estimator_family_is_covered() -> None:
    assert set(FAMILIES) == set(ESTIMATORS), "a new estimator family must join this test"


# load_gated's fit is the everyday suite's longest setup (12 s on 2 cores): it runs with the slow set
@pytest.fixture(scope="module", params=[pytest.param(f, marks=pytest.mark.slow) if f == "load_gated" else f
                                        for f in sorted(FAMILIES)])
def family_model(request: pytest.FixtureRequest) -> DeviceModel:
    # region models (the scope choices) come from the cheap families; a Gaussian process
    # per region and metric would cost minutes and exercise the same row path. The Gaussian
    # processes also learn from the smaller grid (72 rows, not 128: a third of the time),
    # which the workloads below exceed in load and size just the same
    slow = request.param in ("gp", "load_gated")
    rows = with_percentiles(synthetic_rows(noise=0.1, seed=1, grid=SMALL_GRID if slow else None))
    model, _ = fit_device_model(rows, folds=2, candidates=[FAMILIES[request.param]], regions=not slow)
    return model


def _workloads(n: int = 200, seed: int = 5) -> np.ndarray:
    """Workloads inside and outside the trained range, in every region, defaults filled."""
    rng = np.random.default_rng(seed)
    w = np.column_stack(
        [
            rng.choice([0.0, 0.3, 0.7, 1.0, 0.55], n),
            rng.choice([1, 3, 4, 16, 64, 200], n),
            rng.choice([4096, 8192, 65536, 1 << 20], n),
            rng.choice([0.0, 1.0, 0.4], n),
            rng.choice([1, 2, 4, 9], n),
        ]
    ).astype(float)
    return np.column_stack([w, w[:, 2], w[:, 2], w[:, 3], w[:, 3]])


def assert_row_path_equals_matrix_path(model: DeviceModel, w: np.ndarray, step: int) -> None:
    """Every ``step``-th workload's single-row answer equals its matrix answer, for every scope choice."""
    choices = ["auto", "global"] + [r for r in REGION_NAMES if r in model.specs["iops"].scopes]
    for choice in choices:
        batch = model.predict_matrix(w, model=choice)
        for i in range(0, len(w), step):
            row = model.predict_row(w[i].tolist(), model=choice)
            for metric, (value, lower, upper, extrap, scope) in row.items():
                bv, bl, bu, be, bs = (a[i] for a in batch[metric])
                assert (scope, extrap) == (bs, be), (choice, metric, i)
                # equal up to float summation order (a Gaussian process sums its kernel by BLAS)
                np.testing.assert_allclose([value, lower, upper], [bv, bl, bu], rtol=1e-9)


def test_device_row_path_equals_the_matrix_path(family_model: DeviceModel) -> None:
    w = _workloads()
    limits = family_model.limits
    assert limits is not None and set(family_model.metrics) == set(SERVED_METRICS)
    # the rows go beyond the measured load and size, where the physics extends the models
    assert (outstanding_io(w) > limits.max_outstanding).any()
    assert (w[:, WORKLOAD_FIELDS.index("request_size")] > limits.hi[2]).any()
    assert_row_path_equals_matrix_path(family_model, w, step=5)
    for i in range(0, len(w), 7):  # a subset of metrics: the laws' dependencies computed apart
        for metric in SERVED_METRICS:
            one = family_model.predict_row(w[i].tolist(), metrics=[metric])
            full = family_model.predict_row(w[i].tolist())
            assert one.keys() == {metric}
            np.testing.assert_allclose(one[metric][:3], full[metric][:3], rtol=1e-12)
    assert family_model.predict_row(w[0].tolist(), metrics=["iops"]).keys() == {"iops"}
    with pytest.raises(InvalidInput, match="unknown model"):
        family_model.predict_row(w[0].tolist(), model="fastest")


def test_rungs_skipped_by_their_bounds_change_no_answer(family_model: DeviceModel, monkeypatch) -> None:
    """Both paths skip the rungs a load-gated model's bounds rule out; evaluating them all agrees."""
    w = _workloads(120, seed=11)
    kept: list[tuple[int, int]] = []
    real = needed_rungs

    def counting(*a: Any) -> np.ndarray:
        out = real(*a)
        kept.append((int(out.sum()), len(out)))
        return out

    monkeypatch.setattr("modeling.serving.matrix_path.needed_rungs", counting)
    pruned = family_model.predict_matrix(w)
    one = [family_model.predict_row(w[i].tolist()) for i in range(0, len(w), 4)]
    if any(hasattr(est, "bounds") for _, est in family_model.specs["iops"].scopes["global"].members):
        assert kept and kept[0][0] < kept[0][1], "some rungs are skipped"
    else:
        assert not kept, "only the load-gated model has bounds"
    monkeypatch.setattr(ScopeModel, "bounds", lambda self, features: None)
    full = family_model.predict_matrix(w)
    for metric, (value, lower, upper, _, _) in full.items():
        np.testing.assert_allclose(pruned[metric][0], value, rtol=1e-12)
        np.testing.assert_allclose(pruned[metric][2], upper, rtol=1e-12)
        for k, i in enumerate(range(0, len(w), 4)):
            np.testing.assert_allclose(one[k][metric][:3], [value[i], lower[i], upper[i]], rtol=1e-9)


def test_estimator_one_row_path_equals_its_batch(family_model: DeviceModel) -> None:
    w = _workloads(60, seed=9)
    checked = 0
    for spec in family_model.specs.values():
        for sm in spec.scopes.values():
            for fs, est in sm.members:
                X32 = compute_features(w, fs)
                batch = est.predict_fast(X32)
                single = np.concatenate([est.predict_fast(X32[i : i + 1]) for i in range(len(X32))])
                np.testing.assert_allclose(single, batch, rtol=1e-9)
                gate = getattr(est, "parts_", {}).get("gate")
                for gp in [est, gate]:
                    if gp is not None and hasattr(gp, "slope") and getattr(gp, "nu", 0.5) != 0.5:
                        d = np.ones(X32.shape[1], dtype=np.float32)
                        one = np.concatenate([gp.slope(X32[i : i + 1], d) for i in range(len(X32))])
                        # one row and a block sum in another order: ~1e-9 relative near 0
                        np.testing.assert_allclose(one, gp.slope(X32, d), rtol=1e-8, atol=1e-10)
                checked += 1
    assert checked


def test_predict_picks_the_path_and_every_form_answers_the_same(
    family_model: DeviceModel, monkeypatch: Any
) -> None:
    """One public entry point: a workload, a few, many, a matrix or columns; the same numbers."""
    w = _workloads(12, seed=3)
    taken: list[str] = []
    for name in ("row", "matrix"):
        real = getattr(device_model, f"predict_{name}")
        monkeypatch.setattr(
            device_model, f"predict_{name}", lambda *a, _r=real, _n=name: taken.append(_n) or _r(*a)
        )
    want = family_model.predict_matrix(w)
    workloads = [Workload(**dict(zip(WORKLOAD_FIELDS, r, strict=True))) for r in w.tolist()]
    columns = {f: w[:, i] for i, f in enumerate(WORKLOAD_FIELDS)}
    forms: list[tuple[Any, list[str]]] = [
        (workloads[0], ["row"]),
        (workloads[:2], ["row", "row"]),
        (w[:2], ["row", "row"]),
        (workloads, ["matrix"]),
        (w, ["matrix"]),
        (columns, ["matrix"]),
    ]
    for form, path in forms:
        taken.clear()
        answers = family_model.predict(form)
        assert taken == path
        for i in range(len(answers)):
            for metric, got in answers.row(i).items():
                assert (got[3], got[4]) == (want[metric][3][i], want[metric][4][i])
                np.testing.assert_allclose(got[:3], [a[i] for a in want[metric][:3]], rtol=1e-9)
            assert answers.far(i) == family_model.extrapolation(w[i : i + 1])[0]
        for metric, arrays in answers.columns.items():  # the row path's answers as columns too
            np.testing.assert_allclose(arrays[0], want[metric][0][: len(answers)], rtol=1e-9)
            assert arrays[4].tolist() == want[metric][4][: len(answers)].tolist()


def test_extrapolation_row_equals_the_matrix_twin(family_model: DeviceModel) -> None:
    w = _workloads(80, seed=4)
    rows = [extrapolation_row(r.tolist(), family_model.row_limits) for r in w]
    assert rows == family_model.extrapolation(w)
    asked = Workload(write_ratio=0, queue_depth=512, request_size=1 << 22, randomness=1)
    far = family_model.predict_one(asked)
    assert far.extrapolation["outstanding_io"] > 1 and far.predictions["iops"].extrapolated


@pytest.mark.parametrize("feature_set", FEATURE_SETS)
def test_feature_row_equals_the_feature_matrix(feature_set: str) -> None:
    w = _workloads(50, seed=2)
    matrix = compute_features(w, feature_set)
    rows = np.vstack([features_row(w[i].tolist(), feature_set) for i in range(len(w))])
    np.testing.assert_array_equal(rows, matrix)
