"""The physics of the serving path: laws on a dense grid for every estimator family,
the bandwidth cap, the extrapolation fields, the percentile order (issue 13)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from modeling.serving.physics.limits import BANDWIDTH_TOLERANCE, PhysicsLimits
from modeling.serving.physics.extrapolation import extrapolation
from modeling.training.fit import fit_device_model
from modeling.training.physics_check import dense_grid, law_violations
from modeling.training.selection import make_candidate
from modeling.workload import MIB, Workload, WORKLOAD_FIELDS
from tests.modeling.conftest import synthetic_rows

FAMILIES = {
    "cart": make_candidate("extended", "cart", min_samples_leaf=1, linear_base=True),
    "extra_trees": make_candidate("extended", "extra_trees", n_estimators=10, min_samples_leaf=2),
    "xgboost": make_candidate("extended", "xgboost", n_estimators=40, max_depth=4, learning_rate=0.3),
    "gp": make_candidate("extended", "gp", n_restarts=0),
    "load_gated": make_candidate("extended", "load_gated", n_col=5, qd_col=1, nj_col=4, n_estimators=30),
}
SMALL_GRID = {
    "write_ratio": (0.0, 0.5, 1.0),
    "queue_depth": (1, 4, 16),
    "request_size": (4096, 65536),
    "randomness": (0.0, 1.0),
    "numjobs": (1, 2),
}


def with_percentiles(rows: pd.DataFrame, seed: int = 3) -> pd.DataFrame:
    """The synthetic rows with a p50/p90/p99.9 each (noisy, so the models may cross them)."""
    rng = np.random.default_rng(seed)
    mean = rows["latency_mean_us"].to_numpy()
    p99 = rows["latency_p99_us"].to_numpy()
    n = len(rows)
    return rows.assign(
        latency_p50_us=mean * 0.8 * rng.lognormal(0, 0.2, n),
        latency_p90_us=mean * 1.6 * rng.lognormal(0, 0.2, n),
        latency_p99_9_us=p99 * 1.5 * rng.lognormal(0, 0.2, n),
    )


@pytest.fixture(scope="module")
def small_rows() -> pd.DataFrame:
    """A device measured at sizes up to 64 KiB and up to 32 I/Os in flight, with percentiles."""
    return with_percentiles(synthetic_rows(noise=0.05, seed=2, grid=SMALL_GRID))


@pytest.fixture(scope="module")
def trained(small_rows):
    model, _ = fit_device_model(small_rows, folds=3, candidates=[FAMILIES["xgboost"]])
    return model


# load_gated's and gp's fits and dense grids take 7-14 s on 2 cores: those families run with
# the slow set (the everyday suite keeps the tree families, which the service defaults to)
SLOW_FAMILIES = ("gp", "load_gated")


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f in SLOW_FAMILIES else f
                                    for f in sorted(FAMILIES)])
def test_no_law_is_broken_on_a_dense_grid(small_rows, family):
    """Beyond the measured load and size and inside, every family's answers obey the laws."""
    model, _ = fit_device_model(small_rows, folds=3, candidates=[FAMILIES[family]])
    grid = dense_grid(
        queue_depths=(1, 2, 4, 8, 16, 32, 64, 256, 1024),
        numjobs=(1, 2, 8, 64),
        sizes=(512, 4096, 65536, 1 << 20, 4 << 20),
    )
    found = law_violations(model, grid, n_depths=9)
    # the grid is large enough to matter: p99.9, the cap and the load laws all checked
    assert set(found) >= {
        "percentile_order",
        "p99_below_mean",
        "bandwidth_above_measured",
        "iops_per_io_rises",
        "latency_falls_with_depth",
    }
    assert found == dict.fromkeys(found, 0), found


def test_bandwidth_is_capped_at_the_measured_maximum_of_its_mix(trained, small_rows):
    peak_read = small_rows.loc[small_rows.write_ratio == 0, "bandwidth_mib_s"].max()
    assert trained.limits.bandwidth_max["read"] == pytest.approx(peak_read)
    for size in ("256k", "1m", "4m", "64m"):
        wl = Workload(write_ratio=0.0, queue_depth=16, request_size=size, randomness=0.0, numjobs=2)
        p = trained.predict_one(wl).predictions
        assert p["bandwidth_mib_s"].value <= peak_read * BANDWIDTH_TOLERANCE
        # IOPS and latency follow from the same bandwidth, not from a free guess
        size_b = wl.request_size
        assert p["iops"].value * size_b / MIB == pytest.approx(p["bandwidth_mib_s"].value, rel=0.15)
        assert p["latency_mean_us"].value == pytest.approx(32 / p["iops"].value * 1e6, rel=0.15)


def test_load_beyond_the_measured_follows_the_load_law_and_littles_law(trained):
    base = trained.predict_one(
        Workload(write_ratio=0.0, queue_depth=16, request_size=4096, randomness=1.0, numjobs=2)
    )
    far = trained.predict_one(
        Workload(write_ratio=0.0, queue_depth=512, request_size=4096, randomness=1.0, numjobs=2)
    )
    b, f = base.predictions, far.predictions
    # the device's load law (modeling/training/laws.py): IOPS x (L/Le)(Le + K)/(L + K), the
    # plateau when K = 0; latency by Little's law
    k = trained.limits.load_knee
    gain = (1024 / 32) * (32 + k) / (1024 + k)
    assert f["iops"].value == pytest.approx(b["iops"].value * gain)
    assert f["iops"].value <= b["iops"].value * 2  # the law may at most double IOPS
    assert f["latency_mean_us"].value == pytest.approx(b["latency_mean_us"].value * 32 / gain)
    assert f["latency_p99_us"].value >= f["latency_mean_us"].value
    # the interval is wider, on the log scale, than at the measured load
    width = lambda p: np.log(p.upper / p.lower)  # noqa: E731
    assert width(f["latency_mean_us"]) > width(b["latency_mean_us"]) + 1.0


def test_extrapolation_names_the_field_and_how_far(trained):
    inside = trained.predict_one(Workload(write_ratio=0.0, queue_depth=4, request_size=4096, randomness=1.0))
    assert inside.extrapolation == {}
    assert not any(p.extrapolated or p.extrapolation for p in inside.predictions.values())
    out = trained.predict_one(
        Workload(write_ratio=0.0, queue_depth=64, request_size="1m", randomness=1.0, numjobs=2)
    )
    assert out.extrapolation["request_size"] == pytest.approx(16.0)
    assert out.extrapolation["queue_depth"] == pytest.approx(4.0)
    assert out.extrapolation["outstanding_io"] == pytest.approx(128 / 32)
    assert all(p.extrapolated and p.extrapolation == out.extrapolation for p in out.predictions.values())
    # each field alone measured, their product not: still flagged, along outstanding_io
    combo = trained.predict_one(
        Workload(write_ratio=0.0, queue_depth=16, request_size=4096, randomness=1.0, numjobs=2)
    )
    assert combo.extrapolation == {}
    limits = PhysicsLimits(trained.limits.lo, trained.limits.hi, 16.0, trained.limits.bandwidth_max)
    w = np.array([[0.0, 16, 4096, 1.0, 2, 4096, 4096, 1.0, 1.0]])
    assert extrapolation(w, limits) == [{"outstanding_io": 2.0}]


def test_percentiles_are_served_in_order(trained):
    names = ("latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p99_9_us")
    assert set(names) <= set(trained.metrics)
    w = dense_grid(queue_depths=(1, 4, 16, 64, 1024), numjobs=(1, 2, 16), sizes=(512, 4096, 1 << 20))
    out = trained.predict_matrix(w)
    values = np.vstack([out[m][0] for m in names])
    assert np.all(np.diff(values, axis=0) >= 0)
    assert np.all(out["latency_p99_us"][0] >= out["latency_mean_us"][0])


def test_limits_survive_the_registry(datadir, trained):
    from modeling.serving.registry import ModelRegistry, save_model

    datadir.catalog.ensure_device(trained.device)
    save_model(datadir, trained, {"cv_mre": {}}, activate=True)
    loaded = ModelRegistry(datadir).load(trained.device)
    assert loaded.limits.to_json() == trained.limits.to_json()
    assert loaded.metrics == trained.metrics
    w = dense_grid(queue_depths=(1, 16, 512), numjobs=(1, 4), sizes=(4096, 1 << 20))
    a, b = trained.predict_matrix(w), loaded.predict_matrix(w)
    for m in trained.metrics:
        np.testing.assert_allclose(a[m][0], b[m][0], rtol=1e-6)
    assert len(WORKLOAD_FIELDS) == w.shape[1]
