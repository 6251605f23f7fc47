"""``trace predict``: what a trace's load will do on a device, per window.

Per window: the offered load (IO/s and MiB/s, as the trace's arrivals make it), the
workload mix, burstiness, the device's capacity at that mix, utilisation, the saturation
flag, the predicted in-flight count, mean and p99 latency with intervals, and the IO/s
and MiB/s the device would serve (the offered load unless saturated).  The method is
``open-loop`` (:mod:`traces.predict.openloop`, corrected by measured open-loop points where the
device has them, :mod:`traces.predict.utilisation`) or the older ``trace-qd``.

Windows with fewer than :data:`MIN_WINDOW_REQUESTS` requests are predicted but marked
``too_short``: their rate and latency are too noisy to compare (validation leaves them out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import WORKLOAD_FIELDS
from traces.upload import TraceUpload, answer_upload
from traces.characterize import Characterization, characterize
from traces.predict.ceiling import ReplayCeilings, replay_ceilings
from traces.predict.engines import engine_notes
from traces.predict.openloop import (DEFAULT_LOADS, PredictsFrame, matrix_curves, predict_windows,
                                     window_matrix)
from modeling.store.open_loop_rows import closed_loop_rows, open_loop_rows, swept_mixes
from traces.predict.utilisation import UtilisationCorrection, learn_correction, mix_groups

MIN_WINDOW_REQUESTS = 20
# given a device's replay ceilings (as sweep --for-trace measured them) and its newest open-loop
# rows, the ceilings to predict with (trace validate's probe of the replay path, taken now)
ReplayAdjust = Callable[[ReplayCeilings, pd.DataFrame], ReplayCeilings]
# given a device's newest open-loop rows, the rows to learn the correction on (trace validate's light
# open-loop probe puts points measured now in place of the sweep's at the trace's rates)
Anchors = Callable[[pd.DataFrame], pd.DataFrame]


@dataclass
class DeviceCurveSource:
    """What the open-loop method needs of a device besides its model."""

    loads: list[tuple[int, int]]
    correction: UtilisationCorrection | None = None
    notes: list[str] = field(default_factory=list)
    # the fraction of the model's capacity the device is capped at (traces.replay.capacity)
    ceiling: float = 1.0
    # the write ratios and request sizes it was swept at: curves between them are blended
    # (traces.predict.openloop.closed_loop_curves)
    write_ratios: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    # the replay path's own capacity per mix, measured by sweep --for-trace (used while
    # ``ceiling`` is 1: an explicit ceiling overrides it)
    replay: ReplayCeilings | None = None

    def ceilings(self, windows: pd.DataFrame) -> float | np.ndarray:
        """Each window's capacity ceiling: the explicit one, else the replay path's measured one."""
        if self.ceiling != 1.0 or self.replay is None:
            return self.ceiling
        return self.replay.for_windows(windows)


def device_source(datadir: DataDir, device: str, model: PredictsFrame,
                  frame: pd.DataFrame | None = None, adjust: ReplayAdjust | None = None,
                  anchors: Anchors | None = None) -> DeviceCurveSource:
    """The device's measured closed-loop loads and its open-loop correction, from the catalog
    (or from ``frame``, its measurements when the caller has read them already); ``adjust``
    replaces the replay ceilings the sweep measured before the correction is learnt on them,
    ``anchors`` the open-loop points it is learnt on (never what is stored)."""
    frame = datadir.catalog.measurements(device) if frame is None else frame
    notes: list[str] = []
    if frame.empty or "queue_depth" not in frame:
        note = "no stored measurements: queue depths 1-64 assumed"
        return DeviceCurveSource(list(DEFAULT_LOADS), None, [note])
    closed = closed_loop_rows(frame)
    nj = closed["numjobs"] if "numjobs" in closed else pd.Series(1, index=closed.index)
    loads = sorted({(int(q), int(j)) for q, j in zip(closed["queue_depth"], nj.fillna(1), strict=True)})
    newest = newest_open_loop(frame)
    ratios, sizes = swept_mixes(frame)
    size = closed["request_size"]
    one_size = all(f not in closed or (closed[f].fillna(size) == size).all()
                   for f in ("read_size", "write_size"))
    sizes = sizes if one_size else []

    def capacity_of(rows: pd.DataFrame) -> np.ndarray:
        """The capacity of the curve a window of each row's workload is predicted on."""
        w = window_matrix(rows.reindex(columns=list(WORKLOAD_FIELDS)))
        return matrix_curves(model, w, loads, ratios, sizes).iops["value"].max(axis=1)  # type: ignore[no-any-return]

    replay = replay_ceilings(newest, frame, capacity_of)
    if replay is not None and adjust is not None:
        replay = adjust(replay, newest)
    if anchors is not None:
        newest = anchors(newest)
    # the points are corrected on the curve the windows are predicted on: capped at the replay path's capacity
    correction = (learn_correction(model, newest, loads, None if replay is None else replay.for_windows)
                  if len(newest) else None)
    if correction is None:
        notes.append("the device has no open-loop points: light-load latency is the closed-loop method's")
    else:
        notes += correction.notes()
    if replay is not None:
        notes += replay.notes()
    notes += engine_notes(frame, device)
    return DeviceCurveSource(loads, correction, notes, write_ratios=ratios, sizes=sizes, replay=replay)


def newest_open_loop(frame: pd.DataFrame) -> pd.DataFrame:
    """The open-loop points of each mix's newest open-loop sweep: the device as last measured.

    A mix measured again (a rerun at the replay's real-time priority, a device that changed)
    replaces its older points instead of averaging with them: on zram, points of one mix
    at normal priority on a busy machine (20-96 us at 400 IO/s) beside its real-time ones
    (16-19 us) took a trace's mean error from 22 % to 159 %.
    """
    ol = open_loop_rows(frame)
    if ol.empty or "sweep_id" not in ol:
        return ol
    latest = ol.groupby(mix_groups(ol))["sweep_id"].transform("max")
    return ol[ol["sweep_id"] == latest].reset_index(drop=True)


def predict_table(
    model: PredictsFrame, char: Characterization, source: DeviceCurveSource, method: str = "open-loop"
) -> pd.DataFrame:
    """The per-window prediction table of a characterised trace."""
    win = char.windows
    pred = predict_windows(model, win, method=method, loads=source.loads, ceiling=source.ceilings(win),
                           write_ratios=source.write_ratios, sizes=source.sizes)
    if method == "open-loop" and source.correction is not None:
        mean_f, p99_f = source.correction.factors(win, pred, char.gap_hist)
        for col, f in (("pred_latency_mean_us", mean_f), ("pred_latency_p99_us", p99_f)):
            for suffix in ("", "_lower", "_upper"):
                pred[col + suffix] = pred[col + suffix] * f
        raised = consistent_tail(pred)
        pred["pred_inflight"] = win["iops"].to_numpy(np.float64) * pred["pred_latency_mean_us"] / 1e6
        pred["open_loop_corrected"] = ~pred["saturated"].to_numpy(bool)
    else:
        raised = 0
    base = pd.DataFrame(
        {
            "window_start_s": win["window_start_s"],
            "window_end_s": win["window_end_s"],
            "requests": win["requests"],
            "too_short": win["requests"] < MIN_WINDOW_REQUESTS,
            "offered_iops": win["iops"],
            "offered_mib_s": win["bandwidth_mib_s"],
            "write_ratio": win["write_ratio"],
            "request_size": win["request_size"],
            "randomness": win["randomness"],
            "arrival_cv2": win.get("arrival_cv2", pd.Series(np.nan, index=win.index)),
        }
    )
    out = pd.concat([base, pred], axis=1)
    out["method"] = method
    out.attrs["p99_raised_to_mean"] = raised
    return out


def consistent_tail(pred: pd.DataFrame) -> int:
    """Raise each bound's predicted p99 to its mean where the correction put it below; how many
    windows it raised (value bound).

    The open-loop method's own p99 is never below its mean (:func:`traces.predict.queueing.steady_state`),
    and the correction's points are those whose mean is not above their p99
    (:func:`traces.predict.utilisation.transient`); but the mean's and the p99's cold paths are
    fitted apart, so far from the measured rates they can cross.  A window whose requests are
    spread like the points' cannot have a p99 under its mean: the crossing is the fit's.
    Before the transient points were left out and the closed-loop points ran at the replay's
    priority, it happened on 7 of 10 wsrch windows on zram at a load average of 15; since, on
    none of 30 (a quiet run).
    """
    raised = 0
    for suffix in ("", "_lower", "_upper"):
        mean, p99 = pred["pred_latency_mean_us" + suffix], pred["pred_latency_p99_us" + suffix]
        below = (p99 < mean).to_numpy(bool)
        if suffix == "":
            raised = int(below.sum())
        pred["pred_latency_p99_us" + suffix] = np.where(below, mean, p99)
    return raised


@dataclass
class TracePrediction:
    """A trace's per-window predictions on a device, and a summary."""

    device: str
    model_version: str
    method: str
    windows: pd.DataFrame
    summary: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN and infinities become None)."""
        return self._json({})

    def _json(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The JSON-ready form with ``extra`` keys after the summary (a subclass's own fields)."""
        return {
            "device": self.device,
            "model_version": self.model_version,
            "method": self.method,
            "summary": self.summary,
            **extra,
            "warnings": self.warnings,
            "windows": json_records(self.windows),
        }


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A window table's rows as JSON-ready dicts: NaN and infinities become None."""
    clean = frame.replace([np.inf, -np.inf], np.nan)
    return clean.astype(object).where(clean.notna(), None).to_dict(orient="records")  # type: ignore[no-any-return]


def summarise(table: pd.DataFrame, char: Characterization) -> dict[str, Any]:
    """Whole-trace figures: offered load, windows saturated, request-weighted mean latency."""
    n = table["requests"].to_numpy(np.float64)
    mean = table["pred_latency_mean_us"].to_numpy(np.float64)
    return {
        "trace": char.summary,
        "windows": len(table),
        "too_short_windows": int(table["too_short"].sum()),
        "saturated_windows": int(table["saturated"].sum()),
        "peak_utilisation": float(table["utilisation"].max()),
        "offered_iops": float(char.summary["measured"]["iops"]),
        "offered_mib_s": float(char.summary["measured"]["bandwidth_mib_s"]),
        "pred_latency_mean_us": float(np.sum(n * mean) / n.sum()) if n.sum() else None,
        "pred_latency_p99_us_max": float(table["pred_latency_p99_us"].max()),
    }


def predict_trace(
    datadir: DataDir,
    device: str,
    path: str | Path,
    *,
    fmt: str = "auto",
    window_s: float | None = 1.0,
    window_requests: int | None = None,
    method: str = "open-loop",
    model_version: str | None = None,
    registry: ModelRegistry | None = None,
    ceiling: float = 1.0,
    probe: Callable[[ReplayCeilings, pd.DataFrame, pd.DataFrame], ReplayCeilings] | None = None,
    anchors: Anchors | None = None,
    characterised: Characterization | None = None,
) -> tuple[TracePrediction, Characterization]:
    """Characterise a trace and predict every window on ``device``.

    ``ceiling`` (open-loop only) caps the device's capacity at that fraction of the model's:
    validation on a reference whose replay path serves less than its closed-loop sweeps
    (:mod:`traces.replay.capacity`).  ``probe(ceilings, open_loop_rows, windows)``: the replay
    ceilings to use instead of the sweep's (``trace validate``'s probe of the replay path now).
    ``anchors(open_loop_rows)``: the open-loop points to correct on instead of the stored ones
    (``trace validate``'s light open-loop probe).  ``characterised``: the trace's characterisation
    when the caller has it already (the same ``path`` and windows).
    """
    model = (registry or ModelRegistry(datadir)).load(device, model_version)
    char = characterised or characterize(str(path), fmt, window_s=window_s, window_requests=window_requests)
    adjust = None if probe is None else (lambda ceilings, rows: probe(ceilings, rows, char.windows))
    source = device_source(datadir, device, model, adjust=adjust, anchors=anchors)
    if ceiling != 1.0:
        source.ceiling = ceiling
        source.notes.append(f"capacity capped at {ceiling * 100:.0f} % of the model's (the replay path's)")
    table = predict_table(model, char, source, method)
    warnings = list(source.notes) if method == "open-loop" else []
    raised = table.attrs.get("p99_raised_to_mean")
    if raised:
        warnings.append(f"{raised} window(s) had a corrected p99 below their mean: raised to the mean "
                        "(the mean's and the p99's cold paths cross far from the measured rates)")
    if table["extrapolated"].any():
        n_ext = int(table["extrapolated"].sum())
        warnings.append(f"{n_ext} window(s) have a workload outside what the device was swept on")
    result = TracePrediction(device, model.version, method, table, summarise(table, char), warnings)
    return result, char


def predict_upload(
    datadir: DataDir, device: str, upload: TraceUpload, registry: ModelRegistry | None = None
) -> dict[str, Any]:
    """:func:`predict_trace` of an uploaded trace."""

    def answer(path: Path) -> dict[str, Any]:
        result, _ = predict_trace(
            datadir, device, path, fmt=upload.fmt, window_s=upload.window_s,
            window_requests=upload.window_requests, method=upload.method, registry=registry,
        )
        return result.to_dict()

    return answer_upload(datadir, device, upload, answer)
