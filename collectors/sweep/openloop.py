"""Open-loop sweep points: Poisson arrivals at fractions of the capacity measured closed loop.

A closed-loop sweep keeps ``iodepth x numjobs`` requests in flight; it cannot show what
sparse arrivals meet (a cold I/O path: on a loop device over tmpfs, 71 us at 400 IO/s
Poisson against 37 us at QD1).  After a device's closed-loop sweep, this runs, per
measured workload mix (write ratio, sizes, randomness), fio with ``rate_process=poisson``
for each fraction of that mix's measured capacity (the most IO/s any of its closed-loop
points reached), plus the light rates of :data:`LIGHT_RATES` where they are well below the
smallest fraction, and stores the points as one sweep (source ``open-loop``) with the offered
rate in the ``offered_iops`` column.

The arrivals come from :data:`LANES` synchronous (``psync``) jobs, each at ``rate / LANES``
(fio's ``rate_iops`` is per job; the superposition of Poisson streams is Poisson).  Not one
asynchronous job at a high iodepth: between rate-limited submissions fio sleeps without
reaping completions, so an asynchronous job's latency includes those sleeps (measured on
zram: 52 us at 2,000 IO/s and 197 us at 20,000 IO/s for I/O that takes 5-10 us).  A
synchronous job measures each I/O exactly, and it is how ``trace replay`` issues a trace,
so the points and the replays that validate predictions measure the same thing.

Closed-loop rows have no ``offered_iops`` (NaN), and training leaves open-loop rows out:
their IOPS is the offered rate, not the device's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from collectors.fio.jobs import JobSettings, effective_workload, global_options, render_job, workload_options
from collectors.fio.results import load_fio_json, parse_fio_document
from collectors.sweep.steady import LOG_NAME, WARMUP_MS, read_logs, steady_metrics
from modeling.errors import InvalidInput, NoData
from modeling.store import DataDir
from modeling.store.records import Sweep
from modeling.store.files.scratch import is_scratch_file
from modeling.store.files.workdirs import owned_workdir, remove_stale_workdirs
from modeling.store.open_loop_rows import OFFERED, closed_loop_rows
from modeling.workload import Workload

if TYPE_CHECKING:
    from collectors.sweep.settings import SweepSettings

FRACTIONS = (0.1, 0.3, 0.6, 0.9)
# the replay's real-time priority (traces.replay.run.RT_PRIORITY): sparse Poisson points sleep
# between requests, and on a busy machine a woken lane waits for a CPU inside its measured
# latency.  On zram at a load average of 25, 400 IO/s points measured 20-96 us mean at normal
# priority while the replay of the same trace (real-time) measured 17-22 us.
RT_PRIORITY = "20"
LIGHT_RATES = (200, 2000)
# the replay's lanes (traces.replay.run): 16, or a trace's most requests in flight, at most 64;
# open-loop points issue from as many psync jobs
LANES = 16
MAX_LANES = 64
# a point's mean and p99 need this many requests: at 200 IO/s a 2 s run has 400, and its
# p99 is its fourth-slowest request (zram here: 43 us, then 15 us in the next sweep).
# Sparse points run longer, up to MAX_POINT_MS.
MIN_REQUESTS = 1500
MAX_POINT_MS = 10_000
WORKDIR_PREFIX = "ssdpredict-openloop-"
# one point's measurement: (workload, offered IO/s) -> (stored row, raw output)
MeasurePoint = Callable[[Workload, int], tuple[dict[str, Any], str]]
MIX_FIELDS = (
    "write_ratio",
    "request_size",
    "randomness",
    "read_size",
    "write_size",
    "read_randomness",
    "write_randomness",
)


def open_loop_plan(
    frame: pd.DataFrame, fractions: Sequence[float] = FRACTIONS, max_mixes: int | None = None
) -> list[tuple[Workload, int]]:
    """``(workload of LANES psync jobs, offered IO/s)`` per measured mix and fraction of its capacity."""
    if not fractions or not all(0 < f < 1.5 for f in fractions):
        raise InvalidInput("open-loop fractions must be between 0 and 1.5 of the capacity")
    closed = closed_loop_rows(frame)
    if closed.empty or "iops" not in closed:
        raise NoData("the device has no closed-loop measurements to take capacities from")
    filled = closed.copy()
    defaults = (("read_size", "request_size"), ("write_size", "request_size"),
                ("read_randomness", "randomness"), ("write_randomness", "randomness"))
    for f, src in defaults:
        filled[f] = filled[f].fillna(filled[src]) if f in filled else filled[src]
    capacity = filled.groupby(list(MIX_FIELDS))["iops"].max().reset_index()
    if max_mixes is not None and len(capacity) > max_mixes:
        # spread over the mixes, in a stable order
        capacity = capacity.iloc[np.linspace(0, len(capacity) - 1, max_mixes).round().astype(int)]
    plan = []
    for _, mix in capacity.iterrows():
        fields = {f: mix[f] for f in MIX_FIELDS}
        for k in ("request_size", "read_size", "write_size"):
            fields[k] = int(fields[k])
        w = Workload(queue_depth=1, numjobs=LANES, **fields)
        rates = [max(int(round(frac * float(mix["iops"]))), LANES) for frac in fractions]
        # a fast device's 10 % is still tens of thousands of IO/s: sparse arrivals, where the
        # cold I/O path shows, need their own points
        light = [r for r in LIGHT_RATES if r < 0.5 * min(rates)]
        plan += [(w, rate) for rate in light + rates]
    return plan


def replay_lanes(in_flight: float | None) -> int:
    """The lanes a trace replays on: :data:`LANES`, or its most requests in flight (``in_flight``,
    None when the trace has no latencies to tell), at most :data:`MAX_LANES`."""
    if in_flight is None:
        return LANES
    return int(min(max(LANES, int(np.ceil(in_flight))), MAX_LANES))


def point_runtime_ms(rate_iops: float, runtime_ms: int, min_requests: int = MIN_REQUESTS) -> int:
    """A point's runtime: the sweep's, or long enough for ``min_requests`` at ``rate_iops`` (capped)."""
    needed = int(np.ceil(1000.0 * min_requests / max(rate_iops, 1.0)))
    return max(runtime_ms, min(needed, MAX_POINT_MS))


def lane_rates(workload: Workload, rate_iops: float) -> list[tuple[tuple[int, int], int]]:
    """``((read IO/s, write IO/s), lanes)`` groups that offer ``rate_iops`` in all at the workload's
    write ratio from its ``numjobs`` lanes.

    fio limits each direction to ``rate_iops`` separately: one number on a mixed workload
    offers it to reads *and* to writes (measured: ``rate_iops=100`` with 40 % writes served
    93 reads and 111 writes a second), so a mixed point gets one number per direction.  fio's
    rates are whole IO/s per job, so the lanes differ by at most 1 IO/s a direction: the same
    whole rate on all 16 lanes offered multiples of 16 IO/s, 8 % of a 200 IO/s token bucket,
    where 0.85 and 0.9 of it offered the same 176 IO/s.  A direction under one IO/s a lane
    gives each lane 1 (a lane at 0 IO/s would run unlimited).
    """
    lanes = workload.numjobs
    wr = workload.write_ratio
    totals = [int(round(rate_iops * (1 - wr))) if wr < 1 else 0, int(round(rate_iops * wr)) if wr > 0 else 0]
    totals = [max(t, lanes) if share > 0 else 0 for t, share in zip(totals, (1 - wr, wr), strict=True)]
    groups: dict[tuple[int, int], int] = {}
    for lane in range(lanes):
        reads, writes = (t // lanes + (lane < t % lanes) for t in totals)
        key = (reads, writes)
        groups[key] = groups.get(key, 0) + 1
    return sorted(groups.items())


def offered_rate(workload: Workload, rate_iops: float) -> float:
    """The IO/s a point at ``rate_iops`` really offers, after giving each lane whole rates."""
    return float(sum((reads + writes) * n for (reads, writes), n in lane_rates(workload, rate_iops)))


def build_open_loop_job(workload: Workload, rate_iops: int, settings: JobSettings,
                        log_dir: Path | None = None) -> str:
    """The job file of one open-loop point: Poisson arrivals at ``rate_iops`` in all, from psync jobs
    (one section per group of lanes at the same rates, :func:`lane_rates`; one reporting group).

    ``log_dir``: each job writes its per-I/O latency log there (:mod:`collectors.sweep.steady`).
    """
    sections = {}
    for k, ((reads, writes), n) in enumerate(lane_rates(workload, rate_iops)):
        rate = f"{reads},{writes}" if reads and writes else str(reads or writes)
        options = {**workload_options(workload), "numjobs": str(n), "rate_iops": rate,
                   "rate_process": "poisson"}
        if log_dir is not None:
            options.update({"write_lat_log": str(log_dir / LOG_NAME), "log_offset": "1"})
        sections["openloop" if k == 0 else f"openloop{k}"] = options
    return render_job(global_options(replace(settings, engine="psync")), sections)


def open_loop_key(device: str, plan: Sequence[tuple[Workload, int]], settings: JobSettings,
                  min_requests: int, capacity_points: Sequence[tuple[Workload, int]] = (),
                  warmup_ms: int = WARMUP_MS) -> str:
    """The identity of an open-loop phase: device, points, target, span, timing, request floor.

    Rerunning the same phase (after Ctrl-C, ``kill -9`` or a crash) finds its stored points
    by this key and measures only the missing ones.
    """
    ident = {"device": device, "kind": "open-loop", "min_requests": min_requests,
             "priority": "realtime" if realtime_prefix()[0] else "normal",
             "points": [[w.as_row(), int(rate)] for w, rate in plan],
             **({"capacity": [[w.as_row(), int(r)] for w, r in capacity_points]} if capacity_points else {}),
             "settings": {"target": settings.target, "size": settings.size, "offset": settings.offset,
                          "runtime_ms": settings.runtime_ms, "ramp_ms": settings.ramp_ms,
                          "warmup_ms": warmup_ms}}
    return "ol-" + hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:24]


def open_loop_seconds(plan: Sequence[tuple[Workload, int]], runtime_ms: int, ramp_ms: int = 0,
                      min_requests: int = MIN_REQUESTS, overhead_s: float = 1.0,
                      warmup_ms: int = WARMUP_MS) -> float:
    """About how long measuring ``plan`` takes: each point's warm-up, runtime and ramp plus fio's
    start-up (``overhead_s``: 16 psync jobs of 500 ms took 1.5 s a point here)."""
    return sum((point_runtime_ms(rate, runtime_ms, min_requests) + ramp_ms + warmup_ms) / 1000.0 + overhead_s
               for _, rate in plan)


def realtime_prefix() -> tuple[list[str], str | None]:
    """``chrt --fifo 20`` where the process may use it (root), else nothing and why."""
    chrt = shutil.which("chrt")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and chrt:
        return [chrt, "--fifo", RT_PRIORITY], None
    return [], "open-loop points ran at normal priority (real-time needs root and chrt): light-load " \
               "latency may include waits for a CPU on a busy machine"


def measure_open_point(workload: Workload, rate: int, settings: JobSettings, runner: Callable[..., str],
                       min_requests: int = MIN_REQUESTS,
                       warmup_ms: int = WARMUP_MS) -> tuple[dict[str, Any], str]:
    """Measure one open-loop point: its stored row (engine psync, offered rate) and fio's JSON.

    The point runs ``warmup_ms`` longer and its metrics are those of the requests issued after
    that warm-up (:mod:`collectors.sweep.steady`); ``warmup_ms=0`` keeps fio's own figures.
    """
    measured_ms = point_runtime_ms(rate, settings.runtime_ms, min_requests)
    point = replace(settings, runtime_ms=measured_ms + warmup_ms)
    timeout = (point.runtime_ms + point.ramp_ms) / 1000.0 + 120.0
    workdirs = Path(tempfile.gettempdir())
    remove_stale_workdirs(workdirs, WORKDIR_PREFIX)  # left by points killed before their cleanup
    with owned_workdir(workdirs, WORKDIR_PREFIX) as tmp:
        text = runner(build_open_loop_job(workload, rate, point, tmp if warmup_ms else None), timeout=timeout)
        doc = load_fio_json(text, source="open-loop point")
        row = dict(parse_fio_document(doc, source="open-loop point")[0].row)
        if warmup_ms:
            row.update(steady_metrics(read_logs(tmp), warmup_ms, measured_ms))
    row.update(effective_workload(workload).as_row())
    asked = offered_rate(workload, rate)
    row["requested_iops"] = asked
    # fio's Poisson lanes offer 1-4 % more than asked (zram under a 2,000 IO/s throttle:
    # 1,024 -> 1,057, 1,648 -> 1,721, 1,952 -> 2,006-2,016 IO/s, the last over the cap and
    # waiting 1.4-1.6 ms on average): the rate a point's latency belongs to is what it was
    # served in its steady part, where that is more than asked
    row[OFFERED] = max(asked, float(row["iops"])) if warmup_ms else asked
    row["engine"] = "psync"
    return row, text


def measure_open_loop(
    datadir: DataDir,
    device: str,
    settings: JobSettings,
    *,
    fractions: Sequence[float] = FRACTIONS,
    max_mixes: int | None = None,
    runner: Callable[..., str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    min_requests: int = MIN_REQUESTS,
    plan: Sequence[tuple[Workload, int]] | None = None,
    info: dict[str, Any] | None = None,
    wait: bool = False,
    capacity_points: Sequence[tuple[Workload, int]] = (),
    measure_capacity: MeasurePoint | None = None,
    warmup_ms: int = WARMUP_MS,
) -> Sweep:
    """Run the open-loop points of ``device`` (see the module docstring) and store each as it is measured.

    ``plan`` (default: :func:`open_loop_plan` over ``fractions`` of the stored capacities)
    lists ``(workload, offered IO/s)``.  Every point is stored in its own transaction in one
    sweep (source ``open-loop``) keyed by :func:`open_loop_key`: a rerun after a kill measures
    only the points not yet stored, and a finished phase is returned without measuring.
    Each fio point runs ``warmup_ms`` before the requests it measures (:func:`measure_open_point`).
    ``progress(done, total)`` is called once before the first point and after each.  A sparse
    point runs long enough for ``min_requests`` requests (:func:`point_runtime_ms`).

    ``capacity_points`` (``(workload, offered IO/s)``, measured by ``measure_capacity`` after
    the plan's points and stored in the same sweep) are points offered beyond what the path
    they are measured through serves: ``sweep --for-trace`` measures the replay path's own
    capacity so (:mod:`traces.replay.capacity`), and it resumes like any other point.
    """
    if capacity_points and measure_capacity is None:
        raise InvalidInput("capacity points need a way to measure them")
    prefix, why = realtime_prefix()
    if runner is None:
        from collectors.fio.runner import run_fio

        runner = partial(run_fio, prefix=prefix)
    catalog = datadir.catalog
    with datadir.device_lock(device, "sweep", wait=wait, detail="open-loop points"):
        if plan is None:
            plan = open_loop_plan(catalog.measurements(device), fractions, max_mixes)
        plan = list(plan)
        extra = list(capacity_points)
        key = open_loop_key(device, plan, settings, min_requests, extra, warmup_ms)
        sweep = catalog.find_complete_sweep(device, key) or catalog.find_resumable_sweep(device, key)
        if sweep is None:
            meta = {"kind": "open-loop", "fractions": list(fractions), "jobs": LANES, "engine": "psync",
                    "min_requests": min_requests, "priority": "normal" if why else "realtime",
                    "warnings": [why] if why else [], **(info or {})}
            sweep = catalog.create_sweep(
                device, source="open-loop", plan={"open_loop": [[w.as_row(), int(r)] for w, r in plan],
                                                  "capacity": [[w.as_row(), int(r)] for w, r in extra]},
                plan_key=key, target=settings.target, n_planned=len(plan) + len(extra), info=meta)
        completed = catalog.completed_points(sweep.id)
        total = len(plan) + len(extra)
        if progress:
            progress(len(completed), total)
        if sweep.status == "complete":
            return sweep
        fio_point: MeasurePoint = partial(measure_open_point, settings=settings, runner=runner,
                                          min_requests=min_requests, warmup_ms=warmup_ms)
        steps = [(w, r, fio_point) for w, r in plan] + [(w, r, measure_capacity) for w, r in extra]
        for seq, (workload, rate, measure) in enumerate(steps):
            if (seq, 0) in completed:
                continue
            assert measure is not None
            row, text = measure(workload, rate)
            catalog.add_point(sweep.id, seq, row, raw=text)
            completed.add((seq, 0))
            if progress:
                progress(len(completed), total)
        return catalog.finish_sweep(sweep.id)


def measure_after_sweep(
    datadir: DataDir,
    device: str,
    sweep: Sweep,
    settings: SweepSettings,
    fractions: Sequence[float],
    progress: Callable[[int, int], None] | None = None,
    min_requests: int = MIN_REQUESTS,
    *,
    plan: Sequence[tuple[Workload, int]] | None = None,
    info: dict[str, Any] | None = None,
    wait: bool = False,
    capacity_points: Sequence[tuple[Workload, int]] = (),
    measure_capacity: Callable[[Workload, int, JobSettings], tuple[dict[str, Any], str]] | None = None,
) -> Sweep:
    """The open-loop points of a finished closed-loop sweep, on its target with its span and timing.

    ``plan``, ``capacity_points`` as in :func:`measure_open_loop` (default plan: ``fractions`` of
    each mix's capacity); ``measure_capacity`` also gets the points' job settings (target, span).
    """
    if settings.job_remote is not None or settings.nvmeof is not None or settings.device_class == "csd":
        raise InvalidInput("open-loop points are measured on a local target only (not remote, NVMe-oF, CSD)")
    from collectors.fio.runner import run_fio
    from collectors.safety import check_target

    target = sweep.target or settings.target
    # the closed-loop sweep just wrote this target: its own scratch file is no user's data
    checked = check_target(target, settings.destroy_data,
                           owned=lambda path, st: is_scratch_file(datadir.catalog, path, st))
    size = settings.size_bytes
    if checked.kind != "file":
        size = min(size, checked.size - settings.offset_bytes)
    job = JobSettings(
        target=checked.path, engine="psync", size=size, offset=settings.offset_bytes,
        runtime_ms=settings.runtime_ms, ramp_ms=settings.ramp_ms,
    )
    runner = partial(run_fio, binary=settings.fio, prefix=realtime_prefix()[0])
    capacity = None if measure_capacity is None else partial(_with_job, measure_capacity, job)
    return measure_open_loop(datadir, device, job, fractions=fractions, runner=runner, progress=progress,
                             min_requests=min_requests, plan=plan, info=info, wait=wait,
                             capacity_points=capacity_points, measure_capacity=capacity,
                             warmup_ms=settings.open_loop_warmup_ms)


def _with_job(measure: Callable[[Workload, int, JobSettings], tuple[dict[str, Any], str]], job: JobSettings,
              workload: Workload, rate: int) -> tuple[dict[str, Any], str]:
    return measure(workload, rate, job)
