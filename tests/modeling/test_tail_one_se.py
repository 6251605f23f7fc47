"""The one-SE rule for a percentile's blend (issue 27): the weight nearest the plain model whose
inner-CV errors are within one paired standard error of the best weight's."""

from __future__ import annotations

import numpy as np

from modeling.training import tail_guard
from modeling.training.tail_guard import GUARDED, ONE_SE_GRID, blend, one_se_weight
from modeling.training.selection import relative_errors
from tests.modeling.test_tail_blend import LOW, _fit, device  # noqa: F401  (device: the fixture)


def test_a_gain_within_noise_leans_to_the_plain_model():
    """The rules a little better on average but no better than the noise: the lowest-CV weight
    is past the plain model, the one-SE rule serves the plain model; a clear gain is kept."""
    rng = np.random.default_rng(1)
    y = np.exp(rng.normal(5.0, 1.0, 200))
    plain = y * np.exp(rng.normal(0.0, 0.3, 200))
    noisy = y * np.exp(rng.normal(-0.02, 0.3, 200))
    weight, best = one_se_weight(noisy, plain, y)
    mre = {wt: relative_errors(blend(noisy, plain, wt), y).mean() for wt in ONE_SE_GRID}
    assert best == min(ONE_SE_GRID, key=lambda wt: mre[wt]) and best > 0.0
    assert weight == 0.0
    # the rules near exact: every workload gains, the best weight is within a step of the rules
    close = y * np.exp(rng.normal(0.0, 0.02, 200))
    weight, best = one_se_weight(close, plain, y)
    assert best >= 0.95 and weight >= 0.9
    # between the two: a weight below the best, but not the plain model
    half = y * np.exp(rng.normal(0.0, 0.15, 200))
    weight, best = one_se_weight(half, plain, y)
    assert 0.0 < weight < best


def test_the_guard_serves_the_one_se_weight_on_its_inner_cv(device):  # noqa: F811
    """Where :data:`TAIL_ONE_SE` is set (the p99), the served weight is the one-SE rule's on the
    very out-of-fold predictions the guard compared; the others keep ``choose_weight``'s."""
    assert tail_guard.TAIL_ONE_SE["latency_p99_us"] and tail_guard.TAIL_BLEND["latency_p99_us"]
    compared: dict[str, dict] = {}
    model, report = _fit(device, LOW, one_se=True, guard_oof=compared)
    assert set(compared) == set(GUARDED)
    for m in GUARDED:
        info = report["metrics"][m]["tail_guard"]
        if not tail_guard.TAIL_ONE_SE[m]:
            assert info["one_se"] is None
            continue
        c = compared[m]
        plain = c["plain"] if tail_guard.FALLBACK_MULTIPLIER[m] else c["plain"] / c["scale"]
        weight, best = one_se_weight(c["rules"], plain, c["y"])
        assert info["weight"] == weight and info["one_se"] == {"weight": weight, "lowest_cv_weight": best}
        served = report["metrics"][m]["global"]["cv_mre"]
        expected = relative_errors(blend(c["rules"], plain, weight), c["y"]).mean()
        if 0.0 < weight < 1.0:
            assert abs(served - expected) < 1e-9 * max(1.0, expected)
