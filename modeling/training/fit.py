"""Fit every metric's models of one device from a DataFrame of measurements.

Pure computation (no data directory): :func:`fit_device_model` chooses an estimator per
metric by grouped cross-validation, decides per metric whether the physics derivation
from IOPS beats a direct model, fits region models where a region has enough data and
keeps them for ``auto`` only where they beat the global model on that region, and
calibrates conformal intervals on the out-of-fold errors.

Repeated measurements of one workload are reduced to their median before fitting: a run
that stalled (the virtual disk here sometimes delivers a twentieth of its usual rate for
a second) then moves nothing, where a mean -- even a geometric one -- would be dragged.
The intervals are still calibrated against every single run, so they say where the next
measurement will land, noise included.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any
from collections.abc import Callable

import numpy as np
import pandas as pd

from modeling.serving.device_model import DeviceModel
from modeling.serving.metric_models import DERIVABLE, MEAN_MODES, MetricSpec, ScopeModel, derive_metric
from modeling.workload_matrix import region_codes, workload_matrix
from modeling.errors import NoData
from modeling.estimators.families import make_estimator
from modeling.features import compute_features
from modeling.training.accuracy import oof_evaluation
from modeling.training.selection import (
    Candidate,
    Selection,
    conformal_q,
    clearly_better,
    cv_folds,
    default_candidates,
    for_metric,
    median_scale,
    mre_scale,
    oof_predict,
    relative_errors,
    SELECT_TOLERANCE,
    select,
    workload_groups,
)
from modeling.workload import PERCENTILE_ORDER
from modeling.serving.physics.limits import PhysicsLimits
from modeling.serving.physics.laws import order_percentiles
from modeling.store.open_loop_rows import closed_loop_rows
from modeling.training.laws import choose_laws
from modeling.training.tail_floor import consistent_tail
from modeling.training.tail_guard import (
    BIMODAL_SHARE,
    FALLBACK_MULTIPLIER,
    GUARDED,
    KNEE,
    UNFOLLOWED,
    TAIL_BLEND,
    TAIL_GUARDS,
    TAIL_ONE_SE,
    blend,
    blend_scope,
    choose_weight,
    knee_share,
    one_se_weight,
    options,
    plain_selection,
    unscaled,
)
from modeling import training
from modeling.workload import BASIC_FIELDS, METRICS, PERCENTILE_METRICS, REGION_NAMES

MIN_ROWS = training.MIN_ROWS
"""Fewest distinct measured workloads a device needs to be trained (:data:`modeling.training.MIN_ROWS`)."""
RUNG_KINDS = ("xgboost", "extra_trees", "cart")
"""The estimator families a further percentile rung may use (compiled trees: cheap to serve)."""
MIN_REGION_ROWS = 16
"""Fewest distinct workloads a region needs for its own model."""
INTERVAL_LEVEL = 0.9
"""Nominal coverage of the prediction intervals."""
SCREEN_MARGIN = 1.2
"""A percentile rung's own model is selected in full only where its untuned first candidate
comes within this factor of the ratio's CV error (tuning and blends rarely gain more)."""
PHYSICS_TOLERANCE = 1.05
"""A physics derivation is kept unless a direct model has a CV error this many times lower."""
LAW_HOLDS = 0.02
"""A law whose median gap on the measurements is below this is used without trying a free model."""
UNBIASED = ("iops", "latency_mean_us", "bandwidth_mib_s")
"""Metrics whose multiplier is the median one (:func:`~modeling.training.selection.median_scale`).

Chosen by cross-validation of the whole training (outer 5 folds, inner 3, the bench's 10 s
budget) on the bench's 30-point zram sweep: with the MRE multiplier (0.61 on IOPS, the
grid's edge) the held-out IOPS error was a little lower overall (0.50 against 0.52: shrinking
pays where errors are wide, 1 MiB and 4-16 jobs) but 0.41 against 0.16 at 1-2 jobs and
sizes up to 16 KiB, and ``1 / IOPS`` -- the QD1 latency of the open loop -- was off by 0.80
against 0.21 there (1.11 against 0.53 overall); mean latency 0.15 against 0.13 there.  The
served model's IOPS error on its own sweep went from 39 % to 0.4 %.  The tail keeps the MRE multiplier."""
_LAW_NAMES = {"bandwidth_mib_s": "IOPS x mean request size", "latency_mean_us": "Little's law"}

Progress = Callable[[str, float], None]


def training_rows(
    frame: pd.DataFrame, min_rows: int = MIN_ROWS
) -> tuple[np.ndarray, dict[str, np.ndarray], pd.DataFrame]:
    """Workload matrix and metric vectors of the usable rows (``NoData`` below ``min_rows``).

    The metrics trained are those the data has (a column with at least one positive,
    finite value); a row is usable when every one of them is finite and > 0 in it.
    """
    missing = [c for c in BASIC_FIELDS if c not in frame.columns]
    metrics = [m for m in METRICS if m in frame.columns and _has_values(frame[m])]
    if frame.empty or missing or not metrics:
        missing += [m for m in METRICS if m not in metrics]
        raise NoData(
            f"no usable measurements (missing columns: {', '.join(missing) or 'none'}, rows: {len(frame)})"
        )
    # open-loop points (collectors.sweep.openloop): their IOPS is the offered rate, not the device's
    frame = closed_loop_rows(frame)
    values = frame[metrics].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(values).all(axis=1) & (values > 0).all(axis=1)
    clean = frame.loc[ok].reset_index(drop=True)
    if len(clean) < min_rows:
        raise NoData(f"only {len(clean)} usable measured points; at least {min_rows} are needed to train")
    w = workload_matrix(clean)
    ys = {m: clean[m].to_numpy(dtype=np.float64) for m in metrics}
    for m in PERCENTILE_METRICS:
        # a percentile is learned only where every usable run holds it (fio sweeps do;
        # a CSV of means and p99s does not)
        if m in clean.columns:
            y = pd.to_numeric(clean[m], errors="coerce").to_numpy(dtype=np.float64)
            if np.isfinite(y).all() and (y > 0).all():
                ys[m] = y
    return w, ys, clean


def _has_values(column: pd.Series) -> bool:
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
    return bool((np.isfinite(values) & (values > 0)).any())


def fold_spread(oof: np.ndarray, y: np.ndarray, splits: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Standard deviation of the per-fold mean relative errors: how much CV error varies by chance."""
    per_fold = [_mre(oof[test], y[test]) for _, test in splits if len(test)]
    return float(np.std(per_fold, ddof=1)) if len(per_fold) > 1 else 0.0


def median_by_workload(
    w: np.ndarray, ys: dict[str, np.ndarray]
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """One row per distinct workload, each metric its median over repeats; and each input row's group."""
    groups = workload_groups(w)
    _, first = np.unique(groups, return_index=True)
    if len(first) == len(w):
        return w[first], {m: y[first] for m, y in ys.items()}, groups
    order = np.argsort(groups, kind="stable")
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    medians = {m: np.array([np.median(part) for part in np.split(y[order], bounds)]) for m, y in ys.items()}
    return w[first], medians, groups


class _Runs:
    """Calibrates intervals against every measured run of the workloads a model was fitted on."""

    def __init__(self, groups: np.ndarray, ys: dict[str, np.ndarray]) -> None:
        self.groups = groups
        self.ys = ys

    def q(self, oof: np.ndarray, metric: str, mask: np.ndarray | None = None) -> float:
        """Conformal half-width of out-of-fold predictions (one per workload, or per masked workload)."""
        if mask is None:
            return conformal_q(oof[self.groups], self.ys[metric], INTERVAL_LEVEL)
        local = np.cumsum(mask) - 1
        inside = mask[self.groups]
        return conformal_q(oof[local[self.groups[inside]]], self.ys[metric][inside], INTERVAL_LEVEL)


def _scope(scope: str, sel: Selection, w: np.ndarray, y: np.ndarray, q: float) -> ScopeModel:
    members = [
        (c.feature_set, make_estimator(c.kind, c.kwargs).fit(compute_features(w, c.feature_set), y))
        for c in sel.best
    ]
    return ScopeModel(
        scope=scope,
        members=members,
        q=q,
        lo=w.min(axis=0),
        hi=w.max(axis=0),
        cv={"mre": sel.mre},
        scale=sel.scale,
        weights=sel.weights,
    )


def _describe(sel: Selection) -> dict[str, Any]:
    first = sel.best[0]
    return {
        "estimator": " + ".join(c.kind for c in sel.best),
        "feature_set": first.feature_set,
        "params": first.kwargs,
        "members": [
            {"estimator": c.kind, "feature_set": c.feature_set, "params": c.kwargs, "weight": wt}
            for c, wt in zip(sel.best, sel.weights or [1.0 / len(sel.best)] * len(sel.best), strict=True)
        ],
        "scale": sel.scale,
        "cv_mre": sel.mre,
    }


def _mre(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(relative_errors(pred, y)))


@dataclass
class _Fit:
    """What every step of one device's fit shares: data, folds, regions, budget, progress."""

    w: np.ndarray
    ys: dict[str, np.ndarray]
    runs: _Runs
    cands: list[Candidate]
    tune: bool
    folds: int
    splits: list[tuple[np.ndarray, np.ndarray]]
    region_masks: dict[str, np.ndarray]
    gaps: dict[str, float]
    per_call: float | None
    calls: int
    report_progress: Progress
    done: int = 0
    specs: dict[str, MetricSpec] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    region_sel: dict[tuple[str, str], Selection] = field(default_factory=dict)
    selections: dict[str, Selection] = field(default_factory=dict)
    final_oof: dict[str, np.ndarray] = field(default_factory=dict)
    # out-of-fold predictions of the tail/mean ratio, when the tail is predicted as a ratio
    ratio_oof: np.ndarray | None = None
    # per percentile, paired standard errors the tail rules must win by over the plain model (None: no guard)
    tail_guard: dict[str, float] | None = None
    # a percentile the guard blended from a ratio: the plain model's out-of-fold predictions, the weight
    blend_plain: dict[str, tuple[np.ndarray, float]] = field(default_factory=dict)
    # a bench's sink for the guard's inner out-of-fold predictions (None: not recorded)
    guard_oof: dict[str, dict[str, Any]] | None = None

    def step(self, message: str) -> None:
        """Report one selection call done."""
        self.done += 1
        self.report_progress(message, min(self.done / self.calls, 1.0))


def fit_device_model(
    frame: pd.DataFrame,
    *,
    device: str = "device",
    version: str = "unsaved",
    folds: int = 5,
    time_budget_s: float | None = None,
    progress: Progress | None = None,
    candidates: list[Candidate] | None = None,
    feature_sets: tuple[str, ...] = ("extended",),
    regions: bool = True,
    physics: bool = True,
    tail_guard: float | None = None,
    guard_oof: dict[str, dict[str, Any]] | None = None,
) -> tuple[DeviceModel, dict[str, Any]]:
    """Train all metrics on ``frame``; returns the model and a JSON-ready training report.

    ``feature_sets`` are the feature sets the default candidates use; with both,
    cross-validation chooses per metric.  Explicit ``candidates`` are used as given, not
    tuned.  ``tail_guard``: the latency percentiles fall back to a plain log-target
    XGBoost unless their rules beat it by this many paired standard errors
    (:mod:`modeling.training.tail_guard`: or a blend of the two, :data:`TAIL_BLEND`); None
    means :data:`TAIL_GUARDS` with the default candidates and no guard with explicit ones
    (``-inf`` records the comparison and always keeps the rules, unblended).
    ``guard_oof``: a dict the guard fills, per percentile, with what it compared -- the
    training rows (``w``, ``y``) and the out-of-fold predictions of the rules and of the
    plain model (``rules``, ``plain`` with its CV multiplier ``scale``) -- so a bench can
    judge other rules of choice without training again (``bench/tail_lodo.py``).
    """
    start = time.monotonic()
    w_runs, ys_runs, runs = training_rows(frame)
    w, ys, run_groups = median_by_workload(w_runs, ys_runs)
    if len(w) < MIN_ROWS:
        raise NoData(f"only {len(w)} distinct measured workloads; at least {MIN_ROWS} are needed to train")
    fit = _plan(
        w, ys, run_groups, ys_runs, folds, time_budget_s, progress, candidates, feature_sets, regions, physics
    )
    fit.guard_oof = guard_oof
    if tail_guard is not None:
        fit.tail_guard = dict.fromkeys(GUARDED, tail_guard)
    elif candidates is None:
        fit.tail_guard = dict(TAIL_GUARDS)
    if fit.tail_guard is not None:
        fit.calls += sum(m in ys for m in GUARDED)
    by_law = {m for m, gap in fit.gaps.items() if physics and gap <= LAW_HOLDS}
    # only the metrics the data has; the laws derive from the IOPS model, so it comes first
    # (the further percentiles come after, as ratios to the mean latency)
    for metric in sorted((m for m in ys if m in METRICS), key=lambda m: (m != "iops", METRICS.index(m))):
        if metric in by_law:
            _fit_by_law(fit, metric)
            continue
        # the tail's region models wait for its ratio: they are wasted where the ratio wins
        tail_ratio = physics and metric == "latency_p99_us" and "latency_mean_us" in fit.final_oof
        spec, entry = _fit_direct(fit, metric, regions=not tail_ratio)
        if physics and metric in DERIVABLE and "iops" in ys:
            spec = _prefer_physics(fit, metric, spec, entry)
        if tail_ratio:
            spec = _prefer_ratio(fit, spec, entry)
            if spec.mode == "direct":
                spec = _fit_regions(fit, metric, spec, entry)
            else:
                fit.done += len(fit.region_masks)
        fit.specs[metric] = spec
        fit.report[metric] = entry
        _guard_tail(fit, metric)
    for metric, entry in fit.report.items():
        entry["global"]["cv_fold_std"] = fold_spread(fit.final_oof[metric], ys[metric], fit.splits)
    for metric in PERCENTILE_METRICS:
        if metric in ys and "latency_mean_us" in fit.final_oof:
            _fit_percentile(fit, metric)
            _guard_tail(fit, metric)
    _widen_bimodal(fit)
    data_regions = frozenset(REGION_NAMES[c] for c in np.unique(region_codes(w)))
    model = DeviceModel(device, version, fit.specs, data_regions, limits=measured_limits(w, ys))
    served = _served_oof(fit)
    evaluation = oof_evaluation(served, ys, folds=len(fit.splits), runs=runs)
    for metric, e in evaluation["metrics"].items():
        # the spread of the very errors ``mre`` averages (the served model's, not the global
        # model's): what the activation gate weighs a difference of ``mre`` against
        e["fold_std"] = fold_spread(served[metric], ys[metric], fit.splits)
    summary = {
        "metrics": fit.report,
        "missing_metrics": [m for m in METRICS if m not in ys],
        "n_rows": int(len(w_runs)),
        "n_workloads": int(len(w)),
        "folds": len(fit.splits),
        "interval_level": INTERVAL_LEVEL,
        "feature_sets": sorted({c.feature_set for c in fit.cands}),
        "data_regions": sorted(data_regions),
        "evaluation": evaluation,
        "percentile_ladder": _ladder_cv(fit),
        "train_seconds": round(time.monotonic() - start, 3),
    }
    return model, summary


def _ladder_cv(fit: _Fit) -> dict[str, float]:
    """CV MRE of each percentile as served: the out-of-fold ladder put in order first."""
    names = ("latency_mean_us", *PERCENTILE_ORDER)
    ladder = {m: fit.final_oof[m].copy() for m in names if m in fit.final_oof}
    if len(ladder) < 2 or "latency_mean_us" not in ladder:
        return {}
    order_percentiles(ladder)
    return {m: _mre(ladder[m], fit.ys[m]) for m in PERCENTILE_ORDER if m in ladder}


def _served_oof(fit: _Fit) -> dict[str, np.ndarray]:
    """Out-of-fold predictions of every metric as the model serves it by default (``auto``).

    The global model's, replaced on each region whose own model won there; a derived
    metric follows the IOPS model's regions, a ratio the served mean latency.
    """
    served: dict[str, np.ndarray] = {}
    for metric in ("iops",) + tuple(m for m in METRICS if m != "iops"):
        if metric not in fit.specs:  # the data did not have it (training covers what it has)
            continue
        spec = fit.specs[metric]
        if spec.mode in MEAN_MODES:
            assert fit.ratio_oof is not None
            served[metric] = fit.ratio_oof * served["latency_mean_us"]
            if spec.mode == "blend":
                served[metric] = blend(served[metric], *fit.blend_plain[metric])
            continue
        oof = fit.final_oof[metric].copy()
        for region in spec.auto_regions:
            mask = fit.region_masks[region]
            if spec.mode == "derived":
                iops = fit.region_sel[("iops", region)].oof
                oof[mask] = derive_metric(metric, iops, fit.w[mask]) * spec.scopes[region].scale
            else:
                oof[mask] = fit.region_sel[(metric, region)].oof
        served[metric] = oof
    return served


def _served_metric(fit: _Fit, metric: str) -> np.ndarray:
    """Out-of-fold predictions of one metric as served by default (``auto`` regions)."""
    if metric in METRICS:
        return _served_oof(fit)[metric]
    spec = fit.specs[metric]
    oof = fit.final_oof[metric].copy()
    if spec.mode == "direct":
        for region in spec.auto_regions:
            oof[fit.region_masks[region]] = fit.region_sel[(metric, region)].oof
    return oof


def _guard_tail(fit: _Fit, metric: str) -> None:
    """A latency percentile served by the plain log-target model unless its rules clearly beat it.

    Or, where :data:`TAIL_BLEND` allows, by a geometric blend of the two
    (:func:`~modeling.training.tail_guard.choose_weight`).
    """
    if fit.tail_guard is None or metric not in GUARDED or metric not in fit.specs:
        return
    y = fit.ys[metric]
    rules = _served_metric(fit, metric)
    # on the training's own features (a user who asked for the basic set gets no extended model)
    scaled = plain_selection(fit.w, y, fit.splits, fit.per_call, fit.cands[0].feature_set)
    raw = unscaled(scaled, y)
    # the comparison is with the plain model as it would be served (with its multiplier or not);
    # the bench judges both, and every blend, leave one device out
    scored = {"scaled": options(rules, scaled.oof, y), "raw": options(rules, raw.oof, y)}
    if fit.guard_oof is not None:
        fit.guard_oof[metric] = {"w": fit.w, "y": y, "rules": rules.copy(), "plain": scaled.oof.copy(),
                                 "scale": scaled.scale}
    kind = "scaled" if FALLBACK_MULTIPLIER[metric] else "raw"
    plain = scaled if FALLBACK_MULTIPLIER[metric] else raw
    threshold = fit.tail_guard[metric]
    # -inf keeps the rules alone (the bench's reference: it judges the blends itself)
    blends = TAIL_BLEND[metric] and threshold > -math.inf
    one_se = None
    if blends and TAIL_ONE_SE[metric] and threshold < math.inf:
        weight, best = one_se_weight(rules, plain.oof, y)
        one_se = {"weight": weight, "lowest_cv_weight": best}
    else:
        weight = choose_weight(scored[kind], threshold, blends)
    z = scored[kind][1.0][1]
    info = {
        "plain": plain.name,
        "plain_cv_mre": plain.mre,
        "plain_cv_mre_scaled": scaled.mre,
        "plain_cv_mre_raw": raw.mre,
        "plain_multiplier": plain.scale,
        "rules_cv_mre": _mre(rules, y),
        # JSON has no infinity: a gain with no spread at all is reported as +-1e6
        "advantage_se": _finite(z),
        # over the plain model with and without its multiplier (the bench judges both)
        "advantage_scaled_se": _finite(scored["scaled"][1.0][1]),
        "advantage_raw_se": _finite(scored["raw"][1.0][1]),
        # per blend weight of the rules: [CV MRE, advantage over the plain model in SE]
        "blends": {
            k: {f"{wt:g}": [mre, _finite(a)] for wt, (mre, a) in by.items()} for k, by in scored.items()
        },
        "threshold": _finite(threshold),
        # the one-SE rule's choice where it decides (TAIL_ONE_SE), else None
        "one_se": one_se,
        "weight": weight,
        "kept": weight == 1.0,
    }
    served = {1.0: "rules kept", 0.0: f"fall back to {plain.name}"}.get(weight, f"blend {weight:g} rules")
    fit.step(f"{metric}: {served} ({z:+.2f} SE over plain)")
    if weight == 1.0:
        fit.report[metric]["tail_guard"] = info
        return
    if weight == 0.0:
        spec, entry = _fit_direct(fit, metric, plain, regions=False)
        entry["global"]["cv_fold_std"] = fold_spread(plain.oof, y, fit.splits)
    else:
        spec, entry = _blend_spec(fit, metric, plain, weight)
    fit.specs[metric] = spec
    fit.report[metric] = {**entry, "tail_guard": info}


def _finite(x: float) -> float:
    return float(np.clip(x, -1e6, 1e6))


def _blend_spec(fit: _Fit, metric: str, plain: Selection, weight: float) -> tuple[MetricSpec, dict[str, Any]]:
    """The rules' spec blended with the plain model (``rules ** weight x plain ** (1 - weight)``).

    A ratio becomes a ``blend`` (the mean latency to the power ``weight``); a direct model
    stays direct, each of its scopes blended with the plain global model.  The out-of-fold
    predictions follow, so the served ones (:func:`_served_oof`) are the blend's.
    """
    w, y = fit.w, fit.ys[metric]
    rules = fit.specs[metric]
    entry = dict(fit.report[metric])
    plain_scope = _scope("global", plain, w, y, float("nan"))
    scopes = {}
    for name, sm in rules.scopes.items():
        mask = None if name == "global" else fit.region_masks[name]
        if mask is None:
            oof = blend(fit.final_oof[metric], plain.oof, weight)
            fit.final_oof[metric] = oof
        else:
            rsel = fit.region_sel[(metric, name)]
            oof = blend(rsel.oof, plain.oof[mask], weight)
            fit.region_sel[(metric, name)] = replace(rsel, oof=oof)
        truth = y if mask is None else y[mask]
        scopes[name] = blend_scope(sm, plain_scope, weight, fit.runs.q(oof, metric, mask), _mre(oof, truth))
    if rules.mode == "ratio":
        fit.blend_plain[metric] = (plain.oof, weight)
        spec = MetricSpec(
            metric, "blend", scopes, rules.auto_regions, mean_power=weight,
            ratio_members=len(rules.scopes["global"].members),
        )
    else:
        spec = MetricSpec(metric, rules.mode, scopes, rules.auto_regions)
    entry["mode"] = spec.mode
    entry["global"] = {
        **entry["global"],
        "estimator": f"{weight:g} x ({entry['global']['estimator']}) + {1 - weight:g} x {plain.name}",
        "cv_mre": _mre(fit.final_oof[metric], y),
        "blend": {"weight": weight, "plain": _describe(plain)},
    }
    entry["global"]["cv_fold_std"] = fold_spread(fit.final_oof[metric], y, fit.splits)
    return spec, entry


def _widen_bimodal(fit: _Fit) -> None:
    """A bimodal tail's intervals widened to the errors on its knee workloads, and marked."""
    if "latency_p90_us" not in fit.ys:
        return
    for metric in ("latency_p99_us", "latency_p99_9_us"):
        if metric not in fit.specs or fit.specs[metric].mode == "derived":
            continue
        share, knee = knee_share(fit.ys[metric], fit.ys["latency_p90_us"])
        if share < BIMODAL_SHARE:
            continue
        served = _served_metric(fit, metric)
        # a slow mode the model follows (a fixed stall learned as such) is predictable: only
        # one whose workloads it typically misses by over UNFOLLOWED times is called bimodal
        ok = knee & (served > 0)
        if not ok.any() or np.median(np.abs(np.log(served[ok] / fit.ys[metric][ok]))) <= np.log(UNFOLLOWED):
            continue
        q_knee = conformal_q(served[knee], fit.ys[metric][knee], INTERVAL_LEVEL)
        for sm in fit.specs[metric].scopes.values():
            if np.isfinite(q_knee):
                sm.q = q_knee if np.isnan(sm.q) else max(sm.q, q_knee)
            sm.cv["bimodal_share"] = share
            sm.cv["bimodal_knee"] = KNEE
        fit.report[metric]["bimodal"] = {"share": share, "knee_q": float(q_knee)}


def _plan(
    w: np.ndarray,
    ys: dict[str, np.ndarray],
    run_groups: np.ndarray,
    ys_runs: dict[str, np.ndarray],
    folds: int,
    time_budget_s: float | None,
    progress: Progress | None,
    candidates: list[Candidate] | None,
    feature_sets: tuple[str, ...],
    regions: bool,
    physics: bool,
) -> _Fit:
    """Folds, region masks, the laws that hold on the data, and the time per selection call."""
    cands = candidates or default_candidates(feature_sets, n_rows=len(w))
    codes = region_codes(w)
    region_masks = {
        name: codes == i
        for i, name in enumerate(REGION_NAMES)
        if regions and MIN_REGION_ROWS <= (codes == i).sum() < len(w)
    }
    # Where a law holds on the measurements themselves (bandwidth = IOPS x size always does;
    # Little's law does for closed-loop engines, not for psync), fitting a free model for
    # that metric is wasted time: it can only learn the law back, with noise.
    gaps = {
        m: float(np.median(relative_errors(derive_metric(m, ys["iops"], w), ys[m])))
        for m in DERIVABLE
        if m in ys and "iops" in ys
    }
    by_law = {m for m, gap in gaps.items() if physics and gap <= LAW_HOLDS}
    calls = (len([m for m in ys if m in METRICS]) - len(by_law)) * (1 + len(region_masks)) + int(physics)
    # per rung: the ratio, and its own model with the region models
    calls += (2 + len(region_masks)) * sum(m in ys for m in PERCENTILE_METRICS)
    return _Fit(
        w=w,
        ys=ys,
        runs=_Runs(run_groups, ys_runs),
        cands=cands,
        tune=candidates is None,
        folds=folds,
        splits=cv_folds(np.arange(len(w)), folds),
        region_masks=region_masks,
        gaps=gaps,
        per_call=None if time_budget_s is None else max(time_budget_s / calls, 0.0),
        calls=calls,
        report_progress=progress or (lambda message, fraction: None),
    )


def _fit_by_law(fit: _Fit, metric: str) -> None:
    """A metric whose law holds on the data: derived from the IOPS model, no model of its own."""
    w, y = fit.w, fit.ys[metric]
    derived = derive_metric(metric, fit.selections["iops"].oof, w)
    derived_scaled = derived * median_scale(derived, y)
    derived_mre = _mre(derived_scaled, y)
    fit.specs[metric] = _derived_spec(
        metric, fit.specs["iops"], w, y, derived, fit.region_masks, fit.region_sel, fit.runs
    )
    fit.report[metric] = {
        "mode": "derived",
        "global": {
            "estimator": f"{_LAW_NAMES[metric]} over the IOPS model",
            "feature_set": fit.report["iops"]["global"]["feature_set"],
            "params": {},
            "cv_mre": derived_mre,
        },
        "regions": {},
        "physics": {"law_gap": fit.gaps[metric], "derived_cv_mre": derived_mre},
    }
    fit.final_oof[metric] = derived_scaled
    fit.step(f"{metric}: {_LAW_NAMES[metric]} holds on the data (median gap {fit.gaps[metric]:.2%})")


def _fit_direct(
    fit: _Fit, metric: str, sel: Selection | None = None, regions: bool = True
) -> tuple[MetricSpec, dict[str, Any]]:
    """The metric's own global model (``sel`` when already chosen) and region models, by cross-validation."""
    w, y = fit.w, fit.ys[metric]
    if sel is None:
        sel = select(w, y, fit.splits, for_metric(fit.cands, metric), fit.per_call, tune=fit.tune,
                     unbiased=metric in UNBIASED)
        fit.step(f"{metric}: global {sel.name} CV MRE {sel.mre:.2%}")
    fit.selections[metric] = sel
    entry: dict[str, Any] = {
        "mode": "direct",
        "global": {**_describe(sel), "scores": sel.scores},
        "regions": {},
    }
    scopes = {"global": _scope("global", sel, w, y, fit.runs.q(sel.oof, metric))}
    fit.final_oof[metric] = sel.oof
    spec = MetricSpec(metric, "direct", scopes, frozenset())
    return (_fit_regions(fit, metric, spec, entry) if regions else spec), entry


def _fit_regions(fit: _Fit, metric: str, spec: MetricSpec, entry: dict[str, Any]) -> MetricSpec:
    """``spec`` with a model per region, each kept for ``auto`` where it clearly beats the global one."""
    w, y = fit.w, fit.ys[metric]
    groups = np.arange(len(w))
    sel = fit.selections[metric]
    # a rate or a mean is kept unbiased (median_scale): IOPS is what the laws and the open loop
    # derive from, and a mean is served as one; the MRE shrink is for the tail
    unbiased = metric in UNBIASED
    scopes = dict(spec.scopes)
    auto: set[str] = set()
    for region, mask in fit.region_masks.items():
        rsplits = cv_folds(groups[mask], fit.folds)
        rsel = select(w[mask], y[mask], rsplits, for_metric(fit.cands, metric), fit.per_call, tune=fit.tune,
                      unbiased=unbiased)
        fit.region_sel[(metric, region)] = rsel
        global_mre = _mre(sel.oof[mask], y[mask])
        # a region model must clearly beat the global one there, by the same paired rule
        # as any challenger: with a few dozen points the CV comparison is noisy
        use = clearly_better(relative_errors(sel.oof[mask], y[mask]), relative_errors(rsel.oof, y[mask]))
        if use:
            auto.add(region)
        scopes[region] = _scope(region, rsel, w[mask], y[mask], fit.runs.q(rsel.oof, metric, mask))
        entry["regions"][region] = {
            "n": int(mask.sum()),
            **_describe(rsel),
            "global_cv_mre": global_mre,
            "auto": use,
        }
        fit.step(f"{metric}: {region} CV MRE {rsel.mre:.2%} (global there {global_mre:.2%})")
    return MetricSpec(metric, spec.mode, scopes, frozenset(auto))


def _prefer_physics(fit: _Fit, metric: str, spec: MetricSpec, entry: dict[str, Any]) -> MetricSpec:
    """The law over the IOPS model instead of the direct model, unless that is clearly better."""
    w, y = fit.w, fit.ys[metric]
    direct_mre = fit.selections[metric].mre
    derived = derive_metric(metric, fit.selections["iops"].oof, w)
    derived_scaled = derived * median_scale(derived, y)
    derived_mre = _mre(derived_scaled, y)
    entry["physics"] = {
        "law_gap": fit.gaps[metric],
        "derived_cv_mre": derived_mre,
        "direct_cv_mre": direct_mre,
    }
    # physics is the better prior: keep the law unless a free model is clearly better
    if derived_mre <= direct_mre * PHYSICS_TOLERANCE:
        spec = _derived_spec(
            metric, fit.specs["iops"], w, y, derived, fit.region_masks, fit.region_sel, fit.runs
        )
        entry["mode"] = "derived"
        entry["global"]["cv_mre"] = derived_mre
        fit.final_oof[metric] = derived_scaled
    return spec


def _prefer_ratio(fit: _Fit, spec: MetricSpec, entry: dict[str, Any]) -> MetricSpec:
    """Tail latency as a learned ratio to the mean latency, where that beats the direct model."""
    direct_mre = fit.selections["latency_p99_us"].mre
    # the relative-loss trees lead a tail's candidates (for_metric) because a tail jumps
    # between neighbouring workloads; where the measured one does not, no family is the
    # safe default and the lower CV error picks the ratio's model, as for the rungs (tail
    # study, 3 fold draws: p99 RAID5 12.5 -> 12.0 %, RAID0 21.0 -> 19.7 %, P420i 7.4 %
    # either way; on the SATA SSDs, whose tail jumps, letting it pick took one PM883 draw
    # from 45 to 153 %)
    consistent = consistent_tail(fit.w, fit.ys["latency_p99_us"], fit.ys["latency_mean_us"])
    ratio_spec, ratio_entry, ratio_oof = _ratio_spec(
        "latency_p99_us",
        fit.w,
        fit.ys["latency_p99_us"],
        fit.ys["latency_mean_us"],
        fit.final_oof["latency_mean_us"],
        fit.splits,
        fit.cands,
        fit.per_call,
        fit.runs,
        fit.tune,
        tolerance=0.0 if consistent else SELECT_TOLERANCE,
    )
    entry["physics"] = {
        "ratio_cv_mre": ratio_entry["cv_mre"], "direct_cv_mre": direct_mre, "consistent_tail": consistent
    }
    if ratio_entry["cv_mre"] < direct_mre:
        spec = ratio_spec
        entry["mode"] = "ratio"
        entry["global"] = ratio_entry
        fit.final_oof["latency_p99_us"] = ratio_oof
        fit.ratio_oof = ratio_oof / fit.final_oof["latency_mean_us"]
    return spec


def _fit_percentile(fit: _Fit, metric: str) -> None:
    """A further latency percentile: a learned multiple of the mean latency, or its own model.

    The percentiles are served as one curve, ordered along the ladder p50 <= p90 <= p99
    <= p99.9 with p99 >= mean (:func:`modeling.serving.physics.laws.order_percentiles`).  Each
    rung is learned the way that predicts it best on the same folds: the ratio to the mean
    first (over five fold draws on each fio-plot SATA SSD a boosted ratio had the lowest
    mean p99.9 error, 37-51 % against 54-76 % for a plain XGBoost of the log), then its
    own model (the body, p50 and p90, mostly follows the workload best by itself) where a
    cheap screen -- the rung's first candidate, untuned -- comes within
    :data:`SCREEN_MARGIN` of the ratio.  Region models are fitted only for a rung whose
    own model won: a ratio rung answers a region asked for by name with its global ratio.
    The report records the choice and every error it was made on.
    """
    y = fit.ys[metric]
    # a rung is served beside the four main metrics on every request that names it: only
    # tree families, which compile to lookup tables (a Gaussian process costs a kernel row
    # per answer; with GP rungs a batch of 10,000 ran 5x slower than without the rungs)
    cands = [c for c in fit.cands if c.kind in RUNG_KINDS] or fit.cands
    spec, entry, oof = _ratio_spec(
        metric,
        fit.w,
        y,
        fit.ys["latency_mean_us"],
        fit.final_oof["latency_mean_us"],
        fit.splits,
        cands,
        fit.per_call,
        fit.runs,
        fit.tune,
        # no family is the safe default for a rung's ratio (boosted trees on the SATA SSDs'
        # p99.9, relative-loss trees on RAID 0's, 0.37-0.51 against 0.30 CV MRE each way),
        # and the paired rule would let the first in order keep it: the lower CV error decides
        tolerance=0.0,
    )
    fit.step(f"{metric}: ratio to the mean latency, CV MRE {entry['cv_mre']:.2%}")
    first = for_metric(cands, metric)[0]
    screen = oof_predict(fit.w, y, fit.splits, first)
    screen_mre = _mre(screen * mre_scale(screen, y), y)
    physics: dict[str, Any] = {
        "ratio_cv_mre": entry["cv_mre"], "screen_cv_mre": screen_mre, "screen": first.name
    }
    report: dict[str, Any] = {"mode": "ratio", "global": entry, "regions": {}}
    if screen_mre < entry["cv_mre"] * SCREEN_MARGIN:
        sel = select(fit.w, y, fit.splits, for_metric(cands, metric), fit.per_call, tune=fit.tune)
        fit.step(f"{metric}: own model {sel.name} CV MRE {sel.mre:.2%}")
        physics["direct_cv_mre"] = sel.mre
        if sel.mre < entry["cv_mre"]:
            spec, report = _fit_direct(fit, metric, sel)
            oof = sel.oof
    else:
        fit.step(f"{metric}: own model screened out (CV MRE {screen_mre:.2%} untuned)")
    # the region steps a ratio rung skips
    fit.done += len(fit.region_masks) * (report["mode"] == "ratio")
    report["global"]["cv_fold_std"] = fold_spread(oof, y, fit.splits)
    fit.specs[metric] = spec
    fit.final_oof[metric] = oof
    fit.report[metric] = {**report, "physics": physics}


def _ratio_spec(
    metric: str,
    w: np.ndarray,
    y: np.ndarray,
    mean_y: np.ndarray,
    mean_oof: np.ndarray,
    splits: list[tuple[np.ndarray, np.ndarray]],
    cands: list[Candidate],
    budget: float | None,
    runs: _Runs,
    tune: bool,
    tolerance: float = SELECT_TOLERANCE,
) -> tuple[MetricSpec, dict[str, Any], np.ndarray]:
    """Tail latency as (learned tail/mean ratio) x (predicted mean latency), global scope only.

    Queueing makes tail and mean latency grow together; their ratio is often smoother
    than either, so the tree has less to learn.  Also returns the ratio's out-of-fold
    predictions (scaled as served).
    """
    sel = select(w, y / mean_y, splits, for_metric(cands, metric), budget, tune=tune, tolerance=tolerance)
    oof = sel.oof * mean_oof
    scale = mre_scale(oof, y)
    scope = _scope("global", sel, w, y / mean_y, runs.q(oof * scale, metric))
    scope.scale *= scale
    scope.cv = {"mre": _mre(oof * scale, y)}
    entry = {**_describe(sel), "cv_mre": scope.cv["mre"], "target": f"{metric} / latency_mean_us"}
    return MetricSpec(metric, "ratio", {"global": scope}), entry, oof * scale


def _derived_spec(
    metric: str,
    iops_spec: MetricSpec,
    w: np.ndarray,
    y: np.ndarray,
    derived_oof: np.ndarray,
    region_masks: dict[str, np.ndarray],
    region_sel: dict[tuple[str, str], Selection],
    runs: _Runs,
) -> MetricSpec:
    """A metric derived from the IOPS models, with intervals calibrated on its own errors."""
    scopes = {}
    for scope, sm in iops_spec.scopes.items():
        mask = None if scope == "global" else region_masks[scope]
        if mask is None:
            oof, truth = derived_oof, y
        else:
            oof, truth = derive_metric(metric, region_sel[("iops", scope)].oof, w[mask]), y[mask]
        scale = median_scale(oof, truth)
        q = runs.q(oof * scale, metric, mask)
        scopes[scope] = ScopeModel(scope, [], q, sm.lo, sm.hi, {"mre": _mre(oof * scale, truth)}, scale)
    return MetricSpec(metric, "derived", scopes, iops_spec.auto_regions)


def measured_limits(w: np.ndarray, ys: dict[str, np.ndarray]) -> PhysicsLimits:
    """The physics limits of the measured workloads ``w`` (distinct rows) and their metrics.

    Bandwidth is measured, or derived from IOPS where only IOPS was measured; data of
    latencies only caps no bandwidth.
    """
    if "bandwidth_mib_s" in ys:
        bandwidth = ys["bandwidth_mib_s"]
    elif "iops" in ys:
        bandwidth = derive_metric("bandwidth_mib_s", ys["iops"], w)
    else:
        bandwidth = None
    laws = choose_laws(w, ys.get("iops"))
    sizes = {mix: law.param for mix, law in laws.size.items() if law.param > 0}
    return replace(PhysicsLimits.measured(w, bandwidth), load_knee=laws.load.param, size_knee=sizes)
