"""The tail's two guards: a plain log-target XGBoost unless the tail rules clearly beat it, and
a wide interval where the tail is bimodal.

The tail rules of :mod:`modeling.training.fit` (relative-loss trees first, the ratio to the
mean latency, the consistent-tail gate, the paired rule) were tuned on the six shared
fio-plot devices.  On devices they never saw, a plain XGBoost of the log latency on the
same features beat them on the p99 of 5 of 8 devices (issue 27).  So each latency
percentile is checked once more after its rules have chosen: the plain model, tuned by the
same cross-validation (:func:`plain_grid`, the lowest CV error wins), is the incumbent, and
the rules' choice is kept only where its per-workload errors beat the plain model's by
:data:`TAIL_GUARDS` paired standard errors (the plain model scaled by its CV multiplier or
not, :data:`FALLBACK_MULTIPLIER`: as it would be served).  Where the evidence is within noise the plain
model serves: it is never known to be worse.

:data:`TAIL_GUARDS` were chosen leave-one-device-out, each device judged with the threshold
that was best on the others (``bench/accuracy.py --study tail --leave-one-device-out``).

Where the evidence is mixed, the guard may serve a geometric blend of the two
(:data:`TAIL_BLEND`): per percentile, the rules' weight in the blend (:data:`BLEND_WEIGHTS`)
with the lowest CV error among those that beat the plain model by the threshold
(:func:`choose_weight`).  On the RAID 0 of three MX200s the rules beat the plain model on the
inner folds by about 1 SE and lost to it on held-out workloads; on the SATA SSDs they beat
it by as much and were what kept the p99 at 35-44 % instead of 90-170 %.  The p99's weight
is the one-SE rule's instead (:data:`TAIL_ONE_SE`, :func:`one_se_weight`): of a fine grid,
the weight nearest the plain model whose inner-CV errors are within one paired SE of the best
weight's -- the RAID 0's p99 is then no worse than the plain model's, at a point or two on
the devices where the rules win.

Where a device's tail is bimodal -- its p99 (or p99.9) sits on the slow mode of about 1 %
of the I/Os, over :data:`KNEE` times the p90, on at least :data:`BIMODAL_SHARE` of its
measured workloads, and the model typically misses those workloads by over :data:`UNFOLLOWED`
times -- no model of the workload predicts which side a new workload lands on
(a slightly larger slow share moves the p99 tenfold).  There the interval is widened to
the errors made on those workloads and every answer says so
(:attr:`modeling.serving.device_model.DeviceModel.tail_notes`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from modeling.serving.metric_models import ScopeModel
from modeling.training.selection import (
    Candidate, Selection, blend_logs, make_candidate, relative_errors, select,
)

def plain_grid(feature_set: str = "extended") -> list[Candidate]:
    """The plain model's configurations (log target: the estimator's default) on ``feature_set``."""
    return [
        make_candidate(feature_set, "xgboost", n_estimators=400, max_depth=depth, learning_rate=0.05,
                       subsample=0.8)
        for depth in (4, 2, 6)
    ]


TAIL_GUARDS: dict[str, float] = {
    "latency_p50_us": 1.0,
    "latency_p90_us": 0.0,
    "latency_p99_us": 0.5,
    "latency_p99_9_us": 2.0,
}
"""Per percentile, the paired standard errors by which the tail rules (or a blend) must beat the plain model.

Not where the one-SE rule chooses the blend (:data:`TAIL_ONE_SE`: the p99's 0.5 is then
unused but for a run without blends).

With the blends (:data:`TAIL_BLEND`), the settings with the lowest mean log ratio of the error
to a plain XGBoost's over the 7 shared devices (3 fold draws, 2026-11-27).  The p99.9 needs
2 SE: on the SATA SSDs its rules, even where their inner-CV advantage was 1-2 SE, lost to the
plain model on held-out workloads (the slow mode); a blend that clears 2 SE does not."""

FALLBACK_MULTIPLIER: dict[str, bool] = {
    "latency_p50_us": False,
    "latency_p90_us": True,
    "latency_p99_us": True,
    "latency_p99_9_us": False,
}
"""Per percentile, whether the plain fallback keeps its CV multiplier (else it serves as fitted).

The multiplier minimises the out-of-fold relative error of the very predictions it is
fitted on; on the p99.9 of the SATA SSDs it sat at the grid's edge (0.61) and made the
held-out error worse (INTEL 34 % against 23 % unscaled).  Judged leave-one-device-out with
the thresholds (``bench/accuracy.py --study tail --leave-one-device-out``)."""

TAIL_BLEND: dict[str, bool] = {
    "latency_p50_us": True,
    "latency_p90_us": True,
    "latency_p99_us": True,
    "latency_p99_9_us": True,
}
"""Per percentile, whether the guard may serve a geometric blend of the rules and the plain model.

Judged leave-one-device-out with the thresholds (``bench/accuracy.py --study tail
--leave-one-device-out``)."""

BLEND_WEIGHTS = (0.25, 0.5, 0.75)
"""The rules' weights tried in a blend (0 would be the plain model, 1 the rules)."""

TAIL_ONE_SE: dict[str, bool] = {
    "latency_p50_us": False,
    "latency_p90_us": False,
    "latency_p99_us": True,
    "latency_p99_9_us": False,
}
"""Per percentile, whether a blend's weight is chosen by the one-SE rule (:func:`one_se_weight`)
instead of :func:`choose_weight` (only where :data:`TAIL_BLEND` allows blends; the threshold
then only matters at -inf, the rules alone, and +inf, the plain model).

The p99's: on the RAID 0 of three MX200s the coarse choice at 0.5 SE lost to the plain model
on held-out workloads (17.8 % against 16.8 %, 3 fold draws) while its inner CV could not tell
it from the MX200 and the RAID 5, where the rules win; leaning to the plain model by one SE
was fixed as a rule before it was judged (``bench/accuracy.py --study tail
--leave-one-device-out``)."""

ONE_SE_GRID = tuple(round(0.05 * i, 2) for i in range(21))
"""The rules' weights the one-SE rule tries: 0 (the plain model) to 1 (the rules) by 0.05."""

KNEE = 5.0
"""A tail over this many times the p90 sits on a slow mode, not on the body of the distribution."""
BIMODAL_SHARE = 0.10
"""The share of measured workloads at a knee from which a device's tail is called bimodal."""
UNFOLLOWED = 2.0
"""...and only where the model typically misses those workloads by over this factor."""

GUARDED = tuple(TAIL_GUARDS)
"""The metrics the guard checks: every latency percentile."""


def plain_selection(
    w: np.ndarray,
    y: np.ndarray,
    splits: list[tuple[np.ndarray, np.ndarray]],
    budget_s: float | None,
    feature_set: str = "extended",
) -> Selection:
    """The plain log-target XGBoost with the lowest CV error on ``splits`` (no blends, no steps)."""
    return select(w, y, splits, plain_grid(feature_set), budget_s, blend=False, tune=False, tolerance=0.0)


def unscaled(sel: Selection, y: np.ndarray) -> Selection:
    """``sel`` without its CV multiplier: out-of-fold predictions and served answers as fitted."""
    if sel.scale == 1.0:
        return sel
    oof = sel.oof / sel.scale
    return replace(sel, oof=oof, mre=float(relative_errors(oof, y).mean()), scale=1.0)


def advantage(rules_oof: np.ndarray, plain_oof: np.ndarray, y: np.ndarray) -> float:
    """How many paired standard errors the rules' per-workload relative errors beat the plain model's.

    Positive: the rules are better.  ``inf`` / ``-inf`` when every workload gains / loses the
    same amount (no spread), 0 when they are the same.
    """
    gain = relative_errors(plain_oof, y) - relative_errors(rules_oof, y)
    mean = float(gain.mean())
    se = float(gain.std()) / math.sqrt(len(gain))
    if se <= 1e-12 * max(1.0, abs(mean)):  # no spread (up to rounding)
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / se


def keep_rules(z: float, threshold: float) -> bool:
    """Whether the tail rules' choice serves (else the plain model does)."""
    return z >= threshold


def knee_share(tail: np.ndarray, p90: np.ndarray) -> tuple[float, np.ndarray]:
    """The share of workloads whose ``tail`` is over :data:`KNEE` x their p90, and which they are."""
    knee = tail > KNEE * p90
    return float(knee.mean()) if len(knee) else 0.0, knee



def blend(rules: np.ndarray, plain: np.ndarray, weight: float | np.ndarray) -> np.ndarray:
    """The geometric blend of two positive predictions with the rules' ``weight`` (0 to 1; or one per row).

    At 1 exactly the rules, at 0 exactly the plain model.
    """
    if np.ndim(weight) == 0:
        if weight == 1.0:
            return rules
        if weight == 0.0:
            return plain
        return blend_logs([rules, plain], [float(weight), 1.0 - float(weight)])
    mixed = blend_logs([rules, plain], [weight, 1.0 - weight])  # type: ignore[list-item]
    return np.where(weight == 1.0, rules, np.where(weight == 0.0, plain, mixed))


def options(rules_oof: np.ndarray, plain_oof: np.ndarray, y: np.ndarray) -> dict[float, tuple[float, float]]:
    """Per rules' weight (:data:`BLEND_WEIGHTS` and 1, the rules): CV MRE and advantage over plain in SE."""
    out = {}
    for weight in (*BLEND_WEIGHTS, 1.0):
        oof = blend(rules_oof, plain_oof, weight)
        out[weight] = (float(relative_errors(oof, y).mean()), advantage(oof, plain_oof, y))
    return out


def choose_weight(scored: dict[float, tuple[float, float]], threshold: float, blends: bool) -> float:
    """The rules' weight served: 1 the rules, 0 the plain model, in between a geometric blend.

    Without ``blends``: the rules where they beat the plain model by ``threshold`` SE
    (:func:`keep_rules`), else the plain model.  With: of the weights that beat it by
    ``threshold`` SE, the one with the lowest CV MRE (ties to the rules' side); the plain
    model where none does.
    """
    if not blends:
        return 1.0 if keep_rules(scored[1.0][1], threshold) else 0.0
    passing = [wt for wt, (_, z) in scored.items() if keep_rules(z, threshold)]
    if not passing:
        return 0.0
    return min(passing, key=lambda wt: (scored[wt][0], -wt))


def one_se_weight(rules_oof: np.ndarray, plain_oof: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The rules' weight by the one-SE rule, and the weight with the lowest CV error.

    Of :data:`ONE_SE_GRID`, the smallest weight (the nearest the plain model) whose
    per-workload errors are within one paired standard error of the lowest-CV weight's: a
    difference of the inner CV within its noise is not evidence for the rules (the
    classical one-standard-error rule, with the incumbent plain model as the simple side).
    The lowest-CV weight's ties go to the rules' side.
    """
    errors = {wt: relative_errors(blend(rules_oof, plain_oof, wt), y) for wt in ONE_SE_GRID}
    best = min(ONE_SE_GRID, key=lambda wt: (float(errors[wt].mean()), -wt))
    for wt in ONE_SE_GRID:  # ascending: from the plain model toward the rules
        gap = errors[wt] - errors[best]
        if float(gap.mean()) <= float(gap.std()) / math.sqrt(len(gap)):
            return wt, best
    return best, best


def blend_scope(rules: ScopeModel, plain: ScopeModel, weight: float, q: float, mre: float) -> ScopeModel:
    """One scope model whose answer is ``rules ** weight * plain ** (1 - weight)`` (0 < weight < 1).

    The members of both are blended on the log scale (:meth:`ScopeModel.predict`): the
    rules' weights times ``weight``, the plain model's times ``1 - weight``, and so are the
    multipliers.  A rules' scope that predicts the ratio to the mean latency makes the
    blend a ``blend`` spec (the mean to the power ``weight``,
    :class:`~modeling.serving.metric_models.MetricSpec`).
    """
    assert 0.0 < weight < 1.0, weight

    def parts(sm: ScopeModel) -> list[float]:
        return sm.weights or [1.0 / len(sm.members)] * len(sm.members)

    weights = [weight * x for x in parts(rules)] + [(1.0 - weight) * x for x in parts(plain)]
    return ScopeModel(
        scope=rules.scope,
        members=[*rules.members, *plain.members],
        q=q,
        # the plain model is global: it was trained on at least the rules' range
        lo=rules.lo,
        hi=rules.hi,
        cv={"mre": mre, "blend_weight": weight},
        scale=rules.scale**weight * plain.scale ** (1.0 - weight),
        weights=weights,
    )
