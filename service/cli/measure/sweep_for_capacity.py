"""CLI: ``ssdpredict sweep --for-capacity`` -- a sweep designed for capacity questions (plan, print, run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modeling.workload import format_size
from service.cli.common import console, err_console, print_json, progress_bar, waiting
from service.cli.progress import clock

if TYPE_CHECKING:
    from collectors.sweep.settings import SweepSettings
    from modeling.store import DataDir
    from modeling.workload import Workload
    from service.cli.measure.sweep_options import SweepRequest


def sweep_capacity(data: DataDir, r: SweepRequest, settings: SweepSettings) -> None:
    """Print the plan's size and time, measure it (closed loop, then open loop), say what was stored."""
    from collectors.plans.for_capacity import LADDER, plan_for_capacity
    from collectors.sweep.for_capacity import capacity_settings, sweep_for_capacity
    from service.cli.progress import open_loop_progress, sweep_progress

    settings = capacity_settings(settings)
    assert r.capacity_mixes is not None
    plan = plan_for_capacity(r.capacity_mixes, r.ladder or LADDER)
    seconds = plan.seconds(settings.runtime_ms, settings.ramp_ms, r.open_loop_requests,
                           warmup_ms=settings.open_loop_warmup_ms)
    n_open = len(plan.mixes) * len(plan.fractions)
    err_console.print(
        f"plan for-capacity: {len(plan.closed)} closed-loop points + up to {n_open} open-loop points on "
        f"{settings.target}; at least {clock(seconds)} (a sparse open-loop point runs up to 10 s: the time "
        "is known after the closed-loop points)", highlight=False, soft_wrap=True)
    for note in plan.notes:
        err_console.print(f"  {note}", highlight=False, soft_wrap=True)

    def said(capacities: list[float], open_seconds: float) -> None:
        caps = ", ".join(f"{_mix(w)} {c:,.0f} IO/s" for w, c in zip(plan.mixes, capacities, strict=True))
        err_console.print(f"closed-loop capacities: {caps}; the open-loop points take about "
                          f"{clock(open_seconds)}", highlight=False, soft_wrap=True)

    with progress_bar(quiet=r.json_output) as bar:
        result = sweep_for_capacity(
            data, r.device, plan, settings, progress=sweep_progress(bar, len(plan.closed)),
            open_progress=open_loop_progress(bar), wait=r.wait, on_wait=waiting,
            min_requests=r.open_loop_requests, on_capacities=None if r.json_output else said)
    closed, opened = result.closed, result.open_loop
    if r.json_output:
        print_json({"device": r.device, "plan": "for-capacity", "sweep_id": closed.id,
                    "points": closed.n_points,
                    "open_loop_sweep_id": opened.id, "open_loop_points": opened.n_points,
                    "engine": closed.info.get("engine"), "target": closed.target,
                    "for_capacity": plan.to_dict()})
        return
    console.print(f"sweep {closed.id} of {r.device}: {closed.n_points} closed-loop points (engine "
                  f"{closed.info.get('engine')}); open-loop sweep {opened.id}: {opened.n_points} points")


def _mix(w: Workload) -> str:
    return f"{w.write_ratio:.0%} writes {format_size(w.request_size)}"
