"""The report's plots, drawn with matplotlib's object API and returned as PNG data URIs.

No pyplot: figures are built on :class:`matplotlib.figure.Figure` directly, so drawing
holds no global state and is safe in the API's worker threads.  The plots follow what
storage engineers know from fio-plot: IOPS and latency against queue depth on a log-2
axis, one line per request size and read/write mix, one panel per ``numjobs``.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from modeling.training.fit import INTERVAL_LEVEL
from modeling.workload import METRIC_UNITS, METRICS, REGION_NAMES, format_size

METRIC_TITLES = {
    "iops": "IOPS",
    "bandwidth_mib_s": "bandwidth",
    "latency_mean_us": "mean latency",
    "latency_p99_us": "p99 latency",
}
SURFACE_METRICS = ("iops", "latency_mean_us", "latency_p99_us")
SERIES_FIELDS = ["request_size", "write_ratio", "randomness", "read_size", "write_size"]
FACETS_PER_ROW = 4
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
REGION_COLORS = {name: f"C{i}" for i, name in enumerate(REGION_NAMES)}
DPI = 100


def data_uri(fig: Figure) -> str:
    """The figure as a ``data:image/png;base64,...`` URI (no metadata pointing anywhere)."""
    buf = io.BytesIO()
    # fixed margins, no bbox_inches="tight": each tight-bbox pass redraws every log-axis tick,
    # which made one figure cost seconds
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def metric_label(metric: str) -> str:
    """``IOPS (IO/s)``, ``p99 latency (us)``: an axis label."""
    return f"{METRIC_TITLES[metric]} ({METRIC_UNITS[metric]})"


def fio_mode(write_ratio: float, randomness: float) -> str:
    """fio's ``rw`` name of a mix: ``randread``, ``write``, ``randrw 70/30``; partly random is spelt out."""
    if write_ratio <= 0:
        kind = "read"
    elif write_ratio >= 1:
        kind = "write"
    else:
        kind = f"rw {100 * (1 - write_ratio):.0f}/{100 * write_ratio:.0f}"
    if randomness >= 1:
        return "rand" + kind
    if randomness <= 0:
        return kind
    return f"{randomness:.0%} random {kind}"


def series_label(row: Mapping[str, float]) -> str:
    """Request size and mix of a sweep series, e.g. ``4k randread`` or ``4k/64k rw 50/50``."""
    rs, ws = int(row["read_size"]), int(row["write_size"])
    size = format_size(rs) if rs == ws else f"{format_size(rs)}/{format_size(ws)}"
    return f"{size} {fio_mode(float(row['write_ratio']), float(row['randomness']))}"


def depth_axis(ax: Axes, values: Iterable[float]) -> None:
    """A log-2 x axis labelled with (up to 7 of) the swept depths or outstanding-I/O values."""
    ticks = sorted({int(v) for v in values})
    ticks = ticks[:: max(1, (len(ticks) + 6) // 7)]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, labels=[str(t) for t in ticks])
    ax.minorticks_off()


def facet_axis(ax: Axes, numjobs: float, swept: bool) -> None:
    """One numjobs panel of a vs-queue-depth figure: log latency/IOPS axis, grid, title."""
    ax.set_yscale("log")
    log_axis(ax.yaxis)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(f"numjobs {int(numjobs)}" + ("" if swept else " (not swept)"), fontsize=10)


def label_panels(axes: Any, used: int, metric: str) -> None:
    """Hide the grid's unused panels and label the outer axes of a vs-queue-depth figure."""
    for ax in axes.flat[used:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(metric_label(metric))
    for ax in axes[-1, :]:
        ax.set_xlabel("queue depth (per job)")


def short_number(value: float, _pos: object = None) -> str:
    """A tick label: ``500``, ``20k``, ``1.5M``, ``0.2``."""
    for mult, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= mult:
            return f"{value / mult:g}{suffix}"
    return f"{value:g}"


def log_axis(axis: Any) -> None:
    """Log scale ticked at 1, 2 and 5 of each decade with plain labels (``20k``, not 2x10^4)."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(short_number))
    axis.set_minor_locator(NullLocator())


def place(
    fig: Figure,
    *,
    left: float = 0.75,
    right: float = 0.15,
    top: float = 0.45,
    bottom: float = 0.55,
    wspace: float = 0.1,
    hspace: float = 0.35,
) -> None:
    """Fixed subplot margins, in inches (tight_layout redraws every tick: seconds per figure)."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=wspace,
        hspace=hspace,
    )


def sweep_series(measurements: pd.DataFrame) -> pd.DataFrame:
    """Medians over repeats per workload, with a ``series`` label and ``numjobs`` filled in."""
    df = measurements.copy()
    df["numjobs"] = df["numjobs"].fillna(1) if "numjobs" in df else 1
    for field, source in (("read_size", "request_size"), ("write_size", "request_size")):
        df[field] = df[field].fillna(df[source]) if field in df else df[source]
    keys = SERIES_FIELDS + ["numjobs", "queue_depth"]
    med = df.groupby(keys, as_index=False)[list(METRICS)].median()
    med["series"] = [series_label(r) for r in med[SERIES_FIELDS].to_dict("records")]
    return med.sort_values(["request_size", "write_ratio", "randomness", "numjobs", "queue_depth"])


def surface_figure(sweeps: Mapping[str, pd.DataFrame], metric: str) -> Figure:
    """``metric`` against queue depth, one panel per numjobs, one line per series (and device).

    ``sweeps`` maps device names to :func:`sweep_series` frames.  With one device the
    series are told apart by colour; with several, colour is the device and line style
    and marker are the series.
    """
    devices = list(sweeps)
    frames = pd.concat([f.assign(device=d) for d, f in sweeps.items()], ignore_index=True)
    facets = sorted(frames["numjobs"].unique())
    series = list(dict.fromkeys(frames["series"]))
    ncols = min(FACETS_PER_ROW, len(facets))
    nrows = math.ceil(len(facets) / ncols)
    fig = Figure(figsize=(12.5, 1.3 + 2.6 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    compare = len(devices) > 1
    for ax, nj in zip(axes.flat, facets, strict=False):
        part = frames[frames["numjobs"] == nj]
        for d_i, device in enumerate(devices):
            for s_i, name in enumerate(series):
                line = part[(part["device"] == device) & (part["series"] == name)]
                if line.empty:
                    continue
                ax.plot(
                    line["queue_depth"],
                    line[metric],
                    color=f"C{d_i}" if compare else f"C{s_i % 10}",
                    # past ten series the colours repeat: the line style then tells them apart
                    ls=_STYLES[s_i % len(_STYLES)] if compare else _STYLES[(s_i // 10) % len(_STYLES)],
                    marker=_MARKERS[s_i % len(_MARKERS)] if compare else "o",
                    ms=4,
                    lw=1.5,
                )
        depth_axis(ax, frames["queue_depth"])
        facet_axis(ax, nj, len(facets) > 1)
    label_panels(axes, len(facets), metric)
    handles = _legend_handles(devices, series, compare)
    legend_rows = math.ceil(len(handles) / 6)
    fig.suptitle(
        f"{METRIC_TITLES[metric]} vs queue depth",
        x=0.01,
        y=0.995,
        ha="left",
        va="top",
        fontsize=12,
        fontweight="bold",
    )
    fig.legend(
        handles=handles,
        loc="upper right",
        bbox_to_anchor=(0.99, 1.0),
        ncol=min(len(handles), 6),
        fontsize=9,
        frameon=False,
    )
    place(fig, top=0.45 + 0.22 * legend_rows, hspace=0.4)
    return fig


def _legend_handles(devices: list[str], series: list[str], compare: bool) -> list[Line2D]:
    if not compare:
        return [
            Line2D(
                [], [], color=f"C{i % 10}", ls=_STYLES[(i // 10) % len(_STYLES)], marker="o", ms=4, label=s
            )
            for i, s in enumerate(series)
        ]
    by_device = [Line2D([], [], color=f"C{i}", lw=3, label=d) for i, d in enumerate(devices)]
    by_series = [
        Line2D(
            [], [], color="grey", ls=_STYLES[i % len(_STYLES)], marker=_MARKERS[i % len(_MARKERS)], label=s
        )
        for i, s in enumerate(series)
    ]
    return by_device + by_series


def measured_vs_predicted_figure(points: pd.DataFrame, regions: pd.Series) -> Figure:
    """Out-of-fold predicted against measured, per metric, log axes, the 1:1 line and a +-20 % band."""
    fig = Figure(figsize=(12.5, 3.9))
    axes = fig.subplots(1, len(METRICS))
    present = [r for r in REGION_NAMES if (regions == r).any()]
    for ax, metric in zip(axes, METRICS, strict=True):
        y, p = points[metric].to_numpy(), points[f"pred_{metric}"].to_numpy()
        lims = np.array([min(y.min(), p.min()) / 1.3, max(y.max(), p.max()) * 1.3])
        ax.fill_between(lims, lims / 1.2, lims * 1.2, color="grey", alpha=0.15, lw=0)
        ax.plot(lims, lims, "k--", lw=1)
        for region in present:
            mask = (regions == region).to_numpy()
            ax.scatter(y[mask], p[mask], s=12, color=REGION_COLORS[region], label=region, alpha=0.8)
        ax.set(xscale="log", yscale="log", xlim=lims, ylim=lims, title=METRIC_TITLES[metric])
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel(f"measured ({METRIC_UNITS[metric]})")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("predicted, out of fold")
    fig.legend(
        handles=[
            *[Line2D([], [], color=REGION_COLORS[r], marker="o", ls="", label=r) for r in present],
            Line2D([], [], color="k", ls="--", label="1:1"),
        ],
        loc="upper center",
        ncol=len(present) + 1,
        fontsize=9,
        frameon=False,
    )
    place(fig, top=0.75, bottom=0.95, wspace=0.3)
    return fig


def coverage_figure(coverage: Mapping[str, float], points: pd.DataFrame) -> Figure:
    """Left: interval coverage per metric against the nominal level; right: the IOPS intervals."""
    fig = Figure(figsize=(12.5, 3.4))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 2]})
    names = [METRIC_TITLES[m] for m in METRICS]
    values = [100 * coverage[m] for m in METRICS]
    bars = left.bar(names, values, color=["C2" if v >= 100 * INTERVAL_LEVEL - 5 else "C3" for v in values])
    left.bar_label(bars, fmt="%.0f%%", fontsize=9)
    left.axhline(100 * INTERVAL_LEVEL, color="k", ls="--", lw=1, label=f"nominal {INTERVAL_LEVEL:.0%}")
    left.legend(fontsize=8, loc="lower right")
    left.set(ylim=(0, 112), ylabel="measured inside interval (%)", title="interval coverage")
    left.tick_params(axis="x", labelsize=8)
    order = np.argsort(points["iops"].to_numpy())
    x = np.arange(len(order))
    low = points["pred_iops_lower"].to_numpy()[order]
    high = points["pred_iops_upper"].to_numpy()[order]
    right.fill_between(x, low, high, alpha=0.3, color="C0", lw=0, label=f"{INTERVAL_LEVEL:.0%} interval")
    right.plot(x, points["pred_iops"].to_numpy()[order], color="C0", lw=1, label="predicted")
    right.scatter(x, points["iops"].to_numpy()[order], s=8, color="k", zorder=3, label="measured")
    right.set(
        yscale="log", xlabel="measured runs, by IOPS", ylabel="IOPS", title="IOPS intervals, out of fold"
    )
    log_axis(right.yaxis)
    right.grid(True, alpha=0.3)
    right.legend(fontsize=8, loc="upper left")
    place(fig, top=0.35, bottom=0.6, wspace=0.25)
    return fig
