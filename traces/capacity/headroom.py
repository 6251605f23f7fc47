"""How much faster a trace's own time line can run on a device before it breaks an SLO.

"How many copies of this tenant fit?"  The trace is characterised into windows as
``trace predict`` does, and every window is a mix with its own rate, burstiness and gaps.
Running the time line ``s`` times faster offers each window ``s`` times its rate with the
same burstiness and gaps ``s`` times shorter (:func:`traces.capacity.mix_latency.scaled_gaps`),
so a window's largest speed-up is its capacity under the SLO (the search of
:mod:`traces.capacity.search` on its own curve) over its own rate.  The trace's headroom is
the largest ``s`` that keeps every window, or a chosen ``share`` of them, under the target:
the speed-ups sorted, the one at the share's quantile.  The windows with the smallest
speed-ups are those that break first.

Windows with fewer than :data:`traces.predict.windows.MIN_WINDOW_REQUESTS` requests are
left out (their rate is noise), as validation leaves them out; the answer says how many.
The interval is the binding window's: its searches on the model's bounds.  Below the
capacity no backlog carries from one window to the next, so the windows are independent.

Each window's curve is the one ``capacity`` searches (:func:`traces.capacity.device.with_ceilings`):
capped at what the device's open-loop path was measured to serve, and stopped at the fastest
open-loop point served in full (outcome ``measured``), since a speed-up is an offered rate too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput, NoData
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from traces.capacity.ceiling import OpenLoopCeilings
from traces.capacity.device import source_and_ceilings, with_ceilings
from traces.capacity.mix_latency import MixCurves
from traces.capacity.search import CapacityAnswer, search_capacity
from traces.capacity.slo import Slo
from traces.characterize import Characterization, characterize
from traces.predict.windows import MIN_WINDOW_REQUESTS, DeviceCurveSource, json_records

FIRST_BREAKING = 5
"""Windows named as breaking first."""


@dataclass
class TraceHeadroom:
    """The largest speed-up of a trace's time line that meets an SLO on a device, and why."""

    device: str
    model_version: str
    slo: str
    share: float
    speedup: float
    speedup_lower: float
    speedup_upper: float
    outcome: str  # the binding window's: limited, saturation, measured (the fastest open-loop point) or never
    windows: int  # windows judged
    windows_left_out: int  # too few requests
    allowed_to_break: int  # windows the share lets break
    binding_window: dict[str, Any]
    breaking_first: list[dict[str, Any]]
    table: pd.DataFrame  # per window judged: start, offered IO/s, speed-up, outcome, binding target
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (infinities become None)."""
        out = {k: v for k, v in vars(self).items() if k != "table"}
        out["window_table"] = json_records(self.table)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def _window_curves(
    model: Any,
    char: Characterization,
    keep: np.ndarray,
    source: DeviceCurveSource,
    measured: OpenLoopCeilings | None,
) -> MixCurves:
    win = char.windows.loc[keep].reset_index(drop=True)
    cv2 = win["arrival_cv2"].to_numpy(np.float64) if "arrival_cv2" in win else np.ones(len(win))
    mc = with_ceilings(model, win, source, measured, np.where(np.isfinite(cv2), cv2, 1.0))
    if char.gap_hist is not None:
        mc.gap_hist = char.gap_hist[keep]
        mc.gap_rate = win["iops"].to_numpy(np.float64)
    return mc


def headroom_of(mc: MixCurves, windows: pd.DataFrame, slo: Slo, share: float = 1.0) -> dict[str, Any]:
    """The headroom of windows (rows of ``windows`` matching ``mc``'s mixes) under ``slo``."""
    if not 0 < share <= 1:
        raise InvalidInput(f"share must be in (0, 1], got {share}", details={"field": "share"})
    rate = windows["iops"].to_numpy(np.float64)
    answers = [search_capacity(mc, j, slo, interval=False) for j in range(len(rate))]
    speedup = np.array([a.iops for a in answers]) / rate
    order = np.argsort(speedup, kind="stable")
    allowed = int(math.floor((1 - share) * len(rate) + 1e-9))
    k = int(order[min(allowed, len(rate) - 1)])
    full = search_capacity(mc, k, slo)  # the binding window, with its interval
    table = pd.DataFrame(
        {
            "window": np.arange(len(rate)),
            "window_start_s": windows["window_start_s"].to_numpy(),
            "offered_iops": rate,
            "speedup": speedup,
            "outcome": [a.outcome for a in answers],
            "binding": [a.binding for a in answers],
        }
    )
    return {
        "answers": answers,
        "table": table,
        "order": order,
        "allowed": allowed,
        "binding": k,
        "full": full,
    }


def _row(table: pd.DataFrame, j: int, answer: CapacityAnswer) -> dict[str, Any]:
    r = table.iloc[j]
    return {
        "window": int(r["window"]),
        "window_start_s": float(r["window_start_s"]),
        "offered_iops": float(r["offered_iops"]),
        "speedup": float(r["speedup"]),
        "outcome": answer.outcome,
        "binding": answer.binding,
        "latency_mean_us": answer.latency_mean_us,
        "latency_p99_us": answer.latency_p99_us,
    }


def trace_headroom(
    datadir: DataDir,
    device: str,
    path: str | Path,
    slo: Slo,
    *,
    share: float = 1.0,
    fmt: str = "auto",
    window_s: float | None = 1.0,
    window_requests: int | None = None,
    registry: ModelRegistry | None = None,
) -> TraceHeadroom:
    """The largest speed-up of the trace at ``path`` that keeps ``share`` of its windows under ``slo``."""
    if not 0 < share <= 1:
        raise InvalidInput(f"share must be in (0, 1], got {share}", details={"field": "share"})
    model = (registry or ModelRegistry(datadir)).load(device)
    char = characterize(str(path), fmt, window_s=window_s, window_requests=window_requests)
    win = char.windows
    keep = (win["requests"].to_numpy() >= MIN_WINDOW_REQUESTS) & (win["iops"].to_numpy(np.float64) > 0)
    if not keep.any():
        raise NoData(f"no window of the trace holds {MIN_WINDOW_REQUESTS} requests: use longer windows")
    source, measured = source_and_ceilings(datadir, device, model)
    mc = _window_curves(model, char, keep, source, measured)
    kept = win.loc[keep].reset_index(drop=True)
    h = headroom_of(mc, kept, slo, share)
    table, full, k = h["table"], h["full"], h["binding"]
    table["window"] = np.flatnonzero(keep)  # numbered as in trace predict's table
    rate = float(kept["iops"].iloc[k])
    # without open-loop points the binding window's notes say so
    notes = [n for n in source.notes if source.correction is not None or "no open-loop points" not in n]
    if (~keep).any():
        notes.append(f"{int((~keep).sum())} window(s) of fewer than {MIN_WINDOW_REQUESTS} requests left out")
    notes += [f"binding window: {n}" for n in full.notes]
    first = [_row(table, int(j), h["answers"][int(j)]) for j in h["order"][:FIRST_BREAKING]]
    return TraceHeadroom(
        device=device,
        model_version=model.version,
        slo=str(slo),
        share=share,
        speedup=full.iops / rate,
        speedup_lower=full.iops_lower / rate,
        speedup_upper=full.iops_upper / rate,
        outcome=full.outcome,
        windows=int(keep.sum()),
        windows_left_out=int((~keep).sum()),
        allowed_to_break=h["allowed"],
        binding_window=_row(table, k, full),
        breaking_first=first,
        table=table,
        notes=notes,
    )
