# Source of notebooks/sweep_analysis.ipynb: edit here, then run `python notebooks/build.py`.

# %% [markdown]
# # Sweep analysis: what the measurements say about a device
#
# This notebook looks at one device's measured points before any model is trained: how
# IOPS scales with queue depth and parallelism, where latency starts to be pure queueing
# (Little's law), how heavy the latency tail is, what writes cost, and how repeatable the
# measurements are.
#
# **Data.** By default it imports the real fio results of an Intel D3-S4610 SATA SSD
# (`tests/data/fio-plot`, BSD-3-Clause) into a temporary data directory with the same
# function `ssdpredict ingest` uses. To look at your own device instead, start Jupyter with
# `SSDPREDICT_HOME` (your data directory) and `SSDPREDICT_DEVICE` (the device name) set.
# `SSDPREDICT_NB_FIO_DIR` picks another folder of fio JSON results for the default import.

# %%

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display
from nbdata import open_device

from collectors.sweep.quality import repeat_cv
from modeling.reporting.figures import depth_axis
from modeling.training.accuracy import noise_floor
from modeling.workload import METRIC_UNITS, METRICS, WORKLOAD_FIELDS, format_size

# %%
datadir, DEVICE = open_device()

measurements = datadir.catalog.measurements(DEVICE)
print(f"device {DEVICE}: {len(measurements)} measured points in {datadir.root}")

# %% [markdown]
# ## What was swept
# The range and number of distinct values of every workload field. A field with one value
# was not swept: nothing below (and no model) can say how the device reacts to it.

# %%
df = measurements.copy()
df["numjobs"] = df["numjobs"].fillna(1) if "numjobs" in df else 1
df["outstanding_io"] = df["queue_depth"] * df["numjobs"]
present = [f for f in WORKLOAD_FIELDS if f in df]
display(df[present].agg(["min", "max", "nunique"]).T)

# %% [markdown]
# The plots below compare like with like: they use the most common request size and
# randomness, and average repeats of the same workload.

# %%
SHAPE = ["request_size", "randomness"]
size, randomness = df.groupby(SHAPE).size().idxmax()
keys = ["write_ratio", "queue_depth", "numjobs", "outstanding_io"]
view = (
    df[(df["request_size"] == size) & (df["randomness"] == randomness)]
    .groupby(keys, as_index=False)[list(METRICS)]
    .mean()
)
write_ratios = sorted(float(x) for x in view["write_ratio"].unique())
print(
    f"using request_size={format_size(int(size))}, randomness={randomness:g}: "
    f"{len(view)} workloads, write ratios {write_ratios}"
)


def wr_label(write_ratio: float) -> str:
    """Legend label of a write ratio."""
    return f"{write_ratio:.0%} writes"


# %% [markdown]
# ## IOPS vs queue depth, one line per numjobs
# Where a line flattens, more outstanding I/O only queues up: the device (or its
# controller) is saturated. If lines for more jobs sit above the single-job line at the
# same total outstanding I/O, the bottleneck was on the submission side (one CPU thread
# cannot issue fast enough); that is why `numjobs` is a model input and why a model
# without it is useless on this data.

# %%
fig, axes = plt.subplots(1, len(write_ratios), figsize=(5 * len(write_ratios), 4), squeeze=False, sharey=True)
for ax, wr in zip(axes[0], write_ratios, strict=True):
    part = view[view["write_ratio"] == wr]
    for nj, line in part.groupby("numjobs"):
        line = line.sort_values("queue_depth")
        ax.plot(line["queue_depth"], line["iops"], marker="o", label=f"numjobs={int(nj)}")
    ax.set(yscale="log", xlabel="queue depth (per job)", title=wr_label(wr))
    depth_axis(ax, part["queue_depth"])
axes[0][0].set_ylabel("IOPS")
axes[0][-1].legend(fontsize="small")
fig.suptitle(f"{DEVICE}: IOPS vs queue depth")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Mean latency vs outstanding I/O, and Little's law
# Little's law says that in steady state `outstanding I/O = IOPS x mean latency`. Left: once
# the device is saturated at its peak IOPS, latency can only grow along the dashed line
# `latency = outstanding / peak IOPS`; below the knee latency is flat, and the knee is the
# queue depth worth running at. Right: each point's measured latency against
# `outstanding / IOPS`. Points on the diagonal kept the queue full; points below it had
# fewer I/Os in flight than configured (the host could not keep up), so extra depth
# bought nothing there.

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
span = np.geomspace(view["outstanding_io"].min(), view["outstanding_io"].max(), 50)
for i, wr in enumerate(write_ratios):
    part = view[view["write_ratio"] == wr]
    color = f"C{i}"
    left.scatter(part["outstanding_io"], part["latency_mean_us"], color=color, s=18, label=wr_label(wr))
    left.plot(span, span / part["iops"].max() * 1e6, "--", color=color, lw=1)
    little = part["outstanding_io"] / part["iops"] * 1e6
    right.scatter(little, part["latency_mean_us"], color=color, s=18, label=wr_label(wr))
depth_axis(left, view["outstanding_io"])
left.set(yscale="log", xlabel="outstanding I/O (queue depth x numjobs)",
         ylabel="mean latency (us)", title="dashed: outstanding / peak IOPS")
lims = np.array([view["latency_mean_us"].min(), view["latency_mean_us"].max()])
right.plot(lims, lims, "k--", lw=1, label="Little's law")
right.set(xscale="log", yscale="log", xlabel="outstanding / IOPS (us)", ylabel="measured mean latency (us)",
          title="measured vs Little's law")
left.legend(fontsize="small")
right.legend(fontsize="small")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Tail latency: p99 vs mean
# The dotted lines mark p99 = 1, 2, 5 and 10 times the mean. A tight distribution stays
# near 2x; points far above 10x are the stalls (garbage collection, write cache flushes,
# controller queueing) that hurt service-level objectives even when the mean looks fine.
# Tails are also much harder to predict than means, as the model-accuracy notebook shows.

# %%
fig, ax = plt.subplots(figsize=(5.5, 4.5))
for i, wr in enumerate(write_ratios):
    part = view[view["write_ratio"] == wr]
    ax.scatter(part["latency_mean_us"], part["latency_p99_us"], s=18, color=f"C{i}", label=wr_label(wr))
lims = np.array([view["latency_mean_us"].min(), view["latency_mean_us"].max()])
for k in (1, 2, 5, 10):
    ax.plot(lims, k * lims, ":", color="grey", lw=1)
    ax.annotate(f"{k}x", (lims[1], k * lims[1]), fontsize="small", color="grey")
ax.set(xscale="log", yscale="log", xlabel="mean latency (us)", ylabel="p99 latency (us)",
       title=f"{DEVICE}: tail vs mean")
ax.legend(fontsize="small")
plt.show()

# %% [markdown]
# ## What writes cost
# IOPS and mean latency against the write ratio, one line per amount of outstanding I/O
# (the best queue-depth/numjobs split of each). Flash programs are slower than reads and
# writes cause garbage collection, but a write-back cache hides that until it fills, so at
# low depth writes can even look faster than reads. The tilt of the lines is what a
# read-mostly workload gains, or loses, over a write-heavy one on this device; short
# sweeps on an empty drive flatter writes (precondition the device for steady-state numbers).

# %%
if len(write_ratios) < 2:
    print(f"only one write ratio ({write_ratios[0]:g}) was measured: nothing to compare")
else:
    fig, (a_iops, a_lat) = plt.subplots(1, 2, figsize=(11, 4))
    # one line per outstanding I/O: the best split, so numjobs/queue-depth choices do not blur it
    best = view.loc[view.groupby(["write_ratio", "outstanding_io"])["iops"].idxmax()]
    levels = sorted(best["outstanding_io"].unique())
    for oio in levels[:: max(1, len(levels) // 6)]:
        line = best[best["outstanding_io"] == oio].sort_values("write_ratio")
        a_iops.plot(line["write_ratio"], line["iops"], marker="o", label=f"{int(oio)} outstanding")
        a_lat.plot(line["write_ratio"], line["latency_mean_us"], marker="o", label=f"{int(oio)} outstanding")
    a_iops.set(yscale="log", xlabel="write ratio", ylabel="IOPS", title="IOPS vs write ratio")
    a_lat.set(yscale="log", xlabel="write ratio", ylabel="mean latency (us)", title="latency vs write ratio")
    a_iops.legend(fontsize="small")
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## Repeat noise
# A model cannot be more accurate than the device is repeatable. When the sweep measured
# each workload several times (`ssdpredict sweep --repeats 3`), this shows the coefficient
# of variation (standard deviation / mean) between repeats per workload and metric: the
# noise floor to read every accuracy figure against.

# %%
group_cols = [f for f in WORKLOAD_FIELDS if f in df]
groups = [g for _, g in df.groupby(group_cols, dropna=False) if len(g) >= 2]
if not groups:
    print("no repeated workloads in this data (one run per point): the noise floor is unknown")
else:
    cvs = pd.DataFrame(
        [{**repeat_cv(g.to_dict("records")), "outstanding_io": g["outstanding_io"].iloc[0]} for g in groups]
    )
    floor = noise_floor(measurements)
    print(f"{floor['n_workloads']} repeated workloads; mean CV: "
          + ", ".join(f"{m} {floor[m]['cv']:.1%}" for m in METRICS))
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.5), sharey=True)
    for ax, metric in zip(axes, METRICS, strict=True):
        ax.scatter(cvs["outstanding_io"], 100 * cvs[metric], s=14)
        ax.axhline(100 * cvs[metric].mean(), color="k", ls="--", lw=1)
        depth_axis(ax, cvs["outstanding_io"])
        ax.set(xlabel="outstanding I/O", title=f"{metric} ({METRIC_UNITS[metric]})")
    axes[0].set_ylabel("CV between repeats (%)")
    fig.tight_layout()
    plt.show()
