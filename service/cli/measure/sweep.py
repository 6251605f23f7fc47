"""CLI: ``ssdpredict sweep`` -- measure a device over a plan of workloads with fio."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from service.cli.common import console, datadir, handle_errors, print_json, progress_bar, waiting
from service.cli.measure.sweep_options import (
    BudgetOption,
    CsdPathOption,
    EngineOption,
    ForCapacityOption,
    ForTraceOption,
    InternalTargetOption,
    NvmeofAddressOption,
    NvmeofNqnOption,
    NvmeofNsidOption,
    NvmeofPortOption,
    NvmeofTransportOption,
    OffsetOption,
    OpenLoopOption,
    OpenLoopRequestsOption,
    PointsOption,
    PreconditionOption,
    PreconditionPassesOption,
    QueueDepthsOption,
    RaidChunkOption,
    RaidControllerOption,
    RaidKindOption,
    RaidLevelOption,
    RaidMembersOption,
    RaidVendorOption,
    RampOption,
    RemoteOption,
    RepeatsOption,
    SeedOption,
    SizesOption,
    SteadyStateOption,
    SteadyStateRuleOption,
    SweepRequest,
    TracesArgument,
    WriteRatiosOption,
    sweep_request,
)
from service.cli.options import (
    ClassOption,
    DestroyDataOption,
    DeviceOption,
    JsonOption,
    NumjobsListOption,
    PlanOption,
    RandomnessListOption,
    ReferenceOption,
    RuntimeOption,
    SizeOption,
    TargetOption,
    WaitOption,
    WorkloadMixesOption,
)
from service.cli.progress import open_loop_progress, sweep_progress

if TYPE_CHECKING:
    from modeling.store import Sweep


def register(app: typer.Typer) -> None:
    """Add ``sweep``."""
    app.command("sweep")(sweep)


@handle_errors
def sweep(
    device: DeviceOption,
    target: TargetOption = "",
    plan: PlanOption = None,
    runtime: RuntimeOption = "1s",
    ramp: RampOption = "0ms",
    size: SizeOption = "256MiB",
    offset: OffsetOption = "0",
    destroy_data: DestroyDataOption = False,
    device_class: ClassOption = "ssd",
    csd_path: CsdPathOption = None,
    internal_target: InternalTargetOption = None,
    remote: RemoteOption = None,
    nvmeof_transport: NvmeofTransportOption = None,
    nvmeof_address: NvmeofAddressOption = None,
    nvmeof_port: NvmeofPortOption = 4420,
    nvmeof_nqn: NvmeofNqnOption = None,
    nvmeof_nsid: NvmeofNsidOption = 1,
    raid_level: RaidLevelOption = None,
    raid_members: RaidMembersOption = None,
    raid_chunk: RaidChunkOption = None,
    raid_kind: RaidKindOption = None,
    raid_controller: RaidControllerOption = None,
    raid_vendor: RaidVendorOption = None,
    repeats: RepeatsOption = 1,
    precondition: PreconditionOption = False,
    precondition_passes: PreconditionPassesOption = 2,
    steady_state: SteadyStateOption = False,
    steady_state_rule: SteadyStateRuleOption = "fio",
    engine: EngineOption = "auto",
    seed: SeedOption = None,
    budget: BudgetOption = None,
    reference: ReferenceOption = None,
    points: PointsOption = None,
    write_ratios: WriteRatiosOption = None,
    queue_depths: QueueDepthsOption = None,
    sizes: SizesOption = None,
    randomness: RandomnessListOption = None,
    numjobs: NumjobsListOption = None,
    wait: WaitOption = False,
    open_loop: OpenLoopOption = None,
    open_loop_requests: OpenLoopRequestsOption = 1500,
    for_trace: ForTraceOption = False,
    for_capacity: ForCapacityOption = False,
    workload: WorkloadMixesOption = None,
    traces: TracesArgument = None,
    json_output: JsonOption = False,
) -> None:
    """Measure a device with fio over a plan of workloads; resumes an interrupted sweep."""
    request = sweep_request(locals())  # the options, by name: all checked before any file or lock
    run(request)


def run(request: SweepRequest) -> None:
    """Build the plan, measure it (on one host or many), then the open-loop points; print the result."""
    # Imported here so that `ssdpredict --help` does not pay for scipy.
    from collectors.sweep.run import run_sweep, sweep_plan

    r, settings, data = request, request.settings, datadir()
    if r.for_trace:
        from service.cli.measure.sweep_for_trace import sweep_traces

        sweep_traces(data, r.device, r.traces, settings, budget=r.budget, json_output=r.json_output,
                     wait=r.wait, min_requests=r.open_loop_requests, conflicts=r.for_trace_conflicts)
        return
    if r.for_capacity:
        from service.cli.measure.sweep_for_capacity import sweep_capacity

        sweep_capacity(data, r, settings)
        return
    the_plan = sweep_plan(data, r.device, settings.device_class, kind=r.plan, values=r.values,
                          budget=r.budget, seed=r.seed, points=r.points, reference=r.reference)
    total = len(the_plan) * settings.repeats
    if not r.json_output:
        console.print(f"plan {the_plan.name}: {len(the_plan)} points x {settings.repeats} repeat(s) on "
                      f"{r.where}, runtime {r.runtime}")
    if r.remotes:
        from service.cli.measure.sweep_hosts import sweep_hosts

        sweep_hosts(data, r.device, the_plan, settings, r.remotes, json_output=r.json_output, wait=r.wait,
                    progress=lambda bar, name: sweep_progress(bar, total, prefix=f"{name} "))
        return
    open_id = None
    with progress_bar(quiet=r.json_output) as bar:
        result = run_sweep(data, r.device, the_plan, settings, progress=sweep_progress(bar, total),
                           wait=r.wait, on_wait=waiting)
        if r.open_loop:
            from collectors.sweep.openloop import measure_after_sweep

            open_sweep = measure_after_sweep(
                data, r.device, result, settings, r.open_loop, progress=open_loop_progress(bar),
                min_requests=r.open_loop_requests, wait=r.wait,
            )
            open_id = open_sweep.id
    _present(r.device, the_plan.name, result, r.json_output, open_id)


def _present(
    device: str, plan_name: str, result: Sweep, json_output: bool, open_id: int | None = None
) -> None:
    repeat_cv = result.info.get("repeat_cv") or {}
    if json_output:
        print_json({"device": device, "sweep_id": result.id, "status": result.status,
                    "points": result.n_points, "planned": result.n_planned, "plan": plan_name,
                    "engine": result.info.get("engine"), "target": result.target,
                    "repeat_cv": result.info.get("repeat_cv"),
                    "open_loop_sweep_id": open_id, "warnings": result.info.get("warnings") or []})
        return
    console.print(f"sweep {result.id} of {device}: {result.n_points}/{result.n_planned} points stored "
                  f"({result.status}, engine {result.info.get('engine')})")
    if open_id is not None:
        console.print(f"open-loop points stored as sweep {open_id}")
    for warning in result.info.get("warnings") or []:
        console.print(f"[yellow]note:[/] {warning}", highlight=False)
    for metric, stats in repeat_cv.items():
        console.print(f"  repeat CV {metric}: mean {100 * stats['mean']:.1f} %, "
                      f"median {100 * stats['median']:.1f} %, max {100 * stats['max']:.1f} %")
