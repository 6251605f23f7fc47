"""Computational storage drives: external, internal and concurrent paths.

* external: the host's block device (or a file on it) -- ordinary local fio.
* internal: fio inside the drive's own Linux, driven from the host by ``fio --client``
  against a ``fio --server`` running in the drive (``remote="host:port"``).
* concurrent: both at once.  Each side is stored, plus their sum.

The two sides are launched together behind a barrier; ``fio --client`` has roughly a
second more start-up cost than local fio, so the internal side starts earlier by a lead
that is learned per remote from the measured skew of the previous runs.  Each side's
wall-clock window and its estimated I/O window (process end minus fio's
``job_runtime``) are recorded, and the overlap of the I/O windows is reported so that a
badly aligned run is visible instead of silently under-reporting the sum.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from collectors.fio.runner import parse_remote, run_fio
from modeling.errors import FioOutputError, InvalidInput, SsdPredictError

CSD_PATHS: tuple[str, ...] = ("external", "internal", "concurrent")
PERCENTILE_COLUMNS: tuple[tuple[str, float], ...] = (
    ("latency_p50_us", 50.0),
    ("latency_p90_us", 90.0),
    ("latency_p99_us", 99.0),
    ("latency_p99_9_us", 99.9),
)
_DIRECTION_METRICS = frozenset(
    f"{d}_{m}" for d in ("read", "write")
    for m in ("iops", "bandwidth_mib_s", "latency_mean_us", *(c for c, _ in PERCENTILE_COLUMNS))
)
RunFio = Callable[..., str]
DEFAULT_LEAD_S = 1.0  # fio --client costs ~1.3 s to start a job on loopback, local fio ~0.3 s
_learned_lead: dict[str, float] = {}
_lead_lock = threading.Lock()


@dataclass(frozen=True)
class SideTiming:
    """When one side's fio process ran and when its I/O ran (host clock, epoch seconds)."""

    started: float
    ended: float
    io_started: float
    io_ended: float


@dataclass(frozen=True)
class ConcurrentRun:
    """The raw JSON of both sides of a concurrent run and how well they overlapped."""

    external_json: str
    internal_json: str
    external: SideTiming
    internal: SideTiming

    @property
    def start_skew_s(self) -> float:
        """Internal I/O start minus external I/O start (positive: internal started later)."""
        return self.internal.io_started - self.external.io_started

    @property
    def overlap_s(self) -> float:
        """Seconds during which both sides were doing I/O."""
        lo = max(self.external.io_started, self.internal.io_started)
        hi = min(self.external.io_ended, self.internal.io_ended)
        return max(0.0, hi - lo)

    @property
    def overlap_ratio(self) -> float:
        """Overlap as a fraction of the longer side's I/O time (1.0 = perfectly aligned)."""
        longest = max(
            self.external.io_ended - self.external.io_started,
            self.internal.io_ended - self.internal.io_started,
        )
        return self.overlap_s / longest if longest > 0 else 0.0

    def timing_columns(self) -> dict[str, float]:
        """Alignment facts as row columns."""
        return {
            "concurrent_overlap_s": self.overlap_s,
            "concurrent_overlap_ratio": self.overlap_ratio,
            "concurrent_start_skew_s": self.start_skew_s,
        }

    def to_dict(self) -> dict[str, Any]:
        """Timings (not the JSON) as a plain dict."""
        return {"external": asdict(self.external), "internal": asdict(self.internal),
                **self.timing_columns()}


def _io_window(text: str, started: float, ended: float) -> tuple[float, float]:
    """Estimate the I/O window: it ends when the results come back, and lasts job_runtime."""
    try:
        start = text.find("{")
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
        jobs = doc.get("jobs") or [
            j for j in doc.get("client_stats") or [] if j.get("jobname") != "All clients"
        ]
        runtime_ms = max(float(j.get("job_runtime") or 0) for j in jobs)
    except (ValueError, TypeError, AttributeError) as exc:
        raise FioOutputError(f"cannot read the run time from fio output: {exc}") from None
    # fio's own timestamp is in whole seconds for client runs (and the drive's clock may differ
    # from the host's), so the host's clock at process exit is the common reference.
    io_end = ended
    return max(started, io_end - runtime_ms / 1000.0), io_end


def run_concurrent_timed(
    external_job: str,
    internal_job: str,
    remote: str,
    *,
    timeout: float,
    internal_lead_s: float | None = None,
    runner: RunFio = run_fio,
) -> ConcurrentRun:
    """Run the host-side job locally and the in-drive job through ``fio --client`` at once.

    ``internal_lead_s`` starts the internal side that much earlier; ``None`` learns it per
    remote from the previous runs' measured start skew (first guess :data:`DEFAULT_LEAD_S`).
    """
    host, port = parse_remote(remote)  # fail before starting anything
    key = f"{host}:{port}"
    auto = internal_lead_s is None
    if internal_lead_s is None:
        with _lead_lock:
            internal_lead_s = _learned_lead.get(key, DEFAULT_LEAD_S)
    if not 0.0 <= internal_lead_s <= 60.0:
        raise InvalidInput(f"internal lead must be 0..60 s, got {internal_lead_s}")
    barrier = threading.Barrier(2)
    results: dict[str, tuple[str, float, float]] = {}
    errors: dict[str, BaseException] = {}

    def side(name: str, job: str, side_remote: str | None, delay: float) -> None:
        try:
            barrier.wait(timeout=30)
            if delay:
                time.sleep(delay)
            started = time.time()
            text = runner(job, remote=side_remote, timeout=timeout)
            results[name] = (text, started, time.time())
        except BaseException as exc:  # reported to the caller after both sides finish
            errors[name] = exc

    threads = [
        threading.Thread(target=side, args=("external", external_job, None, internal_lead_s), daemon=True),
        threading.Thread(target=side, args=("internal", internal_job, remote, 0.0), daemon=True),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("external", "internal"):
        if name in errors:
            exc = errors[name]
            if isinstance(exc, SsdPredictError):
                exc.message = f"{name} side: {exc.message}"
                exc.args = (exc.message,)
            raise exc
    timings = {}
    for name, (text, started, ended) in results.items():
        io_start, io_end = _io_window(text, started, ended)
        timings[name] = SideTiming(started, ended, io_start, io_end)
    run = ConcurrentRun(
        external_json=results["external"][0],
        internal_json=results["internal"][0],
        external=timings["external"],
        internal=timings["internal"],
    )
    if auto:
        with _lead_lock:
            # positive skew: the internal side's I/O began late, so start it earlier next time
            _learned_lead[key] = min(10.0, max(0.0, internal_lead_s + run.start_skew_s))
    return run


def run_concurrent(external_job: str, internal_job: str, remote: str, *, timeout: float,
                   internal_lead_s: float | None = None, runner: RunFio = run_fio) -> tuple[str, str]:
    """Run the host-side fio and the in-drive fio (via ``fio --client``) at the same time.

    Returns both JSON outputs; :func:`run_concurrent_timed` also returns the alignment.
    """
    run = run_concurrent_timed(external_job, internal_job, remote, timeout=timeout,
                               internal_lead_s=internal_lead_s, runner=runner)
    return run.external_json, run.internal_json


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
    return number


def _mixed_percentiles(sides: list[dict[str, Any]], prefix: str) -> dict[str, float]:
    """Percentiles of the IOPS-weighted mixture of both sides' latency distributions."""
    curves = []
    for row in sides:
        weight = _num(row, f"{prefix}iops")
        points = {p: _num(row, f"{prefix}{col}") for col, p in PERCENTILE_COLUMNS}
        points = {p: v for p, v in points.items() if np.isfinite(v)}
        if weight > 0 and len(points) >= 2:
            curves.append((weight, points))
    out = {f"{prefix}{col}": float("nan") for col, _ in PERCENTILE_COLUMNS}
    if len(curves) == 1:
        for col, p in PERCENTILE_COLUMNS:
            out[f"{prefix}{col}"] = curves[0][1].get(p, float("nan"))
    if len(curves) < 2:
        return out
    total = sum(w for w, _ in curves)
    grid = np.unique(np.concatenate([np.array(list(c.values())) for _, c in curves]))
    cdf = np.zeros_like(grid)
    for weight, curve in curves:
        ps = np.array(sorted(curve))
        xs = np.array([curve[p] for p in ps])
        # outside the known percentiles the CDF is clamped: a coarse tail, never a wrong order
        cdf += weight / total * np.interp(grid, xs, ps, left=0.0, right=100.0)
    for col, p in PERCENTILE_COLUMNS:
        out[f"{prefix}{col}"] = float(np.interp(p, cdf, grid))
    return out


def _combined(sides: list[dict[str, Any]], prefix: str) -> dict[str, float]:
    iops = [_num(r, f"{prefix}iops") for r in sides]
    bw = [_num(r, f"{prefix}bandwidth_mib_s") for r in sides]
    lat = [_num(r, f"{prefix}latency_mean_us") for r in sides]
    total = float(np.nansum(iops))
    weighted = [(i, m) for i, m in zip(iops, lat, strict=True) if i > 0 and np.isfinite(m)]
    out = {
        f"{prefix}iops": total,
        f"{prefix}bandwidth_mib_s": float(np.nansum(bw)),
        f"{prefix}latency_mean_us": (
            sum(i * m for i, m in weighted) / sum(i for i, _ in weighted) if weighted else float("nan")
        ),
    }
    out.update(_mixed_percentiles(sides, prefix))
    return out


def combine_concurrent(
    external_row: dict[str, Any], internal_row: dict[str, Any], *, run: ConcurrentRun | None = None
) -> dict[str, Any]:
    """One row for a concurrent run: summed IOPS and bandwidth, IOPS-weighted latency.

    The workload columns are the external side's; every column of each side is kept as
    ``external_<name>`` / ``internal_<name>``; with ``run`` the alignment is added.
    """
    for name, side_row in (("external", external_row), ("internal", internal_row)):
        if not np.isfinite(_num(side_row, "iops")):
            raise InvalidInput(f"{name} row has no iops to combine")
    sides = [external_row, internal_row]
    # per-direction metrics are recomputed below; workload fields such as write_ratio or
    # read_size share the prefixes and are kept from the host side.
    row: dict[str, Any] = {k: v for k, v in external_row.items() if k not in _DIRECTION_METRICS}
    for prefix in ("", "read_", "write_"):
        row.update(_combined(sides, prefix))
    reads, writes = _num(row, "read_iops"), _num(row, "write_iops")
    if np.isfinite(reads) and np.isfinite(writes) and reads + writes > 0:
        row["measured_write_ratio"] = writes / (reads + writes)
    for name, side in (("external", external_row), ("internal", internal_row)):
        for key, value in side.items():
            row[f"{name}_{key}"] = value
    row["csd_path"] = "concurrent"
    if run is not None:
        row.update(run.timing_columns())
    return row
