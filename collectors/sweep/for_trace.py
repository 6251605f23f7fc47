"""Run a sweep designed from traces (:mod:`collectors.plans.for_trace`): closed loop, then open loop.

Both phases store every point as it is measured and resume after a kill: the closed-loop
phase is an ordinary keyed sweep (:func:`collectors.sweep.run.run_sweep`) with the replay's
engine, the open-loop phase a keyed open-loop sweep whose rates come from the capacities
the first phase measured (:func:`collectors.sweep.openloop.measure_after_sweep`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.plans.for_trace import TracePlan, open_loop_points
from collectors.sweep.openloop import MIN_REQUESTS, measure_after_sweep
from collectors.sweep.run import Progress, run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput
from modeling.store import DataDir, Sweep

ENGINE = "psync"  # traces.replay.run: the replay's lanes are synchronous jobs


@dataclass
class TraceSweep:
    """The two stored sweeps of a ``--for-trace`` run."""

    closed: Sweep
    open_loop: Sweep


def trace_settings(settings: SweepSettings) -> SweepSettings:
    """``settings`` with the replay's engine; another engine asked for is an error."""
    if settings.engine not in (None, "auto", ENGINE):
        raise InvalidInput(f"--for-trace measures with the replay's engine ({ENGINE}), "
                           f"not {settings.engine}: leave --engine out")
    if settings.job_remote is not None or settings.nvmeof is not None or settings.device_class == "csd":
        raise InvalidInput("--for-trace measures a local target only (not remote, NVMe-oF, CSD)")
    return settings.model_copy(update={"engine": ENGINE})


def sweep_for_traces(
    datadir: DataDir, device: str, plan: TracePlan, settings: SweepSettings, *,
    progress: Progress | None = None, open_progress: Callable[[int, int], None] | None = None,
    wait: bool = False, on_wait: Callable[[str], None] | None = None, min_requests: int = MIN_REQUESTS,
) -> TraceSweep:
    """Measure ``plan`` on ``settings.target``: closed-loop points with psync, then open-loop points."""
    settings = trace_settings(settings)
    meta: dict[str, Any] = {"for_trace": plan.to_dict()}
    closed = run_sweep(datadir, device, plan.closed, settings, progress=progress, wait=wait,
                       on_wait=on_wait)
    points = open_loop_points(plan, closed_frame(datadir, closed))
    opened = measure_after_sweep(datadir, device, closed, settings, plan.fractions, progress=open_progress,
                                 min_requests=min_requests, plan=points, info=meta, wait=wait)
    return TraceSweep(closed, opened)


def closed_frame(datadir: DataDir, sweep: Sweep) -> Any:
    """The stored rows of one sweep (its capacities set the open-loop rates)."""
    return datadir.catalog.sweep_points(sweep.id)
