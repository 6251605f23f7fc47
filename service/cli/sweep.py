"""CLI: ``ssdpredict sweep`` -- measure a device over a plan of workloads with fio."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modeling.errors import InvalidInput
from modeling.workload import Workload, format_size, parse_size
from service.cli.common import (
    DeviceOption,
    JsonOption,
    WaitOption,
    console,
    datadir,
    err_console,
    handle_errors,
    print_json,
    progress_bar,
    waiting,
)
from service.config import get_settings

if TYPE_CHECKING:
    from rich.progress import Progress

    from modeling.store import Sweep


def register(app: typer.Typer) -> None:
    """Add ``sweep``."""
    app.command("sweep")(sweep)


def _list(text: str | None, parse: Callable[[str], Any], what: str) -> list[Any] | None:
    if not text:
        return None
    try:
        return [parse(item.strip()) for item in text.split(",") if item.strip()]
    except ValueError as exc:
        raise InvalidInput(f"invalid --{what} {text!r}: {exc}") from exc


def _value_lists(**texts: str | None) -> dict[str, list[Any]]:
    """The ``--write-ratios 0,0.5,1``-style options as value lists (only those given)."""
    parsers: dict[str, Callable[[str], Any]] = {
        "write_ratios": float, "queue_depths": int, "sizes": parse_size, "randomness": float, "numjobs": int,
    }
    lists = {name: _list(text, parsers[name], name.replace("_", "-")) for name, text in texts.items()}
    return {name: values for name, values in lists.items() if values}


@handle_errors
def sweep(
    device: DeviceOption,
    target: Annotated[str, typer.Option("--target", "-t", help="file or block device to measure")] = "",
    plan: Annotated[str | None, typer.Option(
        help="quick|pts|nvmeof|grid|lhs|random|adaptive or a plan FILE.toml "
        "(default quick; nvmeof for --class nvmeof)")] = None,
    runtime: Annotated[str, typer.Option(help="fio runtime per point, e.g. 500ms, 1s")] = "1s",
    ramp: Annotated[str, typer.Option(help="fio ramp time per point")] = "0ms",
    size: Annotated[str, typer.Option(help="span of the target to use (a file is created at this size)")
                    ] = "256MiB",
    offset: Annotated[str, typer.Option(help="start of the span")] = "0",
    destroy_data: Annotated[bool, typer.Option("--destroy-data",
                                               help="allow writing over a block device's data")] = False,
    device_class: Annotated[str, typer.Option("--class", help="ssd|raid|csd|nvmeof|pmem")] = "ssd",
    csd_path: Annotated[str | None, typer.Option(help="external|internal|concurrent (class csd)")] = None,
    internal_target: Annotated[str | None, typer.Option(
        help="path inside the CSD for internal/concurrent")] = None,
    remote: Annotated[str | None, typer.Option(
        help="HOST:PORT of a fio --server to run the jobs on; several (h1:8765,h2:8765) sweep every host "
        "at once, each stored as device NAME@HOST")] = None,
    nvmeof_transport: Annotated[str | None, typer.Option(
        help="tcp or rdma: attach with nvme connect")] = None,
    nvmeof_address: Annotated[str | None, typer.Option(help="NVMe-oF target address")] = None,
    nvmeof_port: Annotated[int, typer.Option(help="NVMe-oF target port")] = 4420,
    nvmeof_nqn: Annotated[str | None, typer.Option(help="NVMe-oF subsystem NQN")] = None,
    nvmeof_nsid: Annotated[int, typer.Option(help="NVMe-oF namespace id")] = 1,
    raid_level: Annotated[str | None, typer.Option(help="RAID level (hardware/GPU/software RAID)")] = None,
    raid_members: Annotated[str | None, typer.Option(help="member devices or count")] = None,
    raid_chunk: Annotated[str | None, typer.Option(help="RAID chunk size, e.g. 512k")] = None,
    raid_kind: Annotated[str | None, typer.Option(
        help="hardware|gpu|software (md arrays are read from sysfs)")] = None,
    raid_controller: Annotated[str | None, typer.Option(help="RAID controller, e.g. 'GRAID SR-1010'")] = None,
    raid_vendor: Annotated[str | None, typer.Option(help="RAID vendor")] = None,
    repeats: Annotated[int, typer.Option(help="measure each point N times")] = 1,
    precondition: Annotated[bool, typer.Option("--precondition",
                                               help="fill the span sequentially first")] = False,
    precondition_passes: Annotated[int, typer.Option(help="sequential fills for --precondition")] = 2,
    steady_state: Annotated[bool, typer.Option("--steady-state",
                                               help="measure each point at steady state")] = False,
    steady_state_rule: Annotated[str, typer.Option(
        help="fio (fio's steadystate) or pts (5-round window)")] = "fio",
    engine: Annotated[str, typer.Option(help="auto|io_uring|libaio|psync|spdk")] = "auto",
    seed: Annotated[int | None, typer.Option(help="seed of the point order (and sampled plans)")] = None,
    budget: Annotated[int | None, typer.Option(help="points for --plan adaptive/lhs/random")] = None,
    reference: Annotated[str | None, typer.Option(
        help="with --plan adaptive: pick the points that best calibrate a transfer from this device's "
        "model (then `train --reference`)")] = None,
    points: Annotated[int | None, typer.Option(help="measure only the first N points of the plan")] = None,
    write_ratios: Annotated[str | None, typer.Option(help="value list, e.g. 0,0.5,1")] = None,
    queue_depths: Annotated[str | None, typer.Option(help="value list, e.g. 1,8,32")] = None,
    sizes: Annotated[str | None, typer.Option(help="value list, e.g. 4k,64k")] = None,
    randomness: Annotated[str | None, typer.Option(help="value list, e.g. 0,1")] = None,
    numjobs: Annotated[str | None, typer.Option(help="value list, e.g. 1,4")] = None,
    wait: WaitOption = False,
    open_loop: Annotated[str | None, typer.Option(
        "--open-loop", help="then Poisson-arrival points at these fractions of each mix's measured capacity, "
        "e.g. 0.1,0.3,0.6,0.9 (trace predictions learn light-load latency from them)")] = None,
    open_loop_requests: Annotated[int, typer.Option(
        "--open-loop-requests", min=1, help="a sparse open-loop point runs long enough for this many "
        "requests (at most 10 s)")] = 1500,
    json_output: JsonOption = False,
) -> None:
    """Measure a device with fio over a plan of workloads; resumes an interrupted sweep."""
    # Imported here so that `ssdpredict --help` does not pay for scipy.
    from collectors.sweep.run import run_sweep, sweep_plan
    from collectors.sweep.multihost import split_remotes
    from collectors.sweep.settings import SweepSettings, nvmeof_target

    config = get_settings()
    remotes = split_remotes(remote) if remote and "," in remote else None
    if remotes and open_loop:
        raise InvalidInput("--open-loop runs on one host: sweep the hosts, then each host's open-loop points")
    settings = SweepSettings(
        target=target, device_class=device_class, engine=engine, runtime=runtime, ramp=ramp, size=size,
        offset=offset, remote=remotes[0] if remotes else remote, destroy_data=destroy_data, repeats=repeats,
        precondition=precondition,
        precondition_passes=precondition_passes, steady_state=steady_state,
        steady_state_rule=steady_state_rule, csd_path=csd_path, internal_target=internal_target,
        nvmeof=nvmeof_target(nvmeof_transport, nvmeof_address, nvmeof_port, nvmeof_nqn, nvmeof_nsid),
        raid={"level": raid_level, "members": raid_members, "chunk": raid_chunk, "kind": raid_kind,
              "controller": raid_controller, "vendor": raid_vendor},
        fio=config.fio, spdk_plugin=config.spdk_plugin,
    )
    data = datadir()
    values = _value_lists(write_ratios=write_ratios, queue_depths=queue_depths, sizes=sizes,
                          randomness=randomness, numjobs=numjobs)
    the_plan = sweep_plan(data, device, device_class, kind=plan, values=values, budget=budget, seed=seed,
                          points=points, reference=reference)
    if not json_output:
        where = target or f"NVMe-oF {nvmeof_nqn}"
        where += f" on {len(remotes)} hosts" if remotes else ""
        console.print(f"plan {the_plan.name}: {len(the_plan)} points x {repeats} repeat(s) on "
                      f"{where}, runtime {runtime}")
    if remotes:
        from service.cli.sweep_hosts import sweep_hosts

        total = len(the_plan) * repeats
        sweep_hosts(data, device, the_plan, settings, remotes, json_output=json_output, wait=wait,
                    progress=lambda bar, name: sweep_progress(bar, total, prefix=f"{name} "))
        return
    fractions = _list(open_loop, float, "open-loop")
    open_id = None
    with progress_bar(quiet=json_output) as bar:
        result = run_sweep(data, device, the_plan, settings,
                           progress=sweep_progress(bar, len(the_plan) * repeats), wait=wait, on_wait=waiting)
        if fractions:
            from collectors.sweep.openloop import measure_after_sweep

            task = bar.add_task("open-loop points", total=None)
            open_sweep = measure_after_sweep(
                data, device, result, settings, fractions,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                min_requests=open_loop_requests,
            )
            open_id = open_sweep.id
    _present(device, the_plan.name, result, json_output, open_id)


def sweep_progress(bar: Progress, total: int, prefix: str = "") -> Callable[[int, int, Workload], None]:
    """The sweep's progress callback: the current point's workload (after ``prefix``) as the bar's label.

    Its first call says what was already stored (on stderr, even with ``--json``): a
    resumed sweep prints ``resuming: N of M points already stored``.
    """
    task = bar.add_task(f"{prefix}sweep", total=total)
    started: list[bool] = []

    def advance(done: int, total: int, workload: Workload) -> None:
        label = (f"{prefix}wr {workload.write_ratio:g} qd {workload.queue_depth} "
                 f"{format_size(workload.request_size)} rnd {workload.randomness:g} nj {workload.numjobs}")
        if not started:
            if 0 < done < total:
                err_console.print(f"resuming: {done} of {total} points already stored", highlight=False)
            elif done and done >= total:
                err_console.print(f"reusing the finished sweep: {done} of {total} points stored",
                                  highlight=False)
            # a resumed sweep starts part-way: do not count the jump in the ETA's speed
            bar.reset(task, total=total, completed=done, description=label)
            started.append(True)
        bar.update(task, completed=done, total=total, description=label)

    return advance


def _present(
    device: str, plan_name: str, result: Sweep, json_output: bool, open_id: int | None = None
) -> None:
    repeat_cv = result.info.get("repeat_cv") or {}
    if json_output:
        print_json({"device": device, "sweep_id": result.id, "status": result.status,
                    "points": result.n_points, "planned": result.n_planned, "plan": plan_name,
                    "engine": result.info.get("engine"), "target": result.target,
                    "repeat_cv": result.info.get("repeat_cv"),
                    "open_loop_sweep_id": open_id})
        return
    console.print(f"sweep {result.id} of {device}: {result.n_points}/{result.n_planned} points stored "
                  f"({result.status}, engine {result.info.get('engine')})")
    if open_id is not None:
        console.print(f"open-loop points stored as sweep {open_id}")
    for metric, stats in repeat_cv.items():
        console.print(f"  repeat CV {metric}: mean {100 * stats['mean']:.1f} %, "
                      f"median {100 * stats['median']:.1f} %, max {100 * stats['max']:.1f} %")
