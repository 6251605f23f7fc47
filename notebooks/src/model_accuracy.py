# Source of notebooks/model_accuracy.ipynb: edit here, then run `python notebooks/build.py`.

# %% [markdown]
# # Model accuracy: how far to trust a device's predictions
#
# This notebook trains a device's models with `train_device` and evaluates them with
# `evaluate_device`, the functions behind `ssdpredict train` and `ssdpredict evaluate`,
# then shows where the models are right and where they are not: predicted vs measured,
# the distribution of relative errors, errors per workload region, the basic vs extended
# feature sets, and whether the prediction intervals hold what they promise.
#
# **Data.** As in `sweep_analysis.ipynb`: by default the real fio results of an Intel
# D3-S4610 SATA SSD are imported into a temporary data directory; set `SSDPREDICT_HOME` and
# `SSDPREDICT_DEVICE` to use your own device. The new model version is registered but
# **not activated**, so running this notebook never changes what `ssdpredict serve` answers.
# `SSDPREDICT_NB_FOLDS` and `SSDPREDICT_NB_TIME_BUDGET_S` (default 5 folds, 60 s) trade
# accuracy of the estimate for speed.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display
from nbdata import open_device, settings
from modeling.reporting.figures import coverage_figure, measured_vs_predicted_figure
from modeling.serving.registry import ModelRegistry
from modeling.training.evaluate import evaluate_device
from modeling.training.selection import relative_errors
from modeling.training.train import train_device
from modeling.workload import METRICS, REGION_NAMES, WORKLOAD_FIELDS
from modeling.workload_matrix import outstanding_io, region_codes

FOLDS = settings().nb_folds
TIME_BUDGET_S = settings().nb_time_budget_s

# %%
datadir, DEVICE = open_device()

measurements = datadir.catalog.measurements(DEVICE)
print(f"device {DEVICE}: {len(measurements)} measured points in {datadir.root}")

# %% [markdown]
# ## Train and evaluate
# `train_device` picks an estimator per metric by grouped cross-validation (repeats of a
# workload stay in one fold), decides whether bandwidth and mean latency are better derived
# from predicted IOPS by physics, and fits region models. `evaluate_device` runs the *whole*
# training procedure inside each outer fold (nested cross-validation), so its errors are
# honest estimates for workloads the device was never measured at.

# %%
version = train_device(datadir, DEVICE, folds=FOLDS, time_budget_s=TIME_BUDGET_S, activate=False)
model = ModelRegistry(datadir).load(DEVICE, version.version)
evaluation = evaluate_device(datadir, DEVICE, folds=FOLDS, time_budget_s=TIME_BUDGET_S)
report = evaluation.to_dict()
print(f"model version {version.version} (not activated); evaluation: {report['method']}, n={report['n']}")
summary = pd.DataFrame(report["metrics"]).T
summary["mode"] = [model.specs[m].mode for m in summary.index]
summary["estimator"] = [version.manifest["metrics"][m]["global"]["estimator"] for m in summary.index]
display(summary[["mode", "estimator", "mre", "median_re", "p90_re", "r2", "coverage", "extrapolated"]])

# %% [markdown]
# ## Out-of-fold predictions per point
# The evaluation keeps, for every measured workload, the prediction of the model trained
# *without* it (in its outer fold) and that model's interval: the per-point view of the
# nested figures above.

# %%
points = evaluation.points
ys = {m: points[m].to_numpy() for m in METRICS}
oof = {m: points[f"pred_{m}"].to_numpy() for m in METRICS}
w = points[list(WORKLOAD_FIELDS)].to_numpy()
errors = pd.DataFrame({m: relative_errors(oof[m], ys[m]) for m in METRICS})
errors["region"] = np.asarray(REGION_NAMES)[region_codes(w)]
errors["outstanding_io"] = outstanding_io(w)
print("out-of-fold MRE:", ", ".join(f"{m} {errors[m].mean():.1%}" for m in METRICS))

# %% [markdown]
# ## Predicted vs measured
# One point per measured workload, on log-log axes because the metrics span orders of
# magnitude, coloured by workload region (the same figure as `ssdpredict report`). The
# band is +-20 %, about the latency error the published regression-tree models reached;
# points outside it are the workloads to re-measure or to sweep more densely around.

# %%
print("nested-CV MRE:", ", ".join(f"{m} {report['metrics'][m]['mre']:.1%}" for m in METRICS))
display(measured_vs_predicted_figure(points, errors["region"]))

# %% [markdown]
# ## Distribution of relative errors
# The cumulative share of workloads predicted within a given relative error. The mean
# (MRE) hides the shape: a model can have a low median and a long tail of badly predicted
# workloads, usually at the saturation knee or in the latency tail.

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
for metric, style in zip(METRICS, ("-", "--", "-.", ":"), strict=True):
    e = np.sort(errors[metric].to_numpy())
    ax.step(np.maximum(e, 1e-4), np.arange(1, len(e) + 1) / len(e), style, where="post", label=metric)
for x in (0.1, 0.2):
    ax.axvline(x, color="grey", ls=":", lw=1)
ax.set(xscale="log", xlabel="relative error |pred - measured| / measured", ylabel="share of workloads",
       title="cumulative distribution of out-of-fold relative errors")
ax.legend(fontsize="small")
plt.show()

# %% [markdown]
# ## Error by workload region
# Nested-CV MRE of the global model, the region's own model and the automatic choice, per
# region and metric (from the evaluation report). A region model is only used (`auto`)
# where it beat the global one on that region; a missing `region` bar means the region had
# too few points for its own model.

# %%
rows = [
    {"region": region, "metric": metric, "model": kind, "mre": entry[metric][kind]}
    for region, entry in report["regions"].items()
    for metric in METRICS
    for kind in ("global", "region", "auto")
]
by_region = pd.DataFrame(rows).astype({"mre": float})
fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 4), sharey=True)
for ax, metric in zip(axes, METRICS, strict=True):
    table = by_region[by_region["metric"] == metric].pivot(index="region", columns="model", values="mre")
    table[["global", "region", "auto"]].plot.bar(ax=ax, logy=True, rot=20, legend=metric == METRICS[0])
    ax.set(title=metric, xlabel="", ylabel="nested-CV MRE")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Error vs outstanding I/O
# The out-of-fold errors of each workload against its outstanding I/O, with the median per
# level. Errors that concentrate at a few levels show where the sweep is too sparse:
# often the edges of the swept range (few points share the lowest outstanding I/O) or the
# saturation knee, where throughput changes fastest. Sweep more densely there.

# %%
fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.5), sharey=True)
for ax, metric in zip(axes, METRICS, strict=True):
    ax.scatter(errors["outstanding_io"], np.maximum(errors[metric], 1e-4), s=10, alpha=0.6)
    median = errors.groupby("outstanding_io")[metric].median()
    ax.plot(median.index, np.maximum(median.to_numpy(), 1e-4), "k-", lw=1, label="median")
    ax.set(xscale="log", yscale="log", xlabel="outstanding I/O (queue depth x numjobs)", title=metric)
axes[0].set_ylabel("relative error (out of fold)")
axes[0].legend(fontsize="small")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Basic vs extended features
# The published four characteristics (write ratio, queue depth, request size, randomness)
# against the extended set (plus numjobs, outstanding I/O, per-direction sizes and
# randomness). On data that sweeps parallelism the basic set cannot tell one job at depth 32
# from 32 jobs at depth 1, and its errors show it.

# %%
if not report["feature_sets"]:
    print("the evaluation did not compare feature sets")
else:
    fs = pd.DataFrame(report["feature_sets"])
    ax = fs.plot.bar(logy=True, rot=0, figsize=(8, 4))
    ax.set(ylabel="nested-CV MRE", title=f"{DEVICE}: basic vs extended features")
    plt.show()
    display(fs.round(3))

# %% [markdown]
# ## Prediction intervals
# Every prediction comes with an interval meant to hold the measured value in
# `interval_level` of the cases. Left: the coverage the nested evaluation measured, per
# metric, against that nominal level; well below it means the intervals are too narrow to
# rely on. Right: the out-of-fold IOPS predictions with their intervals, sorted by
# measured IOPS.

# %%
display(coverage_figure({m: report["metrics"][m]["coverage"] for m in METRICS}, points))

# %% [markdown]
# ## Physics check and noise floor
# `derived_from_iops_mre` is the error of bandwidth and mean latency computed from predicted
# IOPS (bandwidth = IOPS x request size; Little's law for latency); `law_gap` is how far the
# model's own predictions stray from those laws. The noise floor (repeat CV) is the
# accuracy no model can beat on this device; it is only known when the sweep had repeats.

# %%
display(pd.DataFrame(report["physics"]).T.round(4))
floor = report["noise_floor"]
if floor:
    print("noise floor (mean CV between repeats):", ", ".join(f"{m} {floor[m]['cv']:.1%}" for m in METRICS))
else:
    print("noise floor: no repeated workloads in the data (sweep with --repeats 3 to measure it)")
