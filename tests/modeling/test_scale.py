"""The multiplier put on a model's predictions: IOPS stays unbiased, other metrics MRE-optimal."""

from __future__ import annotations

import numpy as np

from modeling.training.fit import fit_device_model
from modeling.training.selection import make_candidate, cv_folds, median_scale, mre_scale, select
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import fast_candidates, synthetic_rows

# the bench's quick reference sweep: psync at queue depth 1, sizes 256x apart, 1-16 jobs
REFERENCE_GRID = {
    "write_ratio": (0.0, 1.0),
    "queue_depth": (1,),
    "request_size": (4096, 16384, 1 << 20),
    "randomness": (1.0,),
    "numjobs": (1, 2, 4, 8, 16),
}


def test_wide_errors_shrink_the_mre_multiplier_but_not_the_median_one():
    """Unbiased log-normal errors of spread s: MRE is lowest at exp(-s^2) x, the median at 1 x."""
    rng = np.random.default_rng(0)
    y = rng.uniform(1e3, 1e6, 4000)
    pred = y * rng.lognormal(0.0, 0.7, len(y))
    assert mre_scale(pred, y) < 0.65  # exp(-0.49) = 0.61, the grid's edge at 0.61
    assert median_scale(pred, y) == 1.0  # no clear bias: no multiplier at all
    # a real bias is still corrected
    assert abs(median_scale(pred * 1.5, y) - 1 / 1.5) < 0.05


def test_select_unbiased_uses_the_median_multiplier():
    rows = synthetic_rows(noise=0.3, seed=4, grid=REFERENCE_GRID)
    w, y = workload_matrix(rows), rows["iops"].to_numpy(float)
    splits = cv_folds(np.arange(len(w)), 3)
    stump = [make_candidate("extended", "cart", max_depth=2)]
    sel = select(w, y, splits, stump, None, blend=False, tune=False, unbiased=True)
    raw = sel.oof / sel.scale
    assert sel.scale == median_scale(raw, y)
    assert sel.scale != select(w, y, splits, stump, None, blend=False, tune=False).scale


def test_a_small_noisy_sweep_keeps_its_served_iops_on_its_own_points():
    """On a 30-point sweep with 30 % noise each fold model misses a third of it: the served
    IOPS (and QD1 latency 1 / IOPS, what the open loop uses) must still match the points."""
    rows = synthetic_rows(noise=0.3, seed=5, grid=REFERENCE_GRID)
    model, summary = fit_device_model(rows, folds=3, candidates=fast_candidates(), regions=False)
    ratio = model.predict_frame(rows)["pred_iops"].to_numpy() / rows["iops"].to_numpy()
    assert abs(np.median(ratio) - 1) < 0.1, np.median(ratio)
    assert 0.8 < model.specs["iops"].scopes["global"].scale < 1.25
