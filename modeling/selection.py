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

import numpy as np
from sklearn.model_selection import GroupKFold

from modeling.estimators import make_estimator
from modeling.features import compute_features


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


def _c(feature_set: str, kind: str, **params: Any) -> Candidate:
    return Candidate(feature_set, kind, tuple(sorted(params.items())))


def default_candidates(
    feature_sets: tuple[str, ...] = ("extended", "basic"), quick: bool = False
) -> list[Candidate]:
    """Candidate configurations, most promising first (the order found best on fio-plot data)."""
    xgb = {"learning_rate": 0.05, "subsample": 0.8}
    out: list[Candidate] = []
    for fs in feature_sets:
        out += [
            # cheapest strong candidate first, so a tiny budget still trains a good model
            _c(fs, "xgboost", n_estimators=300, max_depth=6, **xgb),
            _c(fs, "extra_trees", n_estimators=60, max_features=0.5, linear_base=True),
            _c(fs, "xgboost", n_estimators=300, max_depth=6, linear_base=True, **xgb),
        ]
        if quick:
            continue
        out += [
            _c(fs, "xgboost", n_estimators=600, max_depth=8, learning_rate=0.03, subsample=0.8),
            _c(fs, "xgboost", n_estimators=400, max_depth=6, objective="absolute", **xgb),
            _c(fs, "cart", min_samples_leaf=1),
            _c(fs, "extra_trees", n_estimators=60),
            _c(fs, "cart", min_samples_leaf=2, linear_base=True),
        ]
    return out


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

    best: list[Candidate]  # one candidate, or two whose log-predictions are averaged
    oof: np.ndarray
    mre: float
    scores: dict[str, float]
    scale: float = 1.0

    @property
    def name(self) -> str:
        return " + ".join(c.name for c in self.best)


def mre_scale(pred: np.ndarray, y: np.ndarray) -> float:
    """The multiplier of ``pred`` with the lowest mean relative error (1 when none helps).

    A model fitted on the log scale predicts a geometric mean; for skewed, noisy metrics
    (tail latency) a slightly lower value has a lower *relative* error.
    """
    grid = np.exp(np.linspace(-0.5, 0.2, 36))
    errors = [float(np.mean(relative_errors(pred * s, y))) for s in grid]
    best = int(np.argmin(errors))
    return float(grid[best]) if errors[best] < float(np.mean(relative_errors(pred, y))) - 1e-4 else 1.0


def select(
    w: np.ndarray,
    y: np.ndarray,
    splits: list[tuple[np.ndarray, np.ndarray]],
    candidates: list[Candidate],
    budget_s: float | None,
    *,
    blend: bool = True,
) -> Selection:
    """Try candidates in order (at least one) until ``budget_s`` is spent; keep the lowest MRE.

    The two best are also tried as a blend (geometric mean), and the winner gets the
    multiplier that minimises its out-of-fold relative error.
    """
    start = time.monotonic()
    tried: list[tuple[float, Candidate, np.ndarray]] = []
    scores: dict[str, float] = {}
    for cand in candidates:
        if tried and budget_s is not None and time.monotonic() - start > budget_s:
            break
        pred = oof_predict(w, y, splits, cand)
        mre = float(np.mean(relative_errors(pred, y)))
        scores[cand.name] = mre
        tried.append((mre, cand, pred))
    tried.sort(key=lambda t: t[0])
    mre, cand, pred = tried[0]
    best = [cand]
    if blend and len(tried) >= 2:
        blended = np.exp((np.log(np.maximum(pred, 1e-12)) + np.log(np.maximum(tried[1][2], 1e-12))) / 2)
        blend_mre = float(np.mean(relative_errors(blended, y)))
        scores[f"{cand.name} + {tried[1][1].name}"] = blend_mre
        if blend_mre < mre:
            mre, pred, best = blend_mre, blended, [cand, tried[1][1]]
    scale = mre_scale(pred, y)
    pred = pred * scale
    return Selection(best, pred, float(np.mean(relative_errors(pred, y))), scores, scale)


def conformal_q(pred: np.ndarray, y: np.ndarray, level: float) -> float:
    """Split-conformal half-width on the log scale from out-of-fold predictions."""
    ok = (pred > 0) & (y > 0)
    resid = np.sort(np.abs(np.log(pred[ok]) - np.log(y[ok])))
    n = len(resid)
    if n == 0:
        return float("nan")
    k = int(np.ceil((n + 1) * level)) - 1
    return float(resid[min(k, n - 1)])
