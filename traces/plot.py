"""PNG of predicted against measured metrics over time (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from modeling.workload import METRIC_UNITS, METRICS


def plot_validation(df: pd.DataFrame, out: Path, *, title: str = "") -> Path:
    """Draw one panel per metric with measured and predicted values per window; save a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in METRICS if m in df.columns and f"pred_{m}" in df.columns]
    fig, axes = plt.subplots(
        len(metrics) or 1, 1, figsize=(9, 2.4 * max(len(metrics), 1)), sharex=True, squeeze=False
    )
    t = df["window_start_s"]
    for ax, m in zip(axes[:, 0], metrics, strict=True):
        ax.plot(t, df[m], "o-", ms=3, label="measured")
        ax.plot(t, df[f"pred_{m}"], "s--", ms=3, label="predicted")
        lo, hi = df.get(f"pred_{m}_lower"), df.get(f"pred_{m}_upper")
        if lo is not None and hi is not None and lo.notna().any():
            ax.fill_between(t, lo, hi, alpha=0.2, step=None, label="prediction interval")
        ax.set_ylabel(f"{m}\n({METRIC_UNITS[m]})", fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("trace time (s)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
