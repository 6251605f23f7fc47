"""Model selection: the paired rule, tuning within a budget, metric-specific priors."""

from __future__ import annotations

import numpy as np

from modeling.training.selection import (
    HEAD,
    make_candidate,
    cv_folds,
    default_candidates,
    for_metric,
    neighbours,
    select,
)
from tests.modeling.conftest import synthetic_rows
from modeling.workload_matrix import workload_matrix


def _data():
    rows = synthetic_rows(noise=0.05, seed=2)
    w = workload_matrix(rows)
    return w, rows["iops"].to_numpy(float), cv_folds(np.arange(len(w)), 3)


def test_a_clearly_better_challenger_wins_and_a_noisy_one_does_not():
    w, y, splits = _data()
    stump = make_candidate("extended", "cart", max_depth=1)
    strong = make_candidate("extended", "xgboost", n_estimators=60, max_depth=4, learning_rate=0.3)
    assert select(w, y, splits, [stump, strong], None, blend=False, tune=False).best == [strong]
    # the same model with another seed is "better" or "worse" only by noise
    twin_a = make_candidate("extended", "extra_trees", n_estimators=5, random_state=0)
    twin_b = make_candidate("extended", "extra_trees", n_estimators=5, random_state=1)
    assert select(w, y, splits, [twin_a, twin_b], None, blend=False, tune=False).best == [twin_a]


def test_tuning_steps_and_budget():
    w, y, splits = _data()
    start = make_candidate("extended", "cart", min_samples_leaf=3, loss="relative")
    assert {c.kwargs["min_samples_leaf"] for c in neighbours(start)} == {1, 5}
    tuned = select(w, y, splits, [start], None, blend=False)
    assert len(tuned.scores) == 1 + len(neighbours(start))  # every step was scored
    untuned = select(w, y, splits, [start], None, blend=False, tune=False)
    assert len(untuned.scores) == 1
    # a spent budget still scores the head, and nothing after it
    cands = default_candidates(quick=False, n_rows=len(y))
    assert len(select(w, y, splits, cands, 0.0, blend=False).scores) == HEAD


def test_tail_metrics_put_robust_learners_first():
    cands = default_candidates()
    assert for_metric(cands, "iops") == cands
    tail = for_metric(cands, "latency_p99_us")
    assert tail[0].kwargs.get("loss") == "relative" and set(cands) <= set(tail)
    # the tail also gets the extra trees at single-point leaves, both losses, right after the default
    fine = tail[1:3]
    assert all(c.kind == "extra_trees" and c.kwargs["min_samples_leaf"] == 1 for c in fine)
    assert {c.kwargs["loss"] for c in fine} == {"relative", "squared"}
    assert len(tail) == len(cands) + 2 and len(set(tail)) == len(tail)
    # what the caller did not offer (no relative-loss extra trees) is not added
    only_boosted = [c for c in cands if c.kind == "xgboost"]
    assert for_metric(only_boosted, "latency_p99_us") == only_boosted


def test_gp_is_left_out_of_large_data():
    assert any(c.kind == "gp" for c in default_candidates(n_rows=500))
    assert not any(c.kind == "gp" for c in default_candidates(n_rows=50_000))
