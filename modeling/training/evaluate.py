"""Evaluate a device's modelling: nested k-fold cross-validation, or a hold-out file.

The k-fold evaluation is nested: each outer fold runs the whole training procedure
(estimator choice by inner cross-validation, physics choice, region models) on the other
folds and predicts the held-out one, so the reported errors are honest estimates for
unseen workloads.  Reported per metric: MRE, median and p90 relative error, R², the
empirical coverage of the prediction intervals, and the extrapolated share; side by
side: ``basic`` vs ``extended`` features, global vs region models per region, the physics
check (metrics derived from predicted IOPS), and the repeat-noise floor when the data has
repeats.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np
import pandas as pd

from modeling.serving.metric_models import DERIVABLE, derive_metric
from modeling.workload_matrix import region_codes
from modeling.errors import NoData
from modeling.features import FEATURE_SETS
from modeling.training.fit import fit_device_model, training_rows
from modeling.training.selection import (
    Candidate,
    cv_folds,
    default_candidates,
    relative_errors,
    workload_groups,
)
from modeling.store import DataDir
from modeling.training.accuracy import error_summary, noise_floor
from modeling.workload import METRICS, REGION_NAMES, WORKLOAD_FIELDS


@dataclass
class EvaluationReport:
    """Errors of a device's models; :meth:`to_dict` gives the JSON shape the CLI prints."""

    device: str
    method: str
    n: int
    metrics: dict[str, dict[str, Any]]
    feature_sets: dict[str, dict[str, float]] = field(default_factory=dict)
    regions: dict[str, dict[str, Any]] = field(default_factory=dict)
    physics: dict[str, dict[str, Any]] = field(default_factory=dict)
    noise_floor: dict[str, Any] | None = None
    seconds: float = 0.0
    # per measured row: workload fields, measured and out-of-fold predicted metrics with
    # intervals (kept out of to_dict: the JSON report stays a summary)
    points: pd.DataFrame | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"device": ..., "metrics": {metric: {"mre": float, "n": int, ...}}, ...}``."""
        return {
            "device": self.device,
            "method": self.method,
            "n": self.n,
            "metrics": self.metrics,
            "feature_sets": self.feature_sets,
            "regions": self.regions,
            "physics": self.physics,
            "noise_floor": self.noise_floor,
            "seconds": round(self.seconds, 2),
        }


def _fold_predictions(
    train: pd.DataFrame,
    w_test: np.ndarray,
    folds: int,
    budget: float | None,
    cands: list[Candidate] | None,
    **kw: Any,
) -> dict[str, dict[str, Any]]:
    model, _ = fit_device_model(train, folds=folds, time_budget_s=budget, candidates=cands, **kw)
    out: dict[str, dict[str, Any]] = {"auto": {}, "global": {}, "regions": {}}
    out["modes"] = {m: spec.mode for m, spec in model.specs.items()}
    for key in ("auto", "global"):
        out[key] = model.predict_matrix(w_test, model=key)
    codes = region_codes(w_test)
    # the regions that got models: IOPS's, or (without IOPS in the data) the first metric's
    base = model.specs.get("iops") or next(iter(model.specs.values()))
    for i, region in enumerate(REGION_NAMES):
        mask = codes == i
        if mask.any() and region in base.scopes:
            out["regions"][region] = (mask, model.predict_matrix(w_test[mask], model=region))
    return out


def evaluate_frame(
    frame: pd.DataFrame,
    *,
    holdout: pd.DataFrame | None = None,
    device: str = "device",
    folds: int = 5,
    time_budget_s: float | None = 60.0,
    candidates: list[Candidate] | None = None,
    feature_sets: tuple[str, ...] = ("extended",),
    compare_feature_sets: bool = True,
    progress: Callable[[str, float], None] | None = None,
) -> EvaluationReport:
    """Nested k-fold evaluation of the training procedure on a measurement frame.

    ``time_budget_s`` is the tuning budget of each training, as in ``train``; the
    evaluation trains once per outer fold (and once per feature set more when comparing
    the feature sets).  Repeats of a workload stay in one fold.  With ``holdout``, train
    on ``frame`` as ``train`` would and report errors on the measured rows of ``holdout``.
    """
    if holdout is None:
        w, ys, clean = training_rows(frame)
        splits = cv_folds(workload_groups(w), folds)
        method, inner = f"{len(splits)}-fold nested CV", max(2, min(folds, 3))
    else:
        clean, w, ys, splits = _holdout_split(frame, holdout)
        method, inner = "holdout", folds
    return _evaluate(
        clean,
        w,
        ys,
        splits,
        method=method,
        device=device,
        inner=inner,
        budget=time_budget_s,
        candidates=candidates,
        feature_sets=feature_sets,
        compare_feature_sets=compare_feature_sets,
        progress=progress,
    )


def _holdout_split(
    train: pd.DataFrame, holdout: pd.DataFrame
) -> tuple[pd.DataFrame, np.ndarray, dict[str, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """The training rows of ``train`` then ``holdout``, and the one split: fit the first, test the second."""
    both = pd.concat([train.assign(_holdout=False), holdout.assign(_holdout=True)], ignore_index=True)
    w, ys, clean = training_rows(both)
    held = clean["_holdout"].to_numpy(dtype=bool)
    if not held.any():
        raise NoData("the hold-out file has no rows with every metric measured")
    if held.all():
        raise NoData("the device has no usable measurements to train on")
    return clean.drop(columns="_holdout"), w, ys, [(np.flatnonzero(~held), np.flatnonzero(held))]


@dataclass
class _OutOfFold:
    """Every scored row's out-of-fold predictions, per metric (NaN where not predicted)."""

    auto: dict[str, np.ndarray]
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    extrap: dict[str, np.ndarray]
    glob: dict[str, np.ndarray]
    regions: dict[str, dict[str, np.ndarray]]
    feature_sets: dict[str, dict[str, np.ndarray]]
    modes: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def empty(cls, n: int, metrics: list[str]) -> _OutOfFold:
        """No predictions yet, for ``n`` rows of ``metrics`` (those the data has)."""
        def nan() -> dict[str, np.ndarray]:
            return {m: np.full(n, np.nan) for m in metrics}

        return cls(
            auto=nan(), lower=nan(), upper=nan(),
            extrap={m: np.zeros(n, dtype=bool) for m in metrics},
            glob=nan(),
            regions={r: nan() for r in REGION_NAMES},
            feature_sets={fs: nan() for fs in FEATURE_SETS},
            modes={m: {} for m in metrics},
        )

    def take(self, rows: np.ndarray) -> _OutOfFold:
        """The predictions of ``rows`` only."""
        def sub(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {m: a[rows] for m, a in d.items()}

        return _OutOfFold(
            sub(self.auto), sub(self.lower), sub(self.upper), sub(self.extrap), sub(self.glob),
            {r: sub(d) for r, d in self.regions.items()},
            {fs: sub(d) for fs, d in self.feature_sets.items()},
            self.modes,
        )


def _predict_out_of_fold(
    clean: pd.DataFrame,
    w: np.ndarray,
    metrics: list[str],
    splits: list[tuple[np.ndarray, np.ndarray]],
    *,
    inner: int,
    budget: float | None,
    candidates: list[Candidate] | None,
    cands: list[Candidate],
    feature_sets: tuple[str, ...],
    compare_feature_sets: bool,
    progress: Callable[[str, float], None] | None,
    device: str = "device",
) -> _OutOfFold:
    """Train on each split's first part and predict its second, as ``train`` would."""
    oof = _OutOfFold.empty(len(w), metrics)
    for k, (train, test) in enumerate(splits):
        if progress:
            progress(f"training {k + 1}/{len(splits)}", k / len(splits))
        # every training gets the tuning budget a real training gets: a nested evaluation
        # of a starved search would report on a procedure nobody runs
        # (the device's name: an error inside a fold's training names it, not "device")
        res = _fold_predictions(
            clean.iloc[train], w[test], inner, budget, candidates, feature_sets=feature_sets, device=device
        )
        for m, mode in res["modes"].items():
            if m in oof.modes:  # a fold may train a metric that not every row measured
                oof.modes[m][mode] = oof.modes[m].get(mode, 0) + 1
        # a fold's training may serve fewer metrics than the data has (a percentile needs a
        # fitted mean latency): those rows stay NaN, unscored, rather than fail the evaluation
        for m in (m for m in metrics if m in res["auto"]):
            value, lo, hi, ex, _ = res["auto"][m]
            oof.auto[m][test], oof.lower[m][test], oof.upper[m][test], oof.extrap[m][test] = value, lo, hi, ex
            oof.glob[m][test] = res["global"][m][0]
            for region, (mask, pred) in res["regions"].items():
                if m in pred:
                    oof.regions[region][m][test[mask]] = pred[m][0]
        if compare_feature_sets:
            for fs in FEATURE_SETS:
                # the side-by-side runs use each set's families as given (no tuning)
                sub = [c for c in cands if c.feature_set == fs]
                sub = sub or default_candidates((fs,), n_rows=len(train))
                r = _fold_predictions(clean.iloc[train], w[test], inner, budget, sub, regions=False,
                                      device=device)
                for m in (m for m in metrics if m in r["auto"]):
                    oof.feature_sets[fs][m][test] = r["auto"][m][0]
    return oof


def _metric_entries(
    oof: _OutOfFold, ys: dict[str, np.ndarray], groups: np.ndarray
) -> dict[str, dict[str, Any]]:
    """Per metric: the error summary, coverage, extrapolated share, and the global model's MRE."""
    metrics: dict[str, dict[str, Any]] = {}
    repeated = len(np.unique(groups)) < len(groups)
    for m in ys:
        y = ys[m]
        entry = error_summary(oof.auto[m], y)
        if repeated:
            # against the median of each workload's runs: the error without run-to-run noise
            typical = pd.Series(y).groupby(groups).transform("median").to_numpy()
            entry["mre_vs_median"] = float(relative_errors(oof.auto[m], typical).mean())
        entry["mre_global"] = float(relative_errors(oof.glob[m], y).mean())
        entry["coverage"] = float(np.mean((y >= oof.lower[m]) & (y <= oof.upper[m])))
        entry["extrapolated"] = float(oof.extrap[m].mean())
        metrics[m] = entry
    return metrics


def _region_entries(oof: _OutOfFold, ys: dict[str, np.ndarray], w: np.ndarray) -> dict[str, dict[str, Any]]:
    """Per region with data: global, region and auto MRE of every metric."""
    out: dict[str, dict[str, Any]] = {}
    codes = region_codes(w)
    for i, region in enumerate(REGION_NAMES):
        mask = codes == i
        if not mask.any():
            continue
        entry: dict[str, Any] = {"n": int(mask.sum())}
        for m in ys:
            y = ys[m][mask]
            rp = oof.regions[region][m][mask]
            entry[m] = {
                "global": float(relative_errors(oof.glob[m][mask], y).mean()),
                "region": float(relative_errors(rp, y).mean()) if np.all(np.isfinite(rp)) else None,
                "auto": float(relative_errors(oof.auto[m][mask], y).mean()),
            }
        out[region] = entry
    return out


def _physics_entries(
    oof: _OutOfFold, ys: dict[str, np.ndarray], w: np.ndarray, metrics: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The physics check: each derivable metric from predicted IOPS against its own model."""
    out: dict[str, Any] = {}
    for m in (d for d in DERIVABLE if d in ys and "iops" in ys):
        derived = derive_metric(m, oof.auto["iops"], w)
        out[m] = {
            "derived_from_iops_mre": float(relative_errors(derived, ys[m]).mean()),
            "model_mre": metrics[m]["mre"],
            # how far the model's own predictions are from the physical law (0 when derived)
            "law_gap": float(relative_errors(oof.auto[m], derived).mean()),
        }
    # how often (in how many trainings) each way of predicting a metric was chosen
    out["modes"] = oof.modes
    return out


def _evaluate(
    clean: pd.DataFrame,
    w: np.ndarray,
    ys: dict[str, np.ndarray],
    splits: list[tuple[np.ndarray, np.ndarray]],
    *,
    method: str,
    device: str,
    inner: int,
    budget: float | None,
    candidates: list[Candidate] | None,
    feature_sets: tuple[str, ...],
    compare_feature_sets: bool,
    progress: Callable[[str, float], None] | None,
) -> EvaluationReport:
    """Train on each split's first part, predict its second, and summarise the errors."""
    start = time.monotonic()
    groups = workload_groups(w)
    cands = candidates or default_candidates(feature_sets, n_rows=int(groups.max()) + 1)
    metrics = [m for m in METRICS if m in ys]  # the metrics the data has, as training trains them
    ys = {m: ys[m] for m in metrics}  # the further percentiles are scored by the tail study
    oof = _predict_out_of_fold(
        clean, w, metrics, splits, inner=inner, budget=budget, candidates=candidates, cands=cands,
        feature_sets=feature_sets, compare_feature_sets=compare_feature_sets, progress=progress,
        device=device,
    )
    scored = np.sort(np.concatenate([test for _, test in splits]))
    w, clean, groups, oof = w[scored], clean.iloc[scored], groups[scored], oof.take(scored)
    ys = {m: y[scored] for m, y in ys.items()}
    entries = _metric_entries(oof, ys, groups)
    report = EvaluationReport(device, method, len(scored), entries)
    report.points = pd.DataFrame(w, columns=list(WORKLOAD_FIELDS)).assign(
        **{m: ys[m] for m in metrics},
        **{f"pred_{m}": oof.auto[m] for m in metrics},
        **{f"pred_{m}_lower": oof.lower[m] for m in metrics},
        **{f"pred_{m}_upper": oof.upper[m] for m in metrics},
        **{f"{m}_extrapolated": oof.extrap[m] for m in metrics},
    )
    if compare_feature_sets:
        report.feature_sets = {
            fs: {m: float(relative_errors(oof.feature_sets[fs][m], ys[m]).mean()) for m in metrics}
            for fs in FEATURE_SETS
        }
    report.regions = _region_entries(oof, ys, w)
    report.physics = _physics_entries(oof, ys, w, entries)
    report.noise_floor = noise_floor(clean)
    report.seconds = time.monotonic() - start
    return report


def evaluate_device(
    datadir: DataDir,
    device: str,
    *,
    folds: int = 5,
    holdout: pd.DataFrame | None = None,
    time_budget_s: float | None = 60.0,
    progress: Callable[[str, float], None] | None = None,
    **kw: Any,
) -> EvaluationReport:
    """Evaluate ``device``'s modelling by nested k-fold CV, or against hold-out measurements.

    The caller reads a hold-out file (the CLI reads an ingest CSV with ``collectors``),
    so modeling never imports an importer.
    """
    datadir.catalog.get_device(device)
    frame = datadir.catalog.measurements(device)
    return evaluate_frame(
        frame, holdout=holdout, device=device, folds=folds, time_budget_s=time_budget_s,
        progress=progress, **kw,
    )

