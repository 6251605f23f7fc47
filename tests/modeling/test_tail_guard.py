"""The tail guard: a latency percentile falls back to a plain log-target XGBoost unless its
rules beat it by the guard's paired standard errors (issue 27)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modeling.errors import NotFound
from modeling.estimators.families import make_estimator
from modeling.features import compute_features
from modeling.training.fit import fit_device_model, median_by_workload
from modeling.training.selection import cv_folds
from modeling.training.tail_guard import (
    FALLBACK_MULTIPLIER, GUARDED, TAIL_BLEND, advantage, keep_rules, plain_selection,
)
from modeling.workload import METRICS, PERCENTILE_METRICS
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import fast_candidates, synthetic_rows
from tests.modeling.test_percentile_ladder import known_tail


pytestmark = pytest.mark.usefixtures("small_plain_model")


@pytest.fixture(scope="module")
def device():
    return known_tail(synthetic_rows(noise=0.05, seed=3))


def _fit(device, guard):
    return fit_device_model(device, folds=3, candidates=fast_candidates(), regions=False, tail_guard=guard)


def test_advantage_counts_paired_standard_errors():
    y = np.ones(100)
    rng = np.random.default_rng(0)
    rules = 1 + rng.normal(0, 0.05, 100)  # about 4 % off
    plain = 1 + rng.normal(0, 0.30, 100)  # about 24 % off
    assert advantage(rules, plain, y) > 5
    assert advantage(plain, rules, y) < -5
    assert advantage(rules, rules, y) == 0.0
    assert advantage(np.ones(100), np.full(100, 1.2), y) == math.inf  # every point gains 0.2
    assert keep_rules(1.0, 1.0) and not keep_rules(0.99, 1.0)


def test_explicit_candidates_get_no_guard_unless_asked(device):
    _, report = fit_device_model(device, folds=3, candidates=fast_candidates(), regions=False)
    assert all("tail_guard" not in report["metrics"][m] for m in GUARDED)


@pytest.mark.slow  # two trainings
def test_minus_inf_records_the_comparison_and_changes_nothing(device):
    """With the guard at -inf every rule is kept: the answers are the unguarded training's."""
    guarded, report = _fit(device, -math.inf)
    plain_model, _ = fit_device_model(device, folds=3, candidates=fast_candidates(), regions=False)
    w = workload_matrix(device)[:20]
    a = guarded.predict_matrix(w, metrics=list(GUARDED))
    b = plain_model.predict_matrix(w, metrics=list(GUARDED))
    for m in GUARDED:
        info = report["metrics"][m]["tail_guard"]
        assert info["kept"] is True and info["threshold"] == -1e6
        assert info["plain"].startswith("xgboost[extended]")
        np.testing.assert_allclose(a[m][0], b[m][0], rtol=1e-9)


def test_infinite_guard_serves_the_plain_model_everywhere(device):
    """At +inf the rules can never be kept (short of a gain with no spread): each percentile is
    the plain model's selection, refitted on every workload (the p99 scaled by its CV multiplier)."""
    model, report = _fit(device, math.inf)
    names = [*METRICS, *PERCENTILE_METRICS]
    w, ys, _ = median_by_workload(workload_matrix(device), {m: device[m].to_numpy(float) for m in names})
    splits = cv_folds(np.arange(len(w)), 3)
    probe = w[:15]
    out = model.predict_matrix(probe, metrics=["latency_p99_us"])
    for m in GUARDED:
        entry = report["metrics"][m]
        assert entry["tail_guard"]["kept"] is False
        assert entry["mode"] == "direct" and entry["global"]["estimator"] == "xgboost"
        assert entry["global"]["cv_fold_std"] >= 0
        # served with the CV multiplier only where FALLBACK_MULTIPLIER says so
        assert entry["global"]["scale"] == entry["tail_guard"]["plain_multiplier"]
        assert FALLBACK_MULTIPLIER[m] or entry["global"]["scale"] == 1.0
    sel = plain_selection(w, ys["latency_p99_us"], splits, None)
    best = sel.best[0]
    X = compute_features(w, best.feature_set)
    expected = make_estimator(best.kind, best.kwargs).fit(X, ys["latency_p99_us"]).predict(
        compute_features(probe, best.feature_set)
    ) * sel.scale
    # served p99 is never below the served mean (the ladder's anchor rule)
    mean = model.predict_matrix(probe, metrics=["latency_mean_us"])["latency_mean_us"][0]
    np.testing.assert_allclose(out["latency_p99_us"][0], np.maximum(expected, mean), rtol=1e-6)


def test_the_guard_keeps_rules_that_clearly_win(device, monkeypatch):
    """On the known tail the ratio to the mean is near exact: the rules win by many SEs and stay
    (without blends: which blend serves is ``test_tail_blend.py``'s)."""
    monkeypatch.setitem(TAIL_BLEND, "latency_p99_us", False)
    _, report = _fit(device, 1.0)
    p99 = report["metrics"]["latency_p99_us"]["tail_guard"]
    assert p99["rules_cv_mre"] < p99["plain_cv_mre"]
    assert p99["kept"] is (p99["advantage_se"] >= 1.0)
    assert p99["kept"]


@pytest.mark.slow  # two trainings
def test_the_guard_never_touches_iops_bandwidth_or_mean_latency(device):
    """Whatever the guard decides, the metrics it does not guard are the same answers."""
    always_plain, _ = _fit(device, math.inf)
    never, _ = fit_device_model(device, folds=3, candidates=fast_candidates(), regions=False)
    w = workload_matrix(device)
    metrics = ["iops", "bandwidth_mib_s", "latency_mean_us"]
    a, b = always_plain.predict_matrix(w, metrics=metrics), never.predict_matrix(w, metrics=metrics)
    for m in metrics:
        np.testing.assert_array_equal(a[m][0], b[m][0])


def _bimodal(rows, share: float, seed: int = 7):
    """A device whose p99 sits on a slow mode (20x its p90) on a random ``share`` of workloads."""
    rng = np.random.default_rng(seed)
    slow = rng.random(len(rows)) < share
    p90 = rows["latency_p90_us"].to_numpy()
    return rows.assign(latency_p99_us=np.where(slow, 20 * p90, rows["latency_p99_us"].to_numpy())), slow


def test_a_bimodal_tail_is_said_so_with_its_interval_widened():
    """Which workloads land on the slow mode is random: no model can know, so the answer says so."""
    base = known_tail(synthetic_rows(noise=0.02, seed=11))
    steady, _ = fit_device_model(base, folds=3, candidates=fast_candidates(), regions=False)
    frame, slow = _bimodal(base, 0.25)
    model, report = fit_device_model(frame, folds=3, candidates=fast_candidates(), regions=False)
    assert report["metrics"]["latency_p99_us"]["bimodal"]["share"] >= 0.10
    assert "latency_p99_us" in model.tail_notes and "bimodal" in model.tail_notes["latency_p99_us"]
    assert "latency_p99_us" not in steady.tail_notes  # the steady tail is predicted as before
    wl = workload_matrix(frame)[:30]
    wide = model.predict_matrix(wl, metrics=["latency_p99_us"])["latency_p99_us"]
    narrow = steady.predict_matrix(wl, metrics=["latency_p99_us"])["latency_p99_us"]
    # the interval spans the slow mode's error: several times wider (in ratio) than the steady one's
    assert np.median(wide[2] / wide[1]) > 3 * np.median(narrow[2] / narrow[1])
    # and every answer of that metric carries the note (the p50 is not bimodal)
    from modeling.workload import Workload

    one = model.predict_one(Workload(write_ratio=0.0, queue_depth=4, request_size=4096, randomness=1.0))
    assert set(one.notes) == {"latency_p99_us"}


def test_a_percentile_served_by_the_plain_model_answers_every_region(device):
    """The plain fallback is global only: a region asked by name (``evaluate`` asks each region
    IOPS has) gets its answer, as a ratio's, instead of ``NotFound`` (issue 27)."""
    model, report = fit_device_model(device, folds=3, candidates=fast_candidates(), tail_guard=math.inf)
    assert all(report["metrics"][m]["tail_guard"]["kept"] is False for m in GUARDED)
    regions = [r for r in model.specs["iops"].scopes if r != "global"]
    assert regions, "the fixture must train region models for IOPS"
    w = workload_matrix(device)[:10]
    by_region = model.predict_matrix(w, metrics=list(GUARDED), model=regions[0])
    for m in GUARDED:  # (the mean they are laddered on is the region's own, so not the global answers)
        assert np.all(np.isfinite(by_region[m][0])) and np.all(by_region[m][0] > 0)
    # a percentile that has region models still refuses a region it has none for
    model.specs["latency_p99_us"].scopes["other"] = model.specs["latency_p99_us"].scopes["global"]
    with pytest.raises(NotFound):
        model.predict_matrix(w, metrics=["latency_p99_us"], model=regions[0])

