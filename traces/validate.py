"""Validate a device model on a trace: per-window predicted vs measured metrics.

Measured values come from a replay on ``target`` when one is given, otherwise from the
trace itself when it carries latency (issue/completion pairs or response times): then its
latency, and its IOPS and bandwidth (the trace's own rate) are compared.  Relative error is
``|predicted - measured| / measured``; the summary gives the mean (MRE) per metric.
IOPS and bandwidth of an open-loop trace are its offered load, not the device's capacity,
so their errors are only meaningful for windows where the trace kept the device busy.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput, NoData, TooLarge
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import METRICS, WORKLOAD_FIELDS
from traces.characterize import Characterization, characterize

TRACE_MEASURED = METRICS


@dataclass
class ValidationReport:
    """Per-window vectors, predictions, measurements and errors, plus a summary."""

    device: str
    model_version: str
    windows: pd.DataFrame
    summary: dict[str, Any]
    replay: dict[str, Any] | None = None
    plot: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""
        clean = self.windows.replace([np.inf, -np.inf], np.nan)
        win = clean.astype(object).where(clean.notna(), None)
        return {
            "device": self.device,
            "model_version": self.model_version,
            "summary": self.summary,
            "replay": self.replay,
            "plot": self.plot,
            "warnings": self.warnings,
            "windows": win.to_dict(orient="records"),
        }


def compare(
    char: Characterization, predictions: pd.DataFrame, measured: pd.DataFrame | None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Join windows, predictions and measurements; add relative errors and their means."""
    # The trace's own rates and latencies stay, as trace_<metric>; <metric> is what was measured.
    base = char.windows.rename(columns={m: f"trace_{m}" for m in METRICS})
    df = pd.concat([base.reset_index(drop=True), predictions.reset_index(drop=True)], axis=1)
    mre: dict[str, Any] = {}
    if measured is not None:
        df = df.merge(measured, on="window_start_s", how="left")
        for m in METRICS:
            if m not in df.columns:
                continue
            meas = df[m].to_numpy(np.float64)
            pred = df[f"pred_{m}"].to_numpy(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                err = np.abs(pred - meas) / meas
            err[~np.isfinite(err)] = np.nan
            df[f"{m}_rel_error"] = err
            ok = ~np.isnan(err)
            mre[m] = {"mre": float(err[ok].mean()) if ok.any() else None, "n": int(ok.sum())}
    summary = {"trace": char.summary, "windows": len(df), "measured": measured is not None, "errors": mre}
    return df, summary


def trace_measurements(char: Characterization) -> pd.DataFrame | None:
    """The trace's own measured metrics per window, when it has latency."""
    if char.info.latency_source is None:
        return None
    return char.windows[["window_start_s", *TRACE_MEASURED]].copy()


def validate_trace(
    datadir: DataDir,
    device: str,
    path: str | Path,
    *,
    fmt: str = "auto",
    window_s: float | None = 1.0,
    window_requests: int | None = None,
    target: str | None = None,
    destroy_data: bool = False,
    speed: float = 1.0,
    plot_path: str | Path | None = None,
    model_version: str | None = None,
    registry: ModelRegistry | None = None,
    lanes: int | None = None,
    fio: str | None = None,
) -> ValidationReport:
    """Characterise a trace, predict every window on ``device`` and compare with measurements."""
    model = (registry or ModelRegistry(datadir)).load(device, model_version)
    char = characterize(str(path), fmt, window_s=window_s, window_requests=window_requests)
    preds = model.predict_frame(char.windows[list(WORKLOAD_FIELDS)])
    replay_info = None
    warnings: list[str] = []
    if target is not None:
        if window_requests is not None or window_s is None:
            raise InvalidInput(
                "validation with a replay target needs time windows (--window), not --window-requests"
            )
        from traces.replay import replay

        result = replay(
            path, target, fmt=fmt, destroy_data=destroy_data, speed=speed, window_s=window_s, lanes=lanes,
            fio=fio,
        )
        measured = result.windows
        replay_info = {k: v for k, v in result.to_dict().items() if k != "windows"}
        warnings += result.warnings
    else:
        measured = trace_measurements(char)
        if measured is None:
            warnings.append("the trace has no latency and no replay target was given: predictions only")
    df, summary = compare(char, preds, measured)
    plot = None
    if plot_path is not None and measured is not None:
        from traces.plot import plot_validation

        plot = str(plot_validation(df, Path(plot_path), title=f"{device} on {Path(path).name}"))
    return ValidationReport(device, model.version, df, summary, replay_info, plot, warnings)


def validate_upload(
    datadir: DataDir,
    device: str,
    data: bytes,
    *,
    filename: str = "",
    fmt: str = "auto",
    window_s: float | None = 1.0,
    window_requests: int | None = None,
    max_bytes: int | None = None,
    registry: ModelRegistry | None = None,
) -> dict[str, Any]:
    """Validate an uploaded trace (bytes) on ``device``: vectors, predictions and errors."""
    if max_bytes is not None and len(data) > max_bytes:
        raise TooLarge(f"trace upload of {len(data)} bytes exceeds the limit of {max_bytes} bytes")
    if not data:
        raise NoData("the uploaded trace is empty")
    datadir.catalog.get_device(device)
    scratch = datadir.scratch_dir
    scratch.mkdir(parents=True, exist_ok=True)

    # A blktrace per-CPU name would make the parser look for sibling files: use a plain name.
    with tempfile.NamedTemporaryFile(dir=scratch, prefix="upload-", suffix=".trace") as tmp:
        tmp.write(data)
        tmp.flush()
        report = validate_trace(
            datadir,
            device,
            tmp.name,
            fmt=fmt,
            window_s=window_s,
            window_requests=window_requests,
            registry=registry,
        )
    out = report.to_dict()
    out["filename"] = filename
    out["summary"]["trace"]["paths"] = [filename]
    return out
