"""Device check: has the target moved since it was swept?

A validation compares a replay on the target with a model trained on a sweep run minutes
or hours earlier.  On the zram reference, 1 MiB QD1 psync reads went from 135 to 185 us
within two minutes of mixed writes, and measured 240 us against 134 us an hour apart: a
25 % validation error can be the device's drift, not the method's.  So right before a
replay, one short closed-loop fio probe (psync, QD1, one job, direct, random, at the
trace's dominant mix, taken to the nearest swept write ratio and size: :func:`probe_mix`)
is measured and compared with what the model predicts for that same workload.
``measured / predicted - 1`` of its mean latency is the device's level against the model's.
The mix is a swept one so that the difference is the device's, not the model's between its
points: on the zram reference, 8 KiB reads (swept at 4 and 16 KiB) measured 3.3 us against
2.3 us predicted (+42 %) while 4 and 16 KiB were within 1 %.

Drift or model error: a probe that differs from the model can mean the device changed or
the model is wrong at that mix (or was measured with another engine: io_uring's 4 KiB QD1
was 31-49 us on zram against 4-20 us with psync, and the old check called that drift).
So the probe runs, where the device has one, the workload of its nearest stored *psync*
QD1 one-job measurement (same engine, same mix) and is compared with both: probe against
stored is the device's drift, stored against the model is the model's error, and
:attr:`DeviceCheck.verdict` says which (``drift``, ``model``, ``both``, ``none``) or
``unknown`` when nothing of the same engine and mix is stored.

The probe never creates or grows a file: a missing target or a file smaller than the
probe's span is an error (a validation claims the replay's target first).  A probe with
writes is refused where a sweep or a replay would be (a user's file, a block device with
data) unless ``destroy_data``; a read-only probe only reads.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.fio.jobs import JobSettings, effective_workload, global_options, render_job, workload_options
from collectors.fio.results import load_fio_json, parse_fio_document
from collectors.safety import check_target
from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store.catalog import Catalog
from modeling.store.files.scratch import is_scratch_file
from modeling.workload import KIB, MIB, Workload
from traces.predict.openloop import PredictsFrame

RUNTIME_MS = 1000
SPAN = 256 * MIB  # the replay's span (traces.replay.iolog.DEFAULT_SIZE)
DRIFT_WARN = 0.10
METRICS = ("latency_mean_us", "latency_p99_us", "iops")


@dataclass(frozen=True)
class DeviceCheck:
    """One probe's workload, its measured and predicted figures and their differences."""

    target: str
    write_ratio: float
    request_size: int
    queue_depth: int
    numjobs: int
    runtime_ms: int
    measured_mean_us: float
    measured_p99_us: float
    measured_iops: float
    predicted_mean_us: float
    predicted_p99_us: float
    predicted_iops: float
    mean_diff: float  # measured / predicted - 1
    p99_diff: float
    iops_diff: float
    note: str
    # the nearest stored psync QD1 one-job measurement of the probe's workload (NaN: none)
    stored_mean_us: float = float("nan")
    stored_sweep: int | None = None
    drift: float = float("nan")  # measured / stored - 1: the device's
    model_error: float = float("nan")  # stored / predicted - 1: the model's
    verdict: str = "unknown"  # drift | model | both | none | unknown

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v
                for k, v in asdict(self).items()}

    @property
    def warning(self) -> str | None:
        """What the probe says about the device and the model, when either is more than 10 % off."""
        if self.verdict == "none" or not math.isfinite(self.mean_diff):
            return None
        if self.verdict == "unknown":
            if abs(self.mean_diff) <= DRIFT_WARN:
                return None
            return (f"{self.note}; no stored psync measurement of this mix to tell the device's drift "
                    "from the model's error")
        stored = (f"{_us(self.stored_mean_us)} us when swept (sweep {self.stored_sweep}, same engine and "
                  f"mix, {self.drift * 100:+.0f} %)")
        if self.verdict == "drift":
            return (f"{self.note}; {stored}: the device has changed since it was swept; latency errors of "
                    "that size are the device's drift, not the prediction method's")
        if self.verdict == "model":
            return (f"{self.note}; {stored}: the device measures as when it was swept, so the difference is "
                    f"the model's error at this mix ({self.model_error * 100:+.0f} %), not drift")
        return (f"{self.note}; {stored}: the device has drifted and the model is "
                f"{self.model_error * 100:+.0f} % off what was swept")


def stored_reference(stored: pd.DataFrame | None, write_ratio: float,
                     request_size: int) -> tuple[Workload, float, int | None] | None:
    """The nearest stored psync QD1 one-job closed-loop point to a mix: its workload, mean latency, sweep."""
    if stored is None or stored.empty or "engine" not in stored:
        return None
    from modeling.store.open_loop_rows import closed_loop_rows

    rows = closed_loop_rows(stored)
    nj = rows["numjobs"].fillna(1) if "numjobs" in rows else 1
    rows = rows[(rows["engine"] == "psync") & (rows["queue_depth"] == 1) & (nj == 1)
                & (rows["latency_mean_us"] > 0)]
    if rows.empty:
        return None
    dist = (np.abs(rows["write_ratio"].astype(float) - write_ratio)
            + 0.25 * np.abs(np.log2(rows["request_size"].astype(float) / request_size))
            + np.abs(rows["randomness"].astype(float) - 1.0))
    # a mix repeated over sweeps: the newest is the device as last swept
    same = rows[dist == dist.min()]
    best = same.iloc[-1] if "sweep_id" not in same else same.sort_values("sweep_id").iloc[-1]
    fields = {f: best[f] for f in ("write_ratio", "request_size", "randomness", "read_size", "write_size",
                                   "read_randomness", "write_randomness") if f in best and pd.notna(best[f])}
    for f in ("request_size", "read_size", "write_size"):
        if f in fields:
            fields[f] = int(fields[f])
    w = Workload(queue_depth=1, numjobs=1, **fields)
    sweep = int(best["sweep_id"]) if "sweep_id" in best and pd.notna(best["sweep_id"]) else None
    return w, float(best["latency_mean_us"]), sweep


def _verdict(drift: float, model_error: float) -> str:
    if not math.isfinite(drift):
        return "unknown"
    moved, wrong = abs(drift) > DRIFT_WARN, abs(model_error) > DRIFT_WARN
    return "both" if moved and wrong else "drift" if moved else "model" if wrong else "none"


def probe_mix(windows: pd.DataFrame, ratios: Iterable[float], sizes: Iterable[int]) -> tuple[float, int]:
    """``(write ratio, request size)`` of a trace's dominant mix, from its characterisation windows.

    The write ratio is the request-weighted one, taken to the nearest swept ratio; the size
    is the size with the most requests, taken to the nearest swept size (by ratio).
    """
    swept_wr = np.asarray(sorted(ratios), dtype=np.float64)
    swept_bs = np.asarray(sorted(sizes), dtype=np.float64)
    if not len(swept_wr) or not len(swept_bs):
        raise InvalidInput("the device has no swept write ratios and sizes for the device check's mix")
    w = windows[windows["requests"] > 0]
    if w.empty:
        raise InvalidInput("the trace has no requests to choose the device check's mix from")
    n = w["requests"].to_numpy(np.float64)
    ratio = float(np.sum(n * w["write_ratio"].to_numpy(np.float64)) / n.sum())
    by_size = w.groupby("request_size")["requests"].sum()
    size = float(by_size.idxmax())
    return (float(swept_wr[np.argmin(np.abs(swept_wr - ratio))]),
            int(swept_bs[np.argmin(np.abs(np.log2(swept_bs / size)))]))


def _probe_target(target: str, writes: bool, destroy_data: bool, catalog: Catalog | None,
                  span: int) -> tuple[str, int]:
    """(path, span) the probe may use; never creates or grows anything."""
    real = Path(os.path.realpath(target))
    if not real.exists():
        raise InvalidInput(f"device check: target {target} does not exist (the check does not create it)")
    if writes:
        def owned(path: Path, st: os.stat_result) -> bool:
            return catalog is not None and is_scratch_file(catalog, path, st)

        try:
            info = check_target(target, destroy_data, owned=owned)
        except UnsafeTarget as exc:
            raise UnsafeTarget(f"the device check writes (its mix has writes), so {exc.message}",
                               details=exc.details) from None
        kind, size = info.kind, info.size
    else:
        st = real.stat()
        if stat.S_ISREG(st.st_mode):
            kind, size = "file", st.st_size
        elif stat.S_ISBLK(st.st_mode):
            with open(real, "rb") as fh:
                kind, size = "block", fh.seek(0, os.SEEK_END)
        else:
            raise InvalidInput(f"device check: target {target} is neither a regular file nor a block device")
    if kind == "file" and size < span:
        raise InvalidInput(f"device check: target file {target} has {size} bytes, less than the probe's span "
                           f"of {span} bytes (the check does not grow it)")
    return str(real), min(span, size)


def measure_probe(target: str, workload: Workload, *, destroy_data: bool = False,
                  catalog: Catalog | None = None, span: int = SPAN, runtime_ms: int = RUNTIME_MS,
                  fio: str | None = None) -> dict[str, float]:
    """Run ``workload`` closed loop on ``target`` with psync for ``runtime_ms``; its fio result row."""
    from collectors.fio.runner import run_fio

    path, span = _probe_target(target, workload.write_ratio > 0, destroy_data, catalog, span)
    span = span // workload.request_size * workload.request_size
    if span < workload.request_size:
        raise InvalidInput(f"device check: target {target} is smaller than one request")
    settings = JobSettings(target=path, engine="psync", size=span, runtime_ms=runtime_ms)
    job = render_job(global_options(settings), {"devcheck": workload_options(workload)})
    text = run_fio(job, timeout=runtime_ms / 1000 + 60, binary=fio)
    return dict(parse_fio_document(load_fio_json(text, source="device check"), source="device check")[0].row)


def _us(v: float) -> str:
    return f"{v:.0f}" if not math.isfinite(v) or v >= 100 else f"{v:.3g}"


def _describe(wr: float, size: int) -> str:
    unit = f"{size // MIB} MiB" if size % MIB == 0 else f"{size / KIB:g} KiB"
    mix = "reads" if wr == 0 else "writes" if wr == 1 else f"I/Os, {wr * 100:.0f} % writes,"
    return f"QD1 {unit} {mix}"


def check_device(model: PredictsFrame, target: str, write_ratio: float, request_size: int, *,
                 destroy_data: bool = False, catalog: Catalog | None = None, span: int = SPAN,
                 runtime_ms: int | None = None, fio: str | None = None,
                 stored: pd.DataFrame | None = None) -> DeviceCheck:
    """Probe ``target`` at one QD1 random mix and compare with ``model``'s prediction of it.

    With ``stored`` (the device's measurements), the probe runs the nearest stored psync QD1
    point's workload instead and is compared with that point too (see the module docstring).
    ``runtime_ms`` defaults to :data:`RUNTIME_MS` (read at each call).
    """
    runtime_ms = RUNTIME_MS if runtime_ms is None else runtime_ms
    ref = stored_reference(stored, write_ratio, request_size)
    w = effective_workload(ref[0] if ref else Workload(write_ratio=write_ratio, request_size=request_size,
                                                      queue_depth=1, numjobs=1, randomness=1.0))
    row = measure_probe(target, w, destroy_data=destroy_data, catalog=catalog, span=span,
                        runtime_ms=runtime_ms, fio=fio)
    pred = model.predict_frame(pd.DataFrame([w.as_row()]), metrics=list(METRICS)).iloc[0]
    meas = [float(row[m]) for m in METRICS]
    want = [float(pred[f"pred_{m}"]) for m in METRICS]
    diff = [m / p - 1 if p > 0 else float("nan") for m, p in zip(meas, want, strict=True)]
    note = (f"device check: {_describe(w.write_ratio, w.request_size)} measured {_us(meas[0])} us, the model "
            f"says {_us(want[0])} us ({diff[0] * 100:+.0f} %)")
    stored_us = ref[1] if ref else float("nan")
    drift = meas[0] / stored_us - 1 if ref else float("nan")
    model_error = stored_us / want[0] - 1 if ref and want[0] > 0 else float("nan")
    return DeviceCheck(
        target, w.write_ratio, w.request_size, 1, 1, runtime_ms,
        measured_mean_us=meas[0], measured_p99_us=meas[1], measured_iops=meas[2],
        predicted_mean_us=want[0], predicted_p99_us=want[1], predicted_iops=want[2],
        mean_diff=diff[0], p99_diff=diff[1], iops_diff=diff[2], note=note,
        stored_mean_us=stored_us, stored_sweep=ref[2] if ref else None, drift=drift,
        model_error=model_error, verdict=_verdict(drift, model_error),
    )
