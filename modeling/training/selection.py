"""Model selection: candidate estimators, grouped cross-validation, a time budget.

Repeats of one workload are kept in the same fold (``GroupKFold`` on the workload), or a
model would be scored on points it has already seen.  Candidates are tried in order of
prior merit until the time budget runs out, so a tiny budget still yields the usual
winner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

import numpy as np
from sklearn.model_selection import GroupKFold

from modeling.errors import InvalidInput
from modeling.estimators.families import make_estimator
from modeling.features import FEATURE_NAMES, compute_features


@dataclass(frozen=True)
class Candidate:
    """One estimator configuration to try."""

    feature_set: str
    kind: str
    params: tuple[tuple[str, Any], ...]

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def name(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.kind}[{self.feature_set}]({extra})"


def make_candidate(feature_set: str, kind: str, **params: Any) -> Candidate:
    return Candidate(feature_set, kind, tuple(sorted(params.items())))


GP_MAX_ROWS = 1500
"""Above this many training rows the Gaussian process is left out (its fit grows as n³)."""
HEAD = 4
"""Candidates always tried, whatever the time budget (the main families)."""
SELECT_TOLERANCE = 2.0
"""A challenger must beat the current choice by this many standard errors (paired, per point).

Two rather than the classic one: a selection runs a dozen or more such comparisons (the
families, the tuning steps, the blends), and at one standard error about one in six
would pass on noise alone."""


def load_columns(feature_set: str) -> dict[str, int]:
    """Where outstanding I/O, queue depth and numjobs sit in a feature set (for ``load_gated``)."""
    names = FEATURE_NAMES[feature_set]
    qd = names.index("log2_queue_depth")
    if "log2_outstanding_io" not in names:  # basic: one job, so the depth is the load
        return {"n_col": qd, "qd_col": qd, "nj_col": -1}
    return {"n_col": names.index("log2_outstanding_io"), "qd_col": qd, "nj_col": names.index("log2_numjobs")}


def default_candidates(
    feature_sets: tuple[str, ...] = ("extended",), quick: bool = False, n_rows: int | None = None
) -> list[Candidate]:
    """The model families to compare, most promising first (the order found best on fio-plot data).

    One configuration per family: load-gated boosted trees (IOPS and mean latency of
    closed-loop sweeps), plain boosted trees for sharp regime changes, relative-loss
    trees for noisy tail latencies, a Gaussian process for devices smooth in the
    workload, a linear-based forest, and the published method (one CART tree).  Their
    hyperparameters are then tuned around the winner while the time budget lasts
    (:func:`neighbours`).  ``quick`` keeps the first four.  With several feature sets,
    each set's candidates follow the previous set's.
    """
    gp = n_rows is None or n_rows <= GP_MAX_ROWS
    out: list[Candidate] = []
    for fs in feature_sets:
        family = [
            make_candidate(fs, "load_gated", **load_columns(fs)),
            make_candidate(fs, "xgboost", n_estimators=300, max_depth=6, learning_rate=0.05, subsample=0.8),
            make_candidate(fs, "extra_trees", n_estimators=60, min_samples_leaf=3, loss="relative"),
        ]
        if gp:
            family.append(make_candidate(fs, "gp", nu=1.5, n_restarts=1))
        family += [
            make_candidate(fs, "extra_trees", n_estimators=60, max_features=0.5, linear_base=True),
            make_candidate(fs, "cart", min_samples_leaf=3, loss="relative"),
        ]
        out += family[:4] if quick else family
    return out


def candidates_of_kinds(
    kinds: Sequence[str], feature_sets: tuple[str, ...] = ("extended",)
) -> list[Candidate]:
    """The default candidates of the named estimator kinds only (a fast, untuned training).

    Raises ``InvalidInput`` naming the kinds there are.
    """
    pool = default_candidates(feature_sets)
    known = list(dict.fromkeys(c.kind for c in pool))
    unknown = [k for k in kinds if k not in known]
    if unknown or not kinds:
        raise InvalidInput(
            f"unknown estimator kind(s) {', '.join(unknown) or '(none given)'};"
            f" use some of {', '.join(known)}",
            details={"field": "candidates"},
        )
    return [c for c in pool if c.kind in kinds]


# Hyperparameter steps tried around a winning configuration, per estimator kind.
_STEPS: dict[str, tuple[dict[str, Any], ...]] = {
    "load_gated": ({"max_depth": 4}, {"max_depth": 8}, {"n_estimators": 600, "learning_rate": 0.03}),
    "xgboost": (
        {"max_depth": 4},
        {"max_depth": 8},
        {"n_estimators": 600, "learning_rate": 0.03},
        {"objective": "absolute"},
        {"linear_base": True},
    ),
    "extra_trees": ({"min_samples_leaf": 1}, {"min_samples_leaf": 5}, {"max_features": 0.5}),
    "gp": ({"nu": 2.5}, {"nu": 0.5}),
    "cart": ({"min_samples_leaf": 1}, {"min_samples_leaf": 5}),
}


def neighbours(cand: Candidate) -> list[Candidate]:
    """Configurations one hyperparameter step away from ``cand`` (the tuning moves)."""
    out = []
    for step in _STEPS.get(cand.kind, ()):
        params = {**cand.kwargs, **step}
        if params != cand.kwargs:
            out.append(make_candidate(cand.feature_set, cand.kind, **params))
    return out


TAIL_METRICS = frozenset({"latency_p99_us"})
"""Metrics whose measurements jump between neighbouring workloads (a slow mode crossing 1 %)."""


def for_metric(candidates: list[Candidate], metric: str) -> list[Candidate]:
    """The candidates in order of prior merit for ``metric``: relative-loss trees first for tails.

    With the paired selection rule the first candidate is the default that the others
    must beat clearly; for a tail latency that default should be the robust learner.  A
    tail also gets the extra trees at single-point leaves, with the relative and the
    squared loss, next: where the tail follows the workload (the arrays) the finest leaves
    win, p99 CV MRE 0.17 and 0.12-0.14 against 0.24 and 0.22 with three-point leaves on
    RAID 0 and RAID 5 over four fold draws, while on the SATA SSDs' bimodal tail they lose
    (0.65-1.4 against 0.45-0.55), so cross-validation has both to choose from.
    """
    if metric not in TAIL_METRICS:
        return candidates
    robust = [c for c in candidates if c.kwargs.get("loss") == "relative"]
    fine = [
        make_candidate(c.feature_set, "extra_trees", **{**c.kwargs, "min_samples_leaf": 1, "loss": loss})
        for c in robust[:1]
        if c.kind == "extra_trees"
        for loss in ("relative", "squared")
    ]
    fine = [c for c in fine if c not in candidates]
    return robust[:1] + fine + robust[1:] + [c for c in candidates if c not in robust]


def relative_errors(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|pred - y| / |y| per row."""
    return np.abs(pred - y) / np.maximum(np.abs(y), 1e-12)


def workload_groups(w: np.ndarray) -> np.ndarray:
    """A group id per row: rows with the same workload (repeats) share one."""
    _, inverse = np.unique(np.round(w, 9), axis=0, return_inverse=True)
    return np.asarray(inverse).ravel()


def cv_folds(groups: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Grouped k-fold splits (fewer folds when there are fewer groups); deterministic."""
    labels, groups = np.unique(groups, return_inverse=True)
    n_groups = len(labels)
    k = max(2, min(folds, n_groups))
    # shuffle the group labels so folds do not follow the sweep order
    rng = np.random.default_rng(0)
    perm = rng.permutation(n_groups)
    shuffled = perm[groups]
    return list(GroupKFold(n_splits=k).split(np.zeros(len(groups)), groups=shuffled))


def oof_predict(
    w: np.ndarray, y: np.ndarray, splits: list[tuple[np.ndarray, np.ndarray]], cand: Candidate
) -> np.ndarray:
    """Out-of-fold predictions of one candidate."""
    X = compute_features(w, cand.feature_set)
    pred = np.empty(len(y))
    for train, test in splits:
        est = make_estimator(cand.kind, cand.kwargs).fit(X[train], y[train])
        pred[test] = est.predict_fast(X[test])
    return pred


@dataclass
class Selection:
    """The winning candidate(s), out-of-fold predictions (scaled) and every score tried."""

    best: list[Candidate]  # one candidate, or several whose log-predictions are blended
    oof: np.ndarray
    mre: float
    scores: dict[str, float]
    scale: float = 1.0
    weights: list[float] | None = None  # blend weights of ``best`` (None: one candidate)

    @property
    def name(self) -> str:
        if not self.weights or len(self.best) == 1:
            return " + ".join(c.name for c in self.best)
        return " + ".join(f"{w:.2f} {c.name}" for w, c in zip(self.weights, self.best, strict=True))


def mre_scale(pred: np.ndarray, y: np.ndarray) -> float:
    """The multiplier of ``pred`` with the lowest mean relative error (1 when none helps).

    A model fitted on the log scale predicts a geometric mean; for skewed, noisy metrics
    (tail latency) a slightly lower value has a lower *relative* error.
    """
    grid = np.exp(np.linspace(-0.5, 0.2, 36))
    errors = [float(np.mean(relative_errors(pred * s, y))) for s in grid]
    best = int(np.argmin(errors))
    return float(grid[best]) if errors[best] < float(np.mean(relative_errors(pred, y))) - 1e-4 else 1.0


def median_scale(pred: np.ndarray, y: np.ndarray) -> float:
    """The multiplier that leaves half the out-of-fold predictions high and half low.

    :func:`mre_scale`'s multiplier answers the *spread* of the errors as much as their bias:
    for log-normal errors of spread ``s`` the relative error is lowest at ``exp(-s**2)`` times
    an unbiased prediction (``|c x - 1|`` is bounded by 1 below and unbounded above).  The
    out-of-fold errors of a small sweep are wide (each fold model never saw a third of it),
    the served model's much narrower, so that shrink lands on predictions that did not need
    it.  A metric other metrics are derived from (IOPS: Little's law, bandwidth, the open
    loop's ``L / X(L)``) must be unbiased, not shrunk: on a 30-point zram sweep the MRE
    multiplier of IOPS was 0.61 (the grid's edge), every served IOPS 39 % low and the QD1
    latency ``1 / X`` 65 % high, while the median log error was -3 %.  1 when the
    predictions are not clearly biased.
    """
    ok = (pred > 0) & (y > 0) & np.isfinite(pred) & np.isfinite(y)
    n = int(ok.sum())
    # a sign test at the selection's own tolerance: no multiplier unless clearly more than
    # half the predictions fall on one side (else a model that is right stays exactly right)
    high = int((pred[ok] > y[ok]).sum())
    if n == 0 or abs(high - n / 2) <= SELECT_TOLERANCE * np.sqrt(n) / 2:
        return 1.0
    return float(np.exp(np.median(np.log(y[ok] / pred[ok]))))


# Blends tried among the best candidates: (indices into the ranking, weights).
_BLENDS: tuple[tuple[tuple[int, ...], tuple[float, ...]], ...] = (
    ((0, 1), (0.75, 0.25)),
    ((0, 1), (0.5, 0.5)),
    ((0, 1), (0.25, 0.75)),
    ((0, 1, 2), (1 / 3, 1 / 3, 1 / 3)),
)


def blend_logs(preds: list[np.ndarray], weights: list[float] | tuple[float, ...]) -> np.ndarray:
    """Weighted geometric mean of positive predictions."""
    total = np.zeros_like(preds[0], dtype=np.float64)
    for p, w in zip(preds, weights, strict=True):
        total += w * np.log(np.maximum(p, 1e-12))
    return np.exp(total)


def select(
    w: np.ndarray,
    y: np.ndarray,
    splits: list[tuple[np.ndarray, np.ndarray]],
    candidates: list[Candidate],
    budget_s: float | None,
    *,
    blend: bool = True,
    tune: bool = True,
    tolerance: float = SELECT_TOLERANCE,
    unbiased: bool = False,
) -> Selection:
    """Choose a model for ``y`` by cross-validation within a time budget.

    1. Score the candidates in order (the first :data:`HEAD` always, the rest while the
       budget lasts) and pick one by the paired rule below.
    2. Tune (when ``tune``): score the winner's :func:`neighbours`, then theirs, while
       the budget lasts (all of them when ``budget_s`` is None); a step is taken when it
       wins.
    3. Try weighted geometric blends of the best two (and three) -- families that fail
       in different places (trees at the sweep's edges, a Gaussian process at a regime
       cliff) often do better together.

    The cross-validated error of a few dozen points is itself noisy, so a challenger
    replaces the current choice only if it is better by more than ``tolerance`` standard
    errors of the paired per-point difference: a paired version of the
    one-standard-error rule (Breiman et al.).  The winner then gets the multiplier that
    minimises its out-of-fold relative error, or with ``unbiased`` the median one
    (:func:`median_scale`: for a metric others are derived from).
    """
    start = time.monotonic()
    scores: dict[str, float] = {}
    tried: list[tuple[float, Candidate, np.ndarray]] = []

    def out_of_budget() -> bool:
        return budget_s is not None and time.monotonic() - start > budget_s

    def score(cand: Candidate) -> _Option:
        pred = oof_predict(w, y, splits, cand)
        mre = float(np.mean(relative_errors(pred, y)))
        scores[cand.name] = mre
        tried.append((mre, cand, pred))
        return _Option([cand], None, pred, relative_errors(pred, y))

    champion: _Option | None = None
    for i, cand in enumerate(candidates):
        if i >= HEAD and out_of_budget():
            break
        champion = _challenge(champion, score(cand), tolerance)
    assert champion is not None, "select() needs at least one candidate"
    seen = {c.name for _, c, _ in tried}
    frontier = list(champion.members) if tune else []
    while frontier and not out_of_budget():
        base = frontier.pop(0)
        for cand in neighbours(base):
            if cand.name in seen or out_of_budget():
                continue
            seen.add(cand.name)
            winner = _challenge(champion, score(cand), tolerance)
            if winner is not champion:
                champion = winner
                frontier.append(cand)
    if blend:
        ranked = sorted(tried, key=lambda t: t[0])
        for members, wts in _BLENDS:
            if members[-1] >= len(ranked):
                continue
            parts = [ranked[i][1] for i in members]
            blended = blend_logs([ranked[i][2] for i in members], wts)
            scores[" + ".join(f"{x:.2f} {c.name}" for c, x in zip(parts, wts, strict=True))] = float(
                np.mean(relative_errors(blended, y))
            )
            option = _Option(parts, list(wts), blended, relative_errors(blended, y))
            champion = _challenge(champion, option, tolerance)
    scale = median_scale(champion.pred, y) if unbiased else mre_scale(champion.pred, y)
    pred = champion.pred * scale
    mre = float(np.mean(relative_errors(pred, y)))
    return Selection(champion.members, pred, mre, scores, scale, champion.weights)


@dataclass
class _Option:
    """A scored choice: one candidate, or a blend, with its out-of-fold predictions and errors."""

    members: list[Candidate]
    weights: list[float] | None
    pred: np.ndarray
    errors: np.ndarray


def clearly_better(
    incumbent: np.ndarray, challenger: np.ndarray, tolerance: float = SELECT_TOLERANCE
) -> bool:
    """Whether per-point errors ``challenger`` beat ``incumbent`` by ``tolerance`` paired standard errors."""
    gain = incumbent - challenger
    return bool(gain.mean() > tolerance * gain.std() / np.sqrt(len(gain)) + 1e-12)


def _challenge(champion: _Option | None, challenger: _Option, tolerance: float) -> _Option:
    """The challenger if it clearly beats the champion, else the champion."""
    if champion is None or clearly_better(champion.errors, challenger.errors, tolerance):
        return challenger
    return champion


def conformal_q(pred: np.ndarray, y: np.ndarray, level: float) -> float:
    """Split-conformal half-width on the log scale from out-of-fold predictions."""
    ok = (pred > 0) & (y > 0)
    resid = np.sort(np.abs(np.log(pred[ok]) - np.log(y[ok])))
    n = len(resid)
    if n == 0:
        return float("nan")
    k = int(np.ceil((n + 1) * level)) - 1
    return float(resid[min(k, n - 1)])
