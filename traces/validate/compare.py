"""Validate a device model on a trace: per-window predicted vs measured latency and rates.

Predictions come from :mod:`traces.predict.windows` (``open-loop`` by default, or ``trace-qd``).
Measured values come from a replay on ``target`` when one is given, otherwise from the
trace itself when it carries latency (issue/completion pairs or response times).

What is compared, per window:

* latency, mean and p99: predicted against measured (the replay's per-I/O latency);
* IOPS and bandwidth *served*: the device's predicted service (the offered load unless
  the window is saturated) against the replay's served rate, counted over the window's
  own replay span; never the model's capacity against the offered load.  Bandwidth is
  compared in the bytes the replay issued (sizes the target could not take were rounded
  up, :class:`traces.replay.iolog.Fit`); the prediction at the trace's own sizes is kept
  beside it (``pred_bandwidth_trace_mib_s``, error ``bandwidth_mib_s_at_trace_sizes``) and
  the summary's ``replayed_bytes`` gives both totals;
* saturation: the predicted flag against the replay falling behind the trace.

Windows with too few requests (``too_short``) are left out of every error, and so are the
replay's ``replay_limited`` windows (fio or the CPU, not the device, fell behind the
schedule: their latency includes the machine's waits and their saturation is unknown);
the summary counts those under ``saturation``.  The p99 is compared only on windows of at
least :data:`MIN_P99_REQUESTS` requests.

With a replay target (and ``destroy_data``, open-loop method), right before the replay, the trace's
light rates are measured again open loop (:mod:`traces.validate.openloop_probe`) and the windows
predicted a second time with those points in place of the sweep's at the same mix and rates: the
report's errors are that *re-anchored* prediction's, and the prediction as swept is compared with
the same replay beside it (``open_loop_probe.as_swept``, the window columns ``as_swept_*``).

With a replay target, a device check (:mod:`traces.validate.device_check`) runs right before the
replay: one QD1 probe at the trace's dominant mix against the model's prediction of it,
reported as ``device_check`` and warned about when its mean latency is more than 10 % off
(the device has drifted since its sweep: errors of that size are not the method's).
Relative error
is ``|predicted - measured| / measured``; the summary gives the mean (MRE) per metric over
all compared windows and over the unsaturated ones (the targets are on those).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from traces.upload import TraceUpload, answer_upload
from traces.characterize import Characterization
from traces.predict.windows import TracePrediction, newest_open_loop, predict_trace
from traces.predict.ceiling import ReplayCeilings
from traces.validate.capacity_probe import PROBES, CapacityProber
from traces.validate.openloop_probe import OpenLoopProber

NOT_PROBED = "the open-loop probe did not run, the errors are the prediction as swept"
COMPARED = ("latency_mean_us", "latency_p99_us", "iops", "bandwidth_mib_s")
# a window's p99 is compared only with this many requests: below it the "p99" is one of the
# window's two slowest requests (on the reference's light-trace floor, the p99 of the same
# replay repeated moved 24 % at 105 requests a window and 14 % at 844)
MIN_P99_REQUESTS = 200


@dataclass
class ValidationReport(TracePrediction):
    """Per-window predictions, measurements and errors, plus a summary."""

    replay: dict[str, Any] | None = None
    plot: str | None = None
    device_check: dict[str, Any] | None = None
    # the replay path's capacity probed before predicting, per mix (traces.validate.capacity_probe)
    capacity_probe: list[dict[str, Any]] | None = None
    # the light open-loop points measured right before the replay, and the prediction as swept
    # against the same replay (traces.validate.openloop_probe); the errors above are re-anchored
    open_loop_probe: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN and infinities become None)."""
        return self._json({"replay": self.replay, "device_check": self.device_check,
                           "capacity_probe": self.capacity_probe, "open_loop_probe": self.open_loop_probe,
                           "plot": self.plot})


def _mre(err: np.ndarray, mask: np.ndarray) -> dict[str, Any]:
    ok = mask & np.isfinite(err)
    return {"mre": float(err[ok].mean()) if ok.any() else None, "n": int(ok.sum())}


def compare(
    prediction: TracePrediction, measured: pd.DataFrame | None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Join predictions and measurements per window; add relative errors and their means."""
    df = prediction.windows.reset_index(drop=True)
    errors: dict[str, Any] = {}
    saturation: dict[str, Any] | None = None
    resized: dict[str, Any] | None = None
    if measured is not None:
        df = df.merge(measured, on="window_start_s", how="left")
        resized = _replayed_bandwidth(df)
        counted = ~df["too_short"].to_numpy(bool)
        limited = np.zeros(len(df), dtype=bool)
        if "replay_limited" in df:
            # fio or the CPU, not the device, missed the schedule there: the latency includes
            # the machine's waits, so it is not compared
            limited = df["replay_limited"].fillna(False).astype(bool).to_numpy() & counted
        keep = counted & ~limited
        unsat = keep & ~df["saturated"].to_numpy(bool)
        if "measured_saturated" in df:
            ms = df["measured_saturated"]
            unsat &= ~ms.fillna(False).astype(bool).to_numpy()
        for m in COMPARED:
            if m not in df.columns:
                continue
            meas = pd.to_numeric(df[m], errors="coerce").to_numpy(np.float64)
            pred = df[f"pred_{m}"].to_numpy(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                err = np.abs(pred - meas) / meas
            mine = keep & (df["requests"].to_numpy() >= MIN_P99_REQUESTS) if m == "latency_p99_us" else keep
            err[~np.isfinite(err) | ~mine] = np.nan
            df[f"{m}_rel_error"] = err
            errors[m] = {**_mre(err, mine), "unsaturated": _mre(err, unsat & mine)}
        if resized is not None:
            # the old comparison, beside: the prediction at the trace's own sizes against what was replayed
            meas = pd.to_numeric(df["bandwidth_mib_s"], errors="coerce").to_numpy(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                err = np.abs(df["pred_bandwidth_trace_mib_s"].to_numpy(np.float64) - meas) / meas
            err[~np.isfinite(err) | ~keep] = np.nan
            errors["bandwidth_mib_s_at_trace_sizes"] = {**_mre(err, keep), "unsaturated": _mre(err, unsat)}
        if "measured_saturated" in df:
            known = df["measured_saturated"].notna().to_numpy() & counted
            meas_sat = df["measured_saturated"][known].astype(bool).to_numpy()
            agree = df["saturated"].to_numpy(bool)[known] == meas_sat
            saturation = {
                "windows": int(known.sum()),
                "agree": float(agree.mean()) if known.any() else None,
                "predicted": int(df["saturated"][known].sum()),
                "measured": int(df["measured_saturated"][known].astype(bool).sum()),
            }
        if "replay_limited" in df:
            saturation = {**(saturation or {}), "replay_limited": int(limited.sum())}
    summary = {
        **prediction.summary,
        "method": prediction.method,
        "measured": measured is not None,
        "errors": errors,
        "saturation": saturation,
    }
    if measured is not None and resized is not None:
        summary["replayed_bytes"] = resized
    return df, summary


def _replayed_bandwidth(df: pd.DataFrame) -> dict[str, Any] | None:
    """Scale the predicted bandwidth to the bytes the replay issued; the trace's own beside it.

    A replay that rounded sizes up (:class:`traces.replay.iolog.Fit`) moved more bytes than
    the trace offered: its bandwidth is compared with the prediction for those bytes, and the
    prediction at the trace's sizes is kept as ``pred_bandwidth_trace_mib_s``.  None when the
    measurements carry no byte counts (the trace's own latency, not a replay).
    """
    if not {"replayed_bytes", "trace_bytes", "pred_bandwidth_mib_s"} <= set(df.columns):
        return None
    replayed = pd.to_numeric(df["replayed_bytes"], errors="coerce").to_numpy(np.float64)
    offered = pd.to_numeric(df["trace_bytes"], errors="coerce").to_numpy(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(offered > 0, replayed / offered, 1.0)
    ratio[~np.isfinite(ratio)] = 1.0
    df["pred_bandwidth_trace_mib_s"] = df["pred_bandwidth_mib_s"]
    df["pred_bandwidth_mib_s"] = df["pred_bandwidth_mib_s"].to_numpy(np.float64) * ratio
    total_r, total_t = float(np.nansum(replayed)), float(np.nansum(offered))
    return {
        "trace": int(total_t),
        "replayed": int(total_r),
        "added_fraction": total_r / total_t - 1 if total_t > 0 else None,
    }


def trace_measurements(char: Characterization) -> pd.DataFrame | None:
    """The trace's own latency per window (and its rate, which its system served), when it has latency."""
    if char.info.latency_source is None:
        return None
    return char.windows[["window_start_s", *COMPARED]].copy()


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
    method: str = "open-loop",
    fio: str | None = None,
    device_check: bool = True,
    resize: str = "round-up",
    capacity_probes: int = PROBES,
    open_loop_probe: bool = True,
) -> ValidationReport:
    """Predict every window of a trace on ``device`` and compare with measurements.

    ``device_check`` (with a ``target``): probe the target at the trace's mix first.
    ``capacity_probes`` (with a ``target`` and ``destroy_data``, open-loop): before predicting,
    measure the replay path's capacity that many times at each mix the trace comes near whose
    capacity ``sweep --for-trace`` measured, and predict with the median
    (:mod:`traces.validate.capacity_probe`); 0 predicts with the sweep's.
    ``open_loop_probe`` (with a ``target`` and ``destroy_data``, open-loop): right before the
    replay, measure the trace's light rates open loop and report the prediction re-anchored on
    them, the one as swept beside it (:mod:`traces.validate.openloop_probe`).
    ``resize``: the replay's rule for sizes the target cannot take (:func:`traces.replay.iolog.remap`).
    """
    registry = registry or ModelRegistry(datadir)  # one cache: the device check reuses the model
    if target is not None and (window_requests is not None or window_s is None):
        raise InvalidInput(
            "validation with a replay target needs time windows (--window), not --window-requests"
        )
    if target is not None:
        from traces.replay.run import check_resize

        check_resize(path, target, fmt=fmt, resize=resize)  # before the probes claim the target
    prober = None
    if target is not None and capacity_probes > 0 and destroy_data and method == "open-loop":
        prober = CapacityProber(target, destroy_data, datadir.catalog, capacity_probes)
    capacity = None if prober is None else _Once(prober)  # probed once, for both predictions
    prediction, char = predict_trace(
        datadir, device, path, fmt=fmt, window_s=window_s, window_requests=window_requests,
        method=method, model_version=model_version, registry=registry, probe=capacity,
    )
    as_swept = None
    replay_info = None
    check = None
    warnings = list(prediction.warnings)
    # reported once, as the report's capacity_probe (printed by the CLI), not again as a warning
    probed = None if prober is None else [p.to_dict() for p in prober.found]
    if target is not None:
        assert window_s is not None  # refused above
        from traces.replay.iolog import DEFAULT_SIZE, prepare_target
        from traces.replay.run import replay

        if device_check:
            # claimed (a file target created or grown) as the replay would, so the probe reads real data
            prepare_target(target, destroy_data, DEFAULT_SIZE, datadir.catalog)
            model = registry.load(device, prediction.model_version)
            check, note = _device_check(datadir, device, model, char, target, destroy_data, fio)
            warnings += [note] if note else []
        if open_loop_probe and method == "open-loop":
            if not destroy_data:
                warnings.append(f"{NOT_PROBED}: it writes to the target before the replay and needs "
                                "--destroy-data")
            else:
                anchors = OpenLoopProber(target, destroy_data, datadir.catalog, fio)
                open_loop = newest_open_loop(datadir.catalog.measurements(device))
                if anchors.measure(open_loop, prediction.windows):
                    as_swept = (prediction, anchors)
                    prediction, _ = predict_trace(
                        datadir, device, path, fmt=fmt, window_s=window_s, method=method,
                        model_version=prediction.model_version, registry=registry, probe=capacity,
                        anchors=anchors, characterised=char,
                    )
                    warnings = [w for w in prediction.warnings if w not in warnings] + warnings
                else:
                    warnings.append(f"{NOT_PROBED}: no light window of the trace is near a stored fio "
                                    "open-loop point (sweep --for-trace measures them)")
        result = replay(
            path, target, fmt=fmt, destroy_data=destroy_data, speed=speed, window_s=window_s, lanes=lanes,
            fio=fio, catalog=datadir.catalog, resize=resize,
        )
        measured = result.windows
        replay_info = {k: v for k, v in result.to_dict().items() if k != "windows"}
        warnings += result.warnings
    else:
        measured = trace_measurements(char)
        if measured is None:
            warnings.append("the trace has no latency and no replay target was given: predictions only")
    df, summary = compare(prediction, measured)
    paired = None
    if as_swept is not None:
        df, paired = _beside(df, as_swept[0], measured, as_swept[1])
    plot = None
    if plot_path is not None and measured is not None:
        from traces.validate.plot import plot_validation

        title = f"{device} on {Path(path).name} ({method})"
        plot = str(plot_validation(df, Path(plot_path), title=title, summary=summary))
    return ValidationReport(
        device, prediction.model_version, method, df, summary, warnings, replay=replay_info, plot=plot,
        device_check=check, capacity_probe=probed, open_loop_probe=paired,
    )


class _Once:
    """A capacity probe that measures on its first call and answers the same after it (the
    as-swept and the re-anchored predictions of one validation share the probed capacity)."""

    def __init__(self, probe: CapacityProber) -> None:
        self.probe = probe
        self.answer: ReplayCeilings | None = None

    def __call__(self, ceilings: ReplayCeilings, open_loop: pd.DataFrame,
                 windows: pd.DataFrame) -> ReplayCeilings:
        if self.answer is None:
            self.answer = self.probe(ceilings, open_loop, windows)
        return self.answer


AS_SWEPT = ("pred_latency_mean_us", "pred_latency_p99_us", "latency_mean_us_rel_error",
            "latency_p99_us_rel_error")


def _beside(df: pd.DataFrame, swept: TracePrediction, measured: pd.DataFrame | None,
            anchors: OpenLoopProber) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The re-anchored table with the as-swept prediction's latency and errors beside it
    (``as_swept_*``, against the same replay), and the probe's report: its points, its cost,
    the as-swept errors."""
    other, summary = compare(swept, measured)
    for c in AS_SWEPT:
        if c in other:
            df[f"as_swept_{c}"] = other[c].to_numpy()
    return df, {**anchors.to_dict(), "headline": "re-anchored",
                "as_swept": {"errors": summary["errors"], "saturation": summary["saturation"]}}


def _device_check(datadir: DataDir, device: str, model: Any, char: Characterization, target: str,
                  destroy_data: bool, fio: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The device check's dict and its warning (or why it was skipped)."""
    from modeling.store.open_loop_rows import swept_mixes
    from traces.validate.device_check import check_device, probe_mix

    stored = datadir.catalog.measurements(device)
    ratios, sizes = swept_mixes(stored)
    if not ratios:
        return None, "device check skipped: the device has no stored closed-loop sweep to take its mix from"
    wr, size = probe_mix(char.windows, ratios, sizes)
    check = check_device(model, target, wr, size, destroy_data=destroy_data, catalog=datadir.catalog, fio=fio,
                         stored=stored)
    return check.to_dict(), check.warning


def validate_upload(
    datadir: DataDir, device: str, upload: TraceUpload, registry: ModelRegistry | None = None
) -> dict[str, Any]:
    """Validate an uploaded trace on ``device``: vectors, predictions and errors."""

    def answer(path: Path) -> dict[str, Any]:
        return validate_trace(
            datadir, device, path, fmt=upload.fmt, window_s=upload.window_s,
            window_requests=upload.window_requests, registry=registry, method=upload.method,
        ).to_dict()

    return answer_upload(datadir, device, upload, answer)
