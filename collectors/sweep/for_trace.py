"""Run a sweep designed from traces (:mod:`collectors.plans.for_trace`): closed loop, then open loop.

Both phases store every point as it is measured and resume after a kill: the closed-loop
phase is an ordinary keyed sweep (:func:`collectors.sweep.run.run_sweep`) with the replay's
engine, the open-loop phase a keyed open-loop sweep whose rates come from the capacities
the first phase measured (:func:`collectors.sweep.openloop.measure_after_sweep`).

Both phases issue I/O at the replay's real-time priority (``chrt --fifo 20``, root only),
as the replay does: at normal priority on a busy machine a point's latency includes waits
for a CPU that the replay never meets (zram at a load average of 7, 4 KiB reads at one
psync job: 2.7-3.9 us at normal priority, 1.87 us at real-time, 1.82 us on a quiet
machine).  Except the closed-loop points with more jobs than CPUs: a FIFO job runs until
it blocks and I/O on a CPU-bound device (zram) never blocks, so such jobs run one after
another and fio's summed rates are nonsense (16 jobs of 4 KiB zram reads: 1.0-2.6 M IO/s
at FIFO, 1.2-1.5 M at round-robin, against 0.76-1.0 M that two CPUs serve at normal
priority); those run at normal priority (:func:`closed_loop_runner`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.fio.jobs import JobSettings
from collectors.plans.for_trace import TracePlan, capacity_points, open_loop_points
from collectors.plans.presets import Plan
from collectors.fio.runner import fio_binary, run_fio
from collectors.sweep.openloop import MIN_REQUESTS, measure_after_sweep, realtime_prefix
from collectors.sweep.run import Progress, run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput
from modeling.store import DataDir, Sweep
from modeling.workload import Workload

ENGINE = "psync"  # traces.replay.run: the replay's lanes are synchronous jobs


@dataclass
class TraceSweep:
    """The two stored sweeps of a ``--for-trace`` run."""

    closed: Sweep
    open_loop: Sweep


def trace_settings(settings: SweepSettings) -> SweepSettings:
    """``settings`` with the replay's engine; another engine asked for is an error."""
    return psync_settings(settings, "--for-trace", "the replay's engine")


def psync_settings(settings: SweepSettings, option: str, whose: str) -> SweepSettings:
    """``settings`` with the engine psync, for a targeted sweep (``option``) on a local target;
    another engine asked for, or a remote, NVMe-oF or CSD target, is an error."""
    if settings.engine not in (None, "auto", ENGINE):
        raise InvalidInput(f"{option} measures with {whose} ({ENGINE}), not {settings.engine}: "
                           "leave --engine out")
    if settings.job_remote is not None or settings.nvmeof is not None or settings.device_class == "csd":
        raise InvalidInput(f"{option} measures a local target only (not remote, NVMe-oF, CSD)")
    return settings.model_copy(update={"engine": ENGINE})


def closed_phase(
    datadir: DataDir, device: str, plan: Plan, settings: SweepSettings, *,
    progress: Progress | None, wait: bool, on_wait: Callable[[str], None] | None,
) -> tuple[Sweep, dict[str, Any]]:
    """A targeted sweep's closed-loop phase (:func:`closed_loop_runner`'s priorities), and the
    open-loop phase's sweep info naming that priority."""
    fio_binary(settings.fio)  # fail before creating files when fio is missing
    priority = (f"real-time up to {os.cpu_count() or 1} jobs (the CPUs), normal above" if realtime_prefix()[0]
                else "normal")
    # the priority is part of what was measured: a rerun as root does not resume a sweep
    # measured at normal priority (nor the other way round)
    closed = run_sweep(datadir, device, plan, settings, progress=progress, wait=wait, on_wait=on_wait,
                       runner=closed_loop_runner(settings.fio), key_extra={"priority": priority})
    return closed, {"closed_loop_priority": priority}


def sweep_for_traces(
    datadir: DataDir, device: str, plan: TracePlan, settings: SweepSettings, *,
    progress: Progress | None = None, open_progress: Callable[[int, int], None] | None = None,
    wait: bool = False, on_wait: Callable[[str], None] | None = None, min_requests: int = MIN_REQUESTS,
    replay_capacity: Callable[[Workload, int, JobSettings], tuple[dict[str, Any], str]] | None = None,
) -> TraceSweep:
    """Measure ``plan`` on ``settings.target``: closed-loop points with psync, then open-loop points.

    ``replay_capacity(workload, offered, job)`` measures one capacity point through the replay
    path (:func:`traces.replay.capacity.replay_capacity_point`, which this package cannot
    import): given, the mixes whose traces come near their capacity get one
    (:func:`collectors.plans.for_trace.capacity_points`), stored and resumed with the open-loop
    points.
    """
    settings = trace_settings(settings)
    closed, info = closed_phase(datadir, device, plan.closed, settings, progress=progress, wait=wait,
                                on_wait=on_wait)
    meta: dict[str, Any] = {"for_trace": plan.to_dict(), **info}
    frame = closed_frame(datadir, closed)
    points = open_loop_points(plan, frame)
    extra = capacity_points(plan, frame) if replay_capacity is not None else []
    opened = measure_after_sweep(datadir, device, closed, settings, plan.fractions, progress=open_progress,
                                 min_requests=min_requests, plan=points, info=meta, wait=wait,
                                 capacity_points=extra, measure_capacity=replay_capacity)
    return TraceSweep(closed, opened)


def closed_frame(datadir: DataDir, sweep: Sweep) -> Any:
    """The stored rows of one sweep (its capacities set the open-loop rates)."""
    return datadir.catalog.sweep_points(sweep.id)


_NUMJOBS = re.compile(r"^numjobs=(\d+)$", re.MULTILINE)


def closed_loop_runner(binary: str | None, cpus: int | None = None,
                       prefix: list[str] | None = None) -> Callable[..., str]:
    """fio for the closed-loop phase: at the replay's real-time priority when the job has no more
    jobs than the machine has CPUs (``cpus``, default all), at normal priority above that (see
    the module docstring).  ``prefix`` defaults to :func:`collectors.sweep.openloop.realtime_prefix`."""
    cpus = cpus or os.cpu_count() or 1
    rt = realtime_prefix()[0] if prefix is None else prefix

    def run(job_text: str, **kwargs: Any) -> str:
        jobs = max((int(n) for n in _NUMJOBS.findall(job_text)), default=1)
        return run_fio(job_text, binary=binary, prefix=rt if jobs <= cpus else (), **kwargs)

    return run
