"""Run a sweep designed for capacity questions (:mod:`collectors.plans.for_capacity`): closed, then open loop.

Both phases store every point as it is measured and resume after a kill: the closed-loop
phase is an ordinary keyed sweep (:func:`collectors.sweep.run.run_sweep`) with the open-loop
points' engine (psync), the open-loop phase a keyed open-loop sweep whose rates are fractions
of the capacities the first phase measured (:func:`collectors.sweep.openloop.measure_after_sweep`).
Priorities as ``sweep --for-trace`` (:func:`collectors.sweep.for_trace.closed_loop_runner`):
real-time where the process may, except closed-loop points with more jobs than CPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.plans.for_capacity import CapacityPlan, mix_capacities, open_loop_points
from collectors.sweep.for_trace import closed_frame, closed_phase, psync_settings
from collectors.sweep.openloop import MIN_REQUESTS, measure_after_sweep
from collectors.sweep.run import Progress
from collectors.sweep.settings import SweepSettings
from modeling.store import DataDir, Sweep


@dataclass
class CapacitySweep:
    """The two stored sweeps of a ``--for-capacity`` run, and how many open-loop points it planned."""

    closed: Sweep
    open_loop: Sweep
    open_loop_points: int


def capacity_settings(settings: SweepSettings) -> SweepSettings:
    """``settings`` with the open-loop points' engine; another engine asked for is an error."""
    return psync_settings(settings, "--for-capacity", "the open-loop points' engine")


def sweep_for_capacity(
    datadir: DataDir, device: str, plan: CapacityPlan, settings: SweepSettings, *,
    progress: Progress | None = None, open_progress: Callable[[int, int], None] | None = None,
    wait: bool = False, on_wait: Callable[[str], None] | None = None, min_requests: int = MIN_REQUESTS,
    on_capacities: Callable[[list[float], float], None] | None = None,
) -> CapacitySweep:
    """Measure ``plan`` on ``settings.target``: closed-loop points with psync, then open-loop points.

    ``on_capacities(capacities, seconds)`` is told each mix's measured capacity and how long the
    open-loop phase will take about, between the phases.
    """
    settings = capacity_settings(settings)
    closed, info = closed_phase(datadir, device, plan.closed, settings, progress=progress, wait=wait,
                                on_wait=on_wait)
    meta: dict[str, Any] = {"for_capacity": plan.to_dict(), **info}
    frame = closed_frame(datadir, closed)
    points = open_loop_points(plan, frame)
    if on_capacities is not None:
        caps = mix_capacities(plan, frame)
        on_capacities(caps, plan.open_loop_seconds(caps, settings.runtime_ms, settings.ramp_ms, min_requests,
                                                   warmup_ms=settings.open_loop_warmup_ms))
    opened = measure_after_sweep(datadir, device, closed, settings, plan.fractions, progress=open_progress,
                                 min_requests=min_requests, plan=points, info=meta, wait=wait)
    return CapacitySweep(closed, opened, len(points))
