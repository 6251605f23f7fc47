"""The percentile ladder: each rung learned as a ratio to the mean or as its own model,
chosen by cross-validation, served in order, and kept through the registry (issue 13)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from modeling.serving.registry import ModelRegistry, save_model
from modeling.training.fit import SCREEN_MARGIN, fit_device_model
from modeling.training.physics_check import dense_grid, law_violations
from modeling.workload import PERCENTILE_METRICS
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import fast_candidates, synthetic_rows

LADDER = ("latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p99_9_us")
STALL_US = 20_000.0
"""The known far tail of the synthetic device: a fixed stall (garbage collection), whatever the load."""


def known_tail(rows: pd.DataFrame, seed: int = 5) -> pd.DataFrame:
    """A device whose distribution is known: the body in proportion to the mean, p99.9 a stall."""
    rng = np.random.default_rng(seed)
    mean = rows["latency_mean_us"].to_numpy()
    n = len(rows)
    return rows.assign(
        latency_p50_us=mean * 0.7 * rng.lognormal(0, 0.02, n),
        latency_p90_us=mean * 1.5 * rng.lognormal(0, 0.02, n),
        latency_p99_us=mean * 3.0 * rng.lognormal(0, 0.02, n),
        latency_p99_9_us=np.maximum(STALL_US, mean * 3.5) * rng.lognormal(0, 0.02, n),
    )


@pytest.fixture(scope="module")
def device() -> pd.DataFrame:
    return known_tail(synthetic_rows(noise=0.02, seed=11))


@pytest.fixture(scope="module")
def fitted(device):
    return fit_device_model(device, folds=3, candidates=fast_candidates(), regions=False)


def test_each_rung_is_learned_the_way_that_fits_it(fitted):
    """The stall does not follow the mean: its rung gets its own model; the choice is in the report."""
    _, report = fitted
    for m in LADDER:
        entry = report["metrics"][m]
        phys = entry["physics"]
        assert "ratio_cv_mre" in phys
        scored = {k: v for k, v in phys.items() if k in ("ratio_cv_mre", "direct_cv_mre")}
        # the rung's mode is the one with the lower CV error of those it fitted in full
        assert phys[f"{entry['mode']}_cv_mre"] == min(scored.values())
        assert entry["global"]["cv_fold_std"] >= 0
    stall = report["metrics"]["latency_p99_9_us"]
    assert stall["mode"] == "direct"
    assert stall["physics"]["screen_cv_mre"] < stall["physics"]["ratio_cv_mre"]
    ladder = report["percentile_ladder"]
    assert set(ladder) == set(LADDER)
    assert all(0.0 <= v < 0.10 for v in ladder.values()), ladder


def test_a_rung_whose_own_model_cannot_win_is_screened_out(fitted):
    """A rung that is a fixed multiple of the mean: no full own-model selection, no region models."""
    _, report = fitted
    screened = [m for m in LADDER[:2] if "direct_cv_mre" not in report["metrics"][m]["physics"]]
    assert screened, {m: report["metrics"][m]["physics"] for m in LADDER}
    for m in screened:
        entry = report["metrics"][m]
        assert entry["mode"] == "ratio" and entry["regions"] == {}
        assert entry["physics"]["screen_cv_mre"] >= entry["physics"]["ratio_cv_mre"] * SCREEN_MARGIN


def test_a_ratio_rung_fits_no_region_models(device):
    """With regions on, a rung served as a ratio has none (only a rung with its own model does)."""
    model, report = fit_device_model(device, folds=3, candidates=fast_candidates())
    assert any(report["metrics"]["iops"]["regions"]), "the device has no region to test with"
    for m in PERCENTILE_METRICS:
        entry = report["metrics"][m]
        assert bool(entry["regions"]) == (entry["mode"] == "direct"), (m, entry["mode"])
        assert set(model.specs[m].scopes) == ({"global"} | set(entry["regions"]))


def test_the_known_tail_is_predicted_on_unseen_workloads(device):
    """Trained on a random two thirds of the workloads, the ladder is within 10 % on the rest."""
    w = workload_matrix(device)
    train = np.random.default_rng(0).random(len(w)) < 2 / 3
    model, _ = fit_device_model(device.loc[train], folds=3, candidates=fast_candidates(), regions=False)
    out = model.predict_matrix(w[~train], metrics=list(LADDER))
    for m in LADDER:
        truth = device.loc[~train, m].to_numpy()
        mre = float(np.mean(np.abs(out[m][0] - truth) / truth))
        assert mre < 0.10, (m, mre)
        # each rung has its own interval, and it holds the value
        assert np.all(out[m][1] <= out[m][0]) and np.all(out[m][0] <= out[m][2])
        assert np.all(out[m][2] > out[m][1])


def test_the_ladder_is_served_in_order_on_a_dense_grid(fitted):
    model, _ = fitted
    found = law_violations(model, dense_grid(queue_depths=(1, 2, 8, 64, 1024), numjobs=(1, 4, 64)), 5)
    assert found["percentile_order"] == 0 and found["p99_below_mean"] == 0


def test_a_ladder_with_rungs_of_both_kinds_survives_the_registry(datadir, fitted):
    model, report = fitted
    modes = {model.specs[m].mode for m in LADDER}
    assert "direct" in modes  # the stall rung; the others may be either
    datadir.catalog.ensure_device(model.device)
    save_model(datadir, model, report, activate=True)
    loaded = ModelRegistry(datadir).load(model.device)
    assert {m: loaded.specs[m].mode for m in LADDER} == {m: model.specs[m].mode for m in LADDER}
    w = dense_grid(queue_depths=(1, 16, 256), numjobs=(1, 8), sizes=(4096, 65536))
    a, b = model.predict_matrix(w, metrics=list(LADDER)), loaded.predict_matrix(w, metrics=list(LADDER))
    for m in LADDER:
        for i in range(3):
            np.testing.assert_allclose(a[m][i], b[m][i], rtol=1e-6)


def test_order_is_anchored_on_p99():
    """Crossing rungs: above p99 raised to it, below lowered to it, p99 only raised to the mean."""
    from modeling.serving.physics.laws import order_percentiles

    values = {
        "latency_mean_us": np.array([50.0, 50.0]),
        "latency_p50_us": np.array([120.0, 10.0]),
        "latency_p90_us": np.array([90.0, 20.0]),
        "latency_p99_us": np.array([100.0, 40.0]),
        "latency_p99_9_us": np.array([80.0, 400.0]),
    }
    row = {m: float(v[0]) for m, v in values.items()}
    order_percentiles(values)
    assert values["latency_p99_us"].tolist() == [100.0, 50.0]  # the second raised to its mean
    assert values["latency_p99_9_us"].tolist() == [100.0, 400.0]
    assert values["latency_p90_us"].tolist() == [90.0, 20.0]
    assert values["latency_p50_us"].tolist() == [90.0, 10.0]
    order_percentiles(row, min, max)  # one workload's floats: the same law
    assert row == {m: float(v[0]) for m, v in values.items()}


def test_p99_does_not_depend_on_which_rungs_are_asked(fitted):
    """A request for p99 alone skips the other rungs' models and gets the same p99."""
    model, _ = fitted
    w = dense_grid(queue_depths=(1, 8, 64), numjobs=(1, 4))
    alone = model.predict_matrix(w, metrics=["latency_p99_us"])["latency_p99_us"][0]
    every = model.predict_matrix(w)["latency_p99_us"][0]
    np.testing.assert_array_equal(alone, every)
    assert set(model.predict_matrix(w, metrics=["latency_p50_us"])) == {"latency_p50_us"}
