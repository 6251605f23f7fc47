"""Train a new device from few points: a reference device's model, corrected (relative fitness).

Per metric the reference's global model becomes a fixed function inside a
:class:`~modeling.estimators.relative.RelativeFitnessModel`, whose correction (constant,
linear or shallow-tree log-ratio) is learned on the new device's measurements.  Whether
the transfer or a from-scratch model is kept is decided by cross-validation on the new
device's points (leave-one-out up to 40 workloads, 10-fold beyond): the relative error of
the transfer on IOPS (or the first metric both have) against that of the default
from-scratch learner on the same folds.  The decision and both errors go to the manifest,
with the reference device and version.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput, NoData, NoModel
from modeling.estimators.families import make_estimator
from modeling.estimators.relative import RelativeFitnessModel, reference_function
from modeling.features import compute_features
from modeling.serving.device_model import DeviceModel
from modeling.serving.metric_models import MEAN_MODES, MetricSpec, ScopeModel, derive_metric
from modeling.serving.registry import read_model
from modeling.store import DataDir, ModelVersion
from modeling.store.names import validate_name
from modeling.training.fit import (
    INTERVAL_LEVEL, MIN_ROWS, fit_device_model, median_by_workload, training_rows,
)
from modeling.training.selection import conformal_q, default_candidates, for_metric
from modeling.workload import METRICS, REGION_NAMES
from modeling.workload_matrix import region_codes

MIN_TRANSFER_ROWS = 2
"""Distinct measured workloads a transfer needs (a constant log-ratio from one is a guess)."""


def load_reference(datadir: DataDir, device: str, reference: str) -> DeviceModel:
    """The active model of ``reference``; ``UnknownDevice``, ``NoModel`` or ``InvalidInput``.

    Its tables are built at once: a transfer predicts with the reference's members themselves,
    and a load-gated member predicts through its parts' tables once they are built
    (:func:`modeling.estimators.compiled.compile_estimator`), so the reference it fits on is the
    one its device serves whatever was asked of it first.
    """
    return read_model(datadir, check_reference(datadir, device, reference)).build_tables()


def check_reference(datadir: DataDir, device: str, reference: str) -> ModelVersion:
    """The active model version of ``reference``, which must be another device with a model."""
    validate_name(reference)
    if reference == device:
        raise InvalidInput(f"device {device!r} cannot be its own reference", details={"field": "reference"})
    catalog = datadir.catalog
    catalog.get_device(reference)
    mv = catalog.active_model_version(reference)
    if mv is None:
        raise NoModel(
            f"reference device {reference!r} has no trained model; "
            f"run `ssdpredict train --device {reference}` first"
        )
    return mv


def _folds(n: int) -> np.ndarray:
    return np.arange(n) % 10 if n > 40 else np.arange(n)


def _oof(make: Any, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Out-of-fold predictions of the estimators ``make()`` builds."""
    folds, out = _folds(len(y)), np.empty(len(y))
    for f in np.unique(folds):
        test = folds == f
        out[test] = make().fit(X[~test], y[~test]).predict(X[test])
    return out


def _mre(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / np.abs(y)))


def _transfer_metric(
    metric: str, ref: DeviceModel, Xe: np.ndarray, w: np.ndarray, target: np.ndarray, y: np.ndarray,
    factor: np.ndarray,
) -> tuple[ScopeModel, dict[str, Any]]:
    """The relative-fitness scope of one metric (``target = y / factor``) and its report."""
    sm = ref.specs[metric].scopes["global"]
    fn = reference_function(sm.members, sm.weights, sm.scale, ref.device, ref.version)
    est = RelativeFitnessModel(reference=fn).fit(Xe, target)
    chosen, alpha = est.chosen_, est.alpha_
    def make() -> RelativeFitnessModel:
        return RelativeFitnessModel(reference=fn, correction=chosen, alpha=alpha)

    oof = _oof(make, Xe, target) * factor
    ref_only = np.exp(fn.log_predict(Xe)) * factor
    scope = ScopeModel("global", [("extended", est)], conformal_q(oof, y, INTERVAL_LEVEL),
                       w.min(axis=0), w.max(axis=0), {"mre": _mre(oof, y)})
    entry = {"global": {
        "estimator": est.kind, "feature_set": "extended", "correction": chosen, "alpha": alpha,
        "correction_cv_mre": est.cv_mre_, "cv_mre": _mre(oof, y), "cv_fold_std": 0.0,
        "reference_only_mre": _mre(ref_only, y),
    }}
    return scope, entry


def _scratch_cv(metric: str, w: np.ndarray, y: np.ndarray) -> float | None:
    """Out-of-fold error of the default from-scratch learner (None below ``MIN_ROWS`` points)."""
    if len(y) < MIN_ROWS:
        return None
    cand = for_metric(default_candidates(quick=True, n_rows=len(y)), metric)[0]
    X = compute_features(w, cand.feature_set)
    return _mre(_oof(lambda: make_estimator(cand.kind, cand.kwargs), X, y), y)


def fit_transfer_model(
    frame: pd.DataFrame, ref: DeviceModel, *, device: str, version: str
) -> tuple[DeviceModel, dict[str, Any]]:
    """``device``'s model as ``ref`` corrected by ``frame``'s measurements, and its report."""
    w_runs, ys_runs, _ = training_rows(frame, MIN_TRANSFER_ROWS)
    w, ys, _groups = median_by_workload(w_runs, ys_runs)
    if len(w) < MIN_TRANSFER_ROWS:
        raise NoData(f"only {len(w)} distinct measured workloads; a transfer needs {MIN_TRANSFER_ROWS}")
    Xe = compute_features(w, "extended")
    specs: dict[str, MetricSpec] = {}
    report: dict[str, Any] = {}
    order = [m for m in METRICS if m in ys and m in ref.specs]
    for metric in sorted(order, key=lambda m: ref.specs[m].mode != "direct"):
        mode = ref.specs[metric].mode
        if mode == "derived" and "iops" in specs:
            pred = derive_metric(metric, specs["iops"].scopes["global"].predict({"extended": Xe}), w)
            scope = ScopeModel("global", [], conformal_q(pred, ys[metric], INTERVAL_LEVEL),
                               w.min(axis=0), w.max(axis=0), {"mre": _mre(pred, ys[metric])})
            specs[metric] = MetricSpec(metric, "derived", {"global": scope})
            report[metric] = {"mode": "derived", "global": {
                "estimator": "derived from iops", "feature_set": "extended", "cv_mre": _mre(pred, ys[metric]),
                "cv_fold_std": 0.0}}
            continue
        if mode in MEAN_MODES and "latency_mean_us" not in ys:
            continue
        # a ratio's (a blend's) reference predicts the percentile over the mean (to its power)
        power = ref.specs[metric].mean_power
        factor = ys["latency_mean_us"] ** power if mode in MEAN_MODES else np.ones(len(w))
        scope, entry = _transfer_metric(metric, ref, Xe, w, ys[metric] / factor, ys[metric], factor)
        specs[metric] = MetricSpec(metric, mode if mode in MEAN_MODES else "direct", {"global": scope},
                                   mean_power=power if mode in MEAN_MODES else 1.0)
        report[metric] = {"mode": specs[metric].mode, **entry}
    if not specs:
        raise NoData(f"reference {ref.device!r} models none of the metrics measured on {device!r}")
    data_regions = frozenset(REGION_NAMES[c] for c in np.unique(region_codes(w)))
    model = DeviceModel(device, version, specs, data_regions)
    summary = {
        "metrics": report,
        "missing_metrics": [m for m in METRICS if m not in specs],
        "n_rows": int(len(w_runs)),
        "n_workloads": int(len(w)),
        "folds": len(np.unique(_folds(len(w)))),
        "interval_level": INTERVAL_LEVEL,
        "feature_sets": ["extended"],
        "data_regions": sorted(data_regions),
        # out-of-fold errors of the transferred metrics (leave-one-out), as a training's evaluation
        "evaluation": {"metrics": {m: {"mre": e["global"]["cv_mre"], "fold_std": e["global"]["cv_fold_std"]}
                                   for m, e in report.items()}},
    }
    return model, summary


def fit_with_reference(
    frame: pd.DataFrame, ref: DeviceModel, *, device: str, version: str, folds: int = 5, **fit_kw: Any
) -> tuple[DeviceModel, dict[str, Any]]:
    """Transfer from ``ref`` or train from scratch, whichever cross-validates better on ``frame``.

    The summary's ``transfer`` says which was kept, both errors on the deciding metric, and
    the reference device and version.
    """
    model, summary = fit_transfer_model(frame, ref, device=device, version=version)
    w_runs, ys_runs, _ = training_rows(frame, MIN_TRANSFER_ROWS)
    w, ys, _groups = median_by_workload(w_runs, ys_runs)
    metric = "iops" if "iops" in summary["metrics"] else next(iter(summary["metrics"]))
    transfer_err = float(summary["metrics"][metric]["global"]["cv_mre"])
    scratch_err = _scratch_cv(metric, w, ys[metric]) if metric in ys else None
    use_scratch = scratch_err is not None and scratch_err < transfer_err
    decision = {
        "reference": {"device": ref.device, "version": ref.version},
        "chosen": "scratch" if use_scratch else "transfer",
        "metric": metric,
        "transfer_cv_mre": transfer_err,
        "scratch_cv_mre": scratch_err,
        "cv": "leave-one-out" if len(w) <= 40 else "10-fold",
    }
    if use_scratch:
        model, summary = fit_device_model(frame, device=device, version=version, folds=folds, **fit_kw)
    return model, {**summary, "transfer": decision}
