"""Out-of-fold predictions of a trained model's configuration, quick enough for a report.

``ssdpredict evaluate`` reruns the whole training (estimator choice, tuning) inside each
outer fold: honest, but minutes per device.  A report needs per-point predictions in
seconds, so here the *chosen* configuration of the active model -- the same estimators
with the same parameters, blends, scales, physics modes and region routing -- is refitted
on the other folds and asked about each held-out workload.  The choice itself was made
on all the data, so these errors are a little optimistic against the nested figures.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import clone

from modeling.serving.device_model import DeviceModel
from modeling.training.evaluate import error_summary
from modeling.features import compute_features
from modeling.training.fit import measured_limits, median_by_workload, training_rows
from modeling.serving.metric_models import MetricSpec, ScopeModel
from modeling.training.selection import cv_folds, relative_errors, workload_groups
from modeling.workload import METRICS, REGION_NAMES, WORKLOAD_FIELDS
from modeling.workload_matrix import region_codes

REPORT_FOLDS = 5


@dataclass
class OutOfFold:
    """Per measured run: workload, measured and out-of-fold predicted metrics with intervals."""

    points: pd.DataFrame
    folds: int

    def summary(self) -> dict[str, dict[str, float]]:
        """Per metric: MRE, median and p90 relative error, R², interval coverage, extrapolated share."""
        out = {}
        for m in METRICS:
            y = self.points[m].to_numpy()
            pred = self.points[f"pred_{m}"].to_numpy()
            entry = error_summary(pred, y)
            low, high = self.points[f"pred_{m}_lower"], self.points[f"pred_{m}_upper"]
            entry["coverage"] = float(((y >= low) & (y <= high)).mean())
            entry["extrapolated"] = float(self.points[f"{m}_extrapolated"].mean())
            out[m] = entry
        return out

    def by_region(self) -> dict[str, dict[str, float] | None]:
        """Per region: ``{"n": rows, metric: MRE}``, or None where the sweep has no point there."""
        codes = region_codes(self.points[list(WORKLOAD_FIELDS)].to_numpy(dtype=np.float64))
        out: dict[str, dict[str, float] | None] = {}
        for i, region in enumerate(REGION_NAMES):
            mask = codes == i
            if not mask.any():
                out[region] = None
                continue
            part = self.points.loc[mask]
            out[region] = {"n": float(mask.sum())} | {
                m: float(relative_errors(part[f"pred_{m}"].to_numpy(), part[m].to_numpy()).mean())
                for m in METRICS
            }
        return out


def refit(model: DeviceModel, w: np.ndarray, ys: dict[str, np.ndarray]) -> DeviceModel:
    """``model``'s configuration fitted afresh on the workloads ``w`` (repeats reduced to medians).

    Only the scopes the ``auto`` choice uses are refitted: the global one and the regions
    routed to their own model.  Region scopes without any of these workloads are dropped
    (their region falls back to the global model), and each scope's trained range becomes
    the range of ``w`` it saw.
    """
    w, ys, _ = median_by_workload(w, ys)
    codes = region_codes(w)
    specs: dict[str, MetricSpec] = {}
    for metric, spec in model.specs.items():
        y, mean = ys[metric], ys.get("latency_mean_us")
        scopes: dict[str, ScopeModel] = {}
        for name, sm in spec.scopes.items():
            # a region model that ``auto`` does not route to answers nothing here: not refitted
            if name != "global" and name not in spec.auto_regions:
                continue
            rows = np.ones(len(w), dtype=bool) if name == "global" else codes == REGION_NAMES.index(name)
            if not rows.any():
                continue
            # a ratio's members learn the ratio to the mean latency, a blend's each its own target
            members = [
                (fs, clone(est).fit(compute_features(w[rows], fs), spec.member_target(i, y, mean)[rows]))
                for i, (fs, est) in enumerate(sm.members)
            ]
            scopes[name] = dataclasses.replace(
                sm, members=members, lo=w[rows].min(axis=0), hi=w[rows].max(axis=0), runners=[], _bounds=None
            )
        specs[metric] = dataclasses.replace(
            spec, scopes=scopes, auto_regions=frozenset(r for r in spec.auto_regions if r in scopes)
        )
    # a derived metric reuses the IOPS scopes: keep only those both have
    iops_scopes = set(specs["iops"].scopes) if "iops" in specs else set()
    for metric, spec in specs.items():
        if spec.mode == "derived":
            kept = {k: v for k, v in spec.scopes.items() if k in iops_scopes}
            specs[metric] = dataclasses.replace(spec, scopes=kept)
    regions = frozenset(REGION_NAMES[c] for c in np.unique(codes))
    # the laws hold at the limits of what this fit saw, as training records them
    limits = None if model.limits is None else measured_limits(w, ys)
    return DeviceModel(model.device, f"{model.version}-refit", specs, regions, model.manifest, limits=limits)


def out_of_fold(frame: pd.DataFrame, model: DeviceModel, folds: int = REPORT_FOLDS) -> OutOfFold:
    """Predict every usable measured run with ``model``'s configuration refitted without its workload.

    Repeats of a workload stay in one fold.  Raises ``NoData`` when the frame has too few
    usable rows.
    """
    w, ys, _ = training_rows(frame)
    splits = cv_folds(workload_groups(w), folds)
    n = len(w)
    cols = {f"pred_{m}{side}": np.full(n, np.nan) for m in METRICS for side in ("", "_lower", "_upper")}
    extrap = {f"{m}_extrapolated": np.zeros(n, dtype=bool) for m in METRICS}
    for train, test in splits:
        fold_model = refit(model, w[train], {m: y[train] for m, y in ys.items()})
        for m, (value, lower, upper, ex, _) in fold_model.predict_matrix(w[test], METRICS).items():
            cols[f"pred_{m}"][test] = value
            cols[f"pred_{m}_lower"][test] = lower
            cols[f"pred_{m}_upper"][test] = upper
            extrap[f"{m}_extrapolated"][test] = ex
    points = pd.DataFrame(w, columns=list(WORKLOAD_FIELDS)).assign(**ys, **cols, **extrap)
    return OutOfFold(points, len(splits))
