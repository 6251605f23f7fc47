"""CLI: ``ssdpredict sweep --for-trace TRACE...`` -- a sweep designed from traces (thin: plan, print, run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modeling.errors import InvalidInput
from service.cli.common import console, err_console, print_json, progress_bar, waiting
from service.cli.progress import clock

if TYPE_CHECKING:
    from collectors.sweep.settings import SweepSettings
    from modeling.store import DataDir


def sweep_traces(data: DataDir, device: str, traces: list[str], settings: SweepSettings, *,
                 budget: int | None, json_output: bool, wait: bool, min_requests: int,
                 conflicts: dict[str, Any]) -> None:
    """Characterise ``traces``, print the plan's size and time, measure it, say what was stored."""
    from collectors.devices.reference import logical_block_size
    from collectors.plans.for_trace import DEFAULT_BUDGET, plan_for_traces
    from collectors.sweep.for_trace import sweep_for_traces, trace_settings
    from traces.characterize import characterize

    given = [name for name, value in conflicts.items() if value]
    if given:
        raise InvalidInput(f"--for-trace designs the plan itself: leave out {', '.join(given)}")
    if not traces:
        raise InvalidInput("--for-trace needs trace files: sweep ... --for-trace t1.csv [t2.csv ...]")
    settings = trace_settings(settings)
    chars = [characterize(path) for path in traces]
    block = logical_block_size(settings.target)
    plan = plan_for_traces(chars, budget=budget or DEFAULT_BUDGET, block_size=block)
    seconds = plan.seconds(settings.runtime_ms, settings.ramp_ms, min_requests,
                           warmup_ms=settings.open_loop_warmup_ms)
    err_console.print(
        f"plan for-trace: {len(plan.closed)} closed-loop points ({len(plan.mixes)} mixes x "
        f"{len(plan.ladder)} loads, psync) + about {plan.n_open_loop} open-loop points on "
        f"{settings.target}; about {clock(seconds)}", highlight=False, soft_wrap=True)
    for note in plan.notes:
        err_console.print(f"  {note}", highlight=False, soft_wrap=True)
    from service.cli.progress import open_loop_progress, sweep_progress

    from functools import partial

    from traces.replay.capacity import replay_capacity_point

    with progress_bar(quiet=json_output) as bar:
        result = sweep_for_traces(
            data, device, plan, settings, progress=sweep_progress(bar, len(plan.closed)),
            open_progress=open_loop_progress(bar), wait=wait, on_wait=waiting, min_requests=min_requests,
            replay_capacity=partial(replay_capacity_point, catalog=data.catalog))
    closed, opened = result.closed, result.open_loop
    if json_output:
        print_json({"device": device, "plan": "for-trace", "sweep_id": closed.id, "points": closed.n_points,
                    "open_loop_sweep_id": opened.id, "open_loop_points": opened.n_points,
                    "engine": closed.info.get("engine"), "target": closed.target,
                    "for_trace": plan.to_dict()})
        return
    console.print(f"sweep {closed.id} of {device}: {closed.n_points} closed-loop points (engine "
                  f"{closed.info.get('engine')}); open-loop sweep {opened.id}: {opened.n_points} points")
