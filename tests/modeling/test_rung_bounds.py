"""Rungs skipped by their bounds change no answer (physics.needed_rungs and its row twin).

A ladder rung whose lower bound is above the best upper bound of its workload's envelope
is not evaluated; the envelope read by ``settle`` must come out exactly the same, and
the single-row form (needed_rungs_row) must pick the same rungs.
"""

from __future__ import annotations

import numpy as np
import pytest

from modeling.serving.physics.ladder import ladder_position, needed_rungs_row
from modeling.serving.physics.limits import PhysicsLimits
from modeling.serving.physics.ladder import ladder, needed_rungs, settle
from modeling.workload import WORKLOAD_FIELDS

QD, NJ = WORKLOAD_FIELDS.index("queue_depth"), WORKLOAD_FIELDS.index("numjobs")


def _limits() -> PhysicsLimits:
    n = len(WORKLOAD_FIELDS)
    return PhysicsLimits(np.zeros(n), np.full(n, 1e9), 1e9, {}, (1.0, 2.0, 4.0, 8.0, 16.0))


class _RowLadder:
    """What needed_rungs_row reads of the row path's ladder."""

    def __init__(self, depths: list[float], qd: float) -> None:
        self.at = ladder_position(np.log2(depths).tolist(), qd)
        low, high, frac = self.at
        self.rungs = (high if frac > 0.0 else low) + 1
        self.own_included = depths[self.rungs - 1] == qd
        self.depths = depths[: self.rungs]


@pytest.mark.parametrize("metric", ["iops", "latency_mean_us"])
def test_skipped_rungs_leave_the_envelope_exactly_as_it_was(metric: str) -> None:
    rng = np.random.default_rng(7)
    n = 400
    w = np.ones((n, len(WORKLOAD_FIELDS)))
    w[:, QD] = rng.choice([1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0], n)
    w[:, NJ] = rng.choice([1.0, 2.0, 4.0], n)
    lim = _limits()
    lad = ladder(w, lim)
    assert lad is not None and not lad.empty
    # a device whose value per I/O mostly falls with depth, with noise that sometimes breaks it
    load = lad.depths[lad.rung] * w[lad.owner, NJ]
    trend = load ** (0.3 if metric == "iops" else 0.2)
    true = trend * rng.lognormal(0.0, 0.15, len(lad.owner))
    own = (w[:, QD] * w[:, NJ]) ** (0.3 if metric == "iops" else 0.2) * rng.lognormal(0.0, 0.15, n)
    # bounds around the truth: some tight, some loose, some exact
    width = rng.choice([0.0, 0.01, 0.5], len(true))
    lo, hi = true * np.exp(-width * rng.random(len(true))), true * np.exp(width * rng.random(len(true)))
    keep = needed_rungs(metric, lad, w, own, lo, hi)
    assert 0 < keep.sum() < len(keep), "the case must skip some rungs and keep others"
    skipped = np.where(keep, true, -np.inf if metric == "latency_mean_us" else np.inf)
    full = settle({metric: own}, {metric: true}, lad, w)[metric]
    pruned = settle({metric: own}, {metric: skipped}, lad, w)[metric]
    np.testing.assert_array_equal(pruned, full)

    # the row twin keeps the same rungs
    depths = list(lim.depths)
    for i in range(0, n, 7):
        mine = np.flatnonzero(lad.owner == i)
        rl = _RowLadder(depths, float(w[i, QD]))
        lo_i, hi_i = np.full(rl.rungs, np.nan), np.full(rl.rungs, np.nan)
        lo_i[lad.rung[mine]], hi_i[lad.rung[mine]] = lo[mine], hi[mine]
        if rl.own_included:  # the own rung's bounds hold its own value
            lo_i[-1] = hi_i[-1] = own[i]
        rows = needed_rungs_row(metric, lo_i.tolist(), hi_i.tolist(), float(own[i]), w[i].tolist(), rl)
        assert rows == lad.rung[mine][keep[mine]].tolist(), i

