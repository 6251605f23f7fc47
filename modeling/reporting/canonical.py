"""The per-mix panels of a sweep that measured each mix at one or two depths only.

A fio-plot style surface draws one line per measured mix.  A sampled plan (``quick``,
``lhs``, ``random``) measures dozens of mixes at a depth or two each: that is dozens of
one-point "lines" and a legend nobody can read.  For such a sweep the panels draw the
model's predicted curves of a few canonical mixes instead (the ones people ask about: 4 KiB
random read and write, 128 KiB and 1 MiB sequential read), with the measured points beside
them: a point near a canonical mix in that mix's colour, every other point in grey.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from modeling.reporting.figures import (
    FACETS_PER_ROW,
    METRIC_TITLES,
    depth_axis,
    facet_axis,
    label_panels,
    place,
    series_label,
)
from modeling.workload import KIB, MIB

CANONICAL_MIXES: tuple[dict[str, float], ...] = (
    {"write_ratio": 0.0, "randomness": 1.0, "request_size": 4 * KIB},
    {"write_ratio": 1.0, "randomness": 1.0, "request_size": 4 * KIB},
    {"write_ratio": 0.0, "randomness": 0.0, "request_size": 128 * KIB},
    {"write_ratio": 0.0, "randomness": 0.0, "request_size": 1 * MIB},
)
"""4k randread, 4k randwrite, 128k read, 1m read (fio's rw names: plain ``read`` is sequential)."""

MIN_DEPTHS_PER_MIX = 3
"""A mix measured at fewer queue depths than this (the median over mixes) draws no line of its own."""
MAX_MEASURED_LINES = 16
"""More measured mixes than this and their legend is unreadable: canonical curves instead."""
NEAR = {"write_ratio": 0.25, "randomness": 0.25, "log2_size": 1.0}
"""How far a measured point may be from a canonical mix to be drawn in its colour."""
GREY = "0.65"


def mix_label(mix: Mapping[str, float]) -> str:
    """``4k randread``: the mix in the words of the measured surfaces."""
    size = mix["request_size"]
    return series_label({**mix, "read_size": size, "write_size": size})


def canonical_labels() -> list[str]:
    """The canonical mixes' labels, in order."""
    return [mix_label(m) for m in CANONICAL_MIXES]


def needs_canonical(sweeps: Mapping[str, pd.DataFrame]) -> bool:
    """True when the measured lines would not read as curves: a sampled plan, or too many mixes.

    ``sweeps`` maps devices to :func:`modeling.reporting.figures.sweep_series` frames.
    """
    frames = pd.concat(list(sweeps.values()), ignore_index=True)
    depths = frames.groupby(["series", "numjobs"])["queue_depth"].nunique()
    return bool(depths.median() < MIN_DEPTHS_PER_MIX or frames["series"].nunique() > MAX_MEASURED_LINES)


def nearest_mix(points: pd.DataFrame) -> np.ndarray:
    """Per measured point, the index of the canonical mix it is near, or -1."""
    out = np.full(len(points), -1)
    best = np.full(len(points), np.inf)
    log_size = np.log2(points["request_size"].to_numpy(dtype=float))
    for i, mix in enumerate(CANONICAL_MIXES):
        d_wr = np.abs(points["write_ratio"].to_numpy(dtype=float) - mix["write_ratio"]) / NEAR["write_ratio"]
        d_rnd = np.abs(points["randomness"].to_numpy(dtype=float) - mix["randomness"]) / NEAR["randomness"]
        d_size = np.abs(log_size - math.log2(mix["request_size"])) / NEAR["log2_size"]
        distance = np.maximum.reduce([d_wr, d_rnd, d_size])
        closer = (distance <= 1.0) & (distance < best)
        out[closer], best[closer] = i, distance[closer]
    return out


def drawn_mixes(frames: pd.DataFrame) -> list[int]:
    """The canonical mixes whose request size the sweep reached (the others would be extrapolations)."""
    low, high = frames["request_size"].min(), frames["request_size"].max()
    return [i for i, mix in enumerate(CANONICAL_MIXES) if low <= mix["request_size"] <= high]


def depth_grid(frames: pd.DataFrame) -> np.ndarray:
    """Powers of two spanning the measured queue depths (the curves stay inside the sweep)."""
    low, high = float(frames["queue_depth"].min()), float(frames["queue_depth"].max())
    return 2.0 ** np.arange(math.floor(math.log2(low)), math.ceil(math.log2(high)) + 1)


def predicted_curves(
    model: Any, mixes: list[int], depths: np.ndarray, numjobs: float, metric: str
) -> list[pd.DataFrame]:
    """Per canonical mix (index into :data:`CANONICAL_MIXES`), the model's ``metric`` (value,
    lower, upper) over ``depths``."""
    curves = []
    for mix in (CANONICAL_MIXES[i] for i in mixes):
        grid = pd.DataFrame({**{k: np.full(len(depths), v) for k, v in mix.items()},
                             "queue_depth": depths, "numjobs": np.full(len(depths), numjobs)})
        out = model.predict_frame(grid, [metric])
        pred = f"pred_{metric}"
        curves.append(pd.DataFrame({"queue_depth": depths, "value": out[pred],
                                    "lower": out[f"{pred}_lower"], "upper": out[f"{pred}_upper"]}))
    return curves


_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D")


def canonical_figure(sweeps: Mapping[str, pd.DataFrame], models: Mapping[str, Any], metric: str) -> Figure:
    """``metric`` against queue depth per numjobs: canonical mixes predicted, measured points beside.

    ``models`` maps devices to their model (or None: that device shows its points only).
    Colour is the mix; with several devices, line style and marker tell the devices apart.
    """
    devices = list(sweeps)
    frames = pd.concat([f.assign(device=d) for d, f in sweeps.items()], ignore_index=True)
    frames["mix"] = nearest_mix(frames)
    facets = sorted(frames["numjobs"].unique())
    ncols = min(FACETS_PER_ROW, len(facets))
    nrows = math.ceil(len(facets) / ncols)
    fig = Figure(figsize=(12.5, 1.9 + 2.6 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    depths, mixes = depth_grid(frames), drawn_mixes(frames)
    frames.loc[~frames["mix"].isin(mixes), "mix"] = -1  # near a mix not drawn: grey like the rest
    for ax, nj in zip(axes.flat, facets, strict=False):
        for d_i, device in enumerate(devices):
            _draw(ax, frames[(frames["numjobs"] == nj) & (frames["device"] == device)], models.get(device),
                  (mixes, depths), nj, metric, d_i, shade=len(devices) == 1)
        depth_axis(ax, np.concatenate([depths, frames["queue_depth"].to_numpy()]))
        facet_axis(ax, nj, len(facets) > 1)
    label_panels(axes, len(facets), metric)
    handles = legend_handles(devices, models, mixes)
    fig.suptitle(f"{METRIC_TITLES[metric]} vs queue depth: canonical mixes", x=0.01, y=0.995, ha="left",
                 va="top", fontsize=12, fontweight="bold")
    # above the panels, left-aligned, four to a row: inside the figure whatever the labels' length
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.01, 0.955), ncol=LEGEND_COLUMNS,
               fontsize=9, frameon=False)
    place(fig, top=0.75 + 0.22 * math.ceil(len(handles) / LEGEND_COLUMNS), hspace=0.4)
    return fig


LEGEND_COLUMNS = 4


def _draw(ax: Any, points: pd.DataFrame, model: Any, grid: tuple[list[int], np.ndarray], numjobs: float,
          metric: str, d_i: int, *, shade: bool) -> None:
    """One device in one panel: its predicted canonical curves (with a model) and its measured points."""
    mixes, depths = grid
    if model is not None:
        for m_i, curve in zip(mixes, predicted_curves(model, mixes, depths, numjobs, metric), strict=True):
            ax.plot(curve["queue_depth"], curve["value"], color=f"C{m_i}", lw=1.8, ls=_STYLES[d_i % 4],
                    gid=f"predicted {m_i}")
            if shade:
                ax.fill_between(curve["queue_depth"], curve["lower"], curve["upper"], color=f"C{m_i}",
                                alpha=0.12, lw=0)
    other, near = points[points["mix"] < 0], points[points["mix"] >= 0]
    ax.scatter(other["queue_depth"], other[metric], s=14, color=GREY, marker=_MARKERS[d_i % 4], zorder=2,
               gid="measured other")
    ax.scatter(near["queue_depth"], near[metric], s=34, facecolors="none", linewidths=1.4,
               edgecolors=[f"C{i}" for i in near["mix"]], marker=_MARKERS[d_i % 4], zorder=3,
               gid="measured near")


def legend_handles(devices: list[str], models: Mapping[str, Any], mixes: list[int]) -> list[Line2D]:
    """One entry per canonical mix drawn, two for the measured points, and one per device when several."""
    modelled = any(models.get(d) is not None for d in devices)
    suffix = " (model)" if modelled else " (measured near it)"
    labels = canonical_labels()
    handles = [Line2D([], [], color=f"C{i}", lw=1.8 if modelled else 0, marker=None if modelled else "o",
                      mfc="none", label=labels[i] + suffix) for i in mixes]
    if modelled:
        handles.append(Line2D([], [], ls="", marker="o", mfc="none", mec="0.2", label="measured, near a mix"))
    handles.append(Line2D([], [], ls="", marker="o", color=GREY, ms=4, label="measured, other mixes"))
    if len(devices) > 1:
        handles += [Line2D([], [], color="0.2", ls=_STYLES[i % 4], marker=_MARKERS[i % 4], mfc="none",
                           label=d) for i, d in enumerate(devices)]
    return handles
