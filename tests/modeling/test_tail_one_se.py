"""The one-SE rule for a percentile's blend (issue 27): the weight nearest the plain model whose
inner-CV errors are within one paired standard error of the best weight's."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.training import tail_guard
from modeling.training.tail_guard import GUARDED, ONE_SE_GRID, blend, one_se_weight
from modeling.training.selection import relative_errors
from tests.modeling.test_tail_blend import LOW, _fit, device  # noqa: F401  (device: the fixture)


def _split_rules(far: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plain model 22 % high everywhere (log +0.2); the rules exact on every other workload
    and ``far`` too high (in log) on the rest: the farther, the smaller and noisier their gain."""
    y = np.full(100, 100.0)
    rules = y * np.exp(np.where(np.arange(100) % 2 == 0, 0.0, far))
    return rules, y * np.exp(0.2), y


def test_a_gain_within_noise_leans_to_the_plain_model():
    """The rules better on average by less than their paired SE: the lowest-CV weight is a blend
    (0.6), the one-SE rule serves the plain model; a clear gain is kept; in between, a weight
    toward the plain model but not it."""
    rules, plain, y = _split_rules(0.36)
    mre = {wt: relative_errors(blend(rules, plain, wt), y).mean() for wt in ONE_SE_GRID}
    assert mre[1.0] < mre[0.0]  # the rules alone beat the plain model on average
    assert one_se_weight(rules, plain, y) == (0.0, min(ONE_SE_GRID, key=lambda wt: mre[wt])) != (0.0, 0.0)
    # every workload gains the same: no noise, the rules
    assert one_se_weight(y * np.exp(0.02), plain, y) == (1.0, 1.0)
    assert one_se_weight(*_split_rules(0.25)) == (1.0, 1.0)
    weight, best = one_se_weight(*_split_rules(0.33))
    assert 0.0 < weight < best == 1.0


@pytest.mark.slow  # a training: in the slow set (CI runs it)
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
