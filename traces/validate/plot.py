"""PNG of a trace validation: latency and served rate per window, predicted against measured.

Four panels sharing the trace's time axis: mean latency, p99 latency (predicted with its
interval as a shaded band, measured as a solid line), IO/s (offered by the trace, served
as measured, served as predicted) and the predicted utilisation of the device with its
100 % line.  Every value is drawn as a level across its window (a window is a span of
time, not an instant), so a trace of one window is as readable as one of a thousand.
Windows predicted saturated are shaded red in every panel; windows the replay measured
saturated (it fell behind the trace) are marked with a red cross on the utilisation
panel, so the two flags read side by side.  Windows where the replay itself could not
keep the trace's rate (``replay_limited``: fio or the CPU, not the device) are hatched
grey and their measurement is drawn grey: shown, but not compared.  Each panel's title
gives its mean relative error, so the picture reads without the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _windows(n: int) -> str:
    return f"{n} window" + ("" if n == 1 else "s")


def _levels(ax: Any, start: np.ndarray, end: np.ndarray, y: np.ndarray, **kw: Any) -> None:
    """One horizontal segment per window, with a marker at its middle."""
    ok = np.isfinite(y)
    ax.hlines(y[ok], start[ok], end[ok], colors=kw["color"], linestyles=kw.get("ls", "solid"), lw=2,
              label=kw["label"])
    ax.plot(((start + end) / 2)[ok], y[ok], kw.get("marker", "o"), ms=4, color=kw["color"])


def _mre_text(summary: dict[str, Any] | None, metric: str) -> str:
    err = ((summary or {}).get("errors") or {}).get(metric)
    if not err or err.get("mre") is None:
        return "no measurement to compare"
    text = f"MRE {err['mre'] * 100:.1f} % over {_windows(err['n'])}"
    uns = err.get("unsaturated") or {}
    if uns.get("mre") is not None and uns.get("n") != err["n"]:
        text += f" ({uns['mre'] * 100:.1f} % over {uns['n']} unsaturated)"
    return text


def plot_validation(
    df: pd.DataFrame, out: Path, *, title: str = "", summary: dict[str, Any] | None = None
) -> Path:
    """Draw the validation figure (see the module docstring) and save it as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = df["window_start_s"].to_numpy(np.float64)
    end = df["window_end_s"].to_numpy(np.float64) if "window_end_s" in df else start + 1.0
    short = df["too_short"].to_numpy(bool) if "too_short" in df else np.zeros(len(df), bool)
    sat = df["saturated"].to_numpy(bool) if "saturated" in df else np.zeros(len(df), bool)
    limited = (df["replay_limited"].fillna(False).astype(bool).to_numpy() if "replay_limited" in df
               else np.zeros(len(df), bool))
    fig, axes = plt.subplots(4, 1, figsize=(10, 9.5), sharex=True, height_ratios=[3, 3, 3, 1.6])
    panels = (("latency_mean_us", "mean latency (us)"), ("latency_p99_us", "p99 latency (us)"))
    width = end - start
    for ax, (m, label) in zip(axes[:2], panels, strict=True):
        pred = df[f"pred_{m}"].to_numpy(np.float64)
        lo = df.get(f"pred_{m}_lower", df[f"pred_{m}"]).to_numpy(np.float64)
        hi = df.get(f"pred_{m}_upper", df[f"pred_{m}"]).to_numpy(np.float64)
        # the interval's upper end can be a backlog (its lower-capacity bound saturates): cut
        # it at three times the largest value shown, so the values stay readable
        shown = np.concatenate(
            [pred] + ([pd.to_numeric(df[m], errors="coerce").to_numpy(np.float64)] if m in df else []))
        top = 3 * float(np.nanmax(shown)) if np.isfinite(shown).any() else np.inf
        clipped = bool(np.any(hi > top))
        band = "90 % prediction interval" + (" (cut at 3x the largest value)" if clipped else "")
        ax.bar(start, np.minimum(hi, top) - lo, width=width, bottom=lo, align="edge", color="tab:orange",
               alpha=0.2, label=band)
        _levels(ax, start, end, pred, color="tab:orange", ls="dashed", marker="s", label="predicted")
        if m in df:
            meas = pd.to_numeric(df[m], errors="coerce").to_numpy(np.float64, copy=True)
            meas[short] = np.nan
            _levels(ax, start, end, np.where(limited, np.nan, meas), color="tab:blue", label="measured")
            if limited.any():
                _levels(ax, start, end, np.where(limited, meas, np.nan), color="grey",
                        label="measured, replay behind (not compared)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0, top=top * 1.02 if clipped else None)
        ax.set_title(f"{label.split(' (')[0]}: {_mre_text(summary, m)}", fontsize=9, loc="left")
    ax = axes[2]
    _levels(ax, start, end, df["offered_iops"].to_numpy(np.float64), color="grey", ls="dotted", marker="^",
            label="offered by the trace")
    if "iops" in df:
        served = pd.to_numeric(df["iops"], errors="coerce").to_numpy(np.float64, copy=True)
        served[short] = np.nan
        _levels(ax, start, end, served, color="tab:blue", label="served, measured")
    _levels(ax, start, end, df["pred_iops"].to_numpy(np.float64), color="tab:orange", ls="dashed", marker="s",
            label="served, predicted")
    ax.set_ylabel("IO/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"served IO/s: {_mre_text(summary, 'iops')}", fontsize=9, loc="left")
    ax = axes[3]
    util = df["utilisation"].to_numpy(np.float64) * 100
    _levels(ax, start, end, util, color="tab:purple", marker="s", label="predicted utilisation")
    ax.axhline(100, color="tab:red", lw=1, ls="--", label="capacity at the window's mix")
    ax.set_ylabel("utilisation (%)")
    if "measured_saturated" in df:
        ms = df["measured_saturated"].fillna(False).astype(bool).to_numpy()
        if ms.any():
            ax.plot(((start + end) / 2)[ms], np.minimum(util[ms], 100.0), "x", color="tab:red", ms=9, mew=2,
                    label="measured saturated (replay fell behind)")
    ax.set_ylim(0, max(110.0, float(np.nanmax(util)) * 1.1))
    ax.set_title(f"device utilisation: peak {np.nanmax(util):.1f} %", fontsize=9, loc="left")
    ax.set_xlabel("trace time (s)")
    for a in axes:
        for s0, e0 in zip(start[sat], end[sat], strict=True):
            a.axvspan(s0, e0, color="tab:red", alpha=0.12, lw=0)
        for s0, e0 in zip(start[limited], end[limited], strict=True):
            a.axvspan(s0, e0, facecolor="none", edgecolor="grey", hatch="//", alpha=0.35, lw=0)
        a.legend(fontsize=7, loc="best")
        a.grid(alpha=0.3)
    span = max(float(end.max() - start.min()), 1e-6)
    axes[-1].set_xlim(start.min() - 0.02 * span, end.max() + 0.02 * span)
    sat_note = ""
    if sat.any():
        sat_note = f"  |  red: {_windows(int(sat.sum()))} predicted saturated"
    if limited.any():
        sat_note += f"  |  hatched: {_windows(int(limited.sum()))} the replay fell behind (not compared)"
    fig.suptitle((title or "trace validation") + sat_note, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
