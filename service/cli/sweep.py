"""CLI: ``ssdpredict sweep`` -- measure a device over a plan of workloads with fio."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from modeling.errors import InvalidInput
from modeling.workload import Workload, format_size, parse_size
from service.cli.common import console, datadir, handle_errors, print_json, progress_bar


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


@handle_errors
def sweep(
    device: str = typer.Option(..., "--device", "-d", help="device name to store the points under"),
    target: str = typer.Option("", "--target", "-t", help="file or block device to measure"),
    plan: str | None = typer.Option(
        None, help="quick|pts|nvmeof|grid|lhs|random|adaptive or a plan FILE.toml "
        "(default quick; nvmeof for --class nvmeof)"),
    runtime: str = typer.Option("1s", help="fio runtime per point, e.g. 500ms, 1s"),
    ramp: str = typer.Option("0ms", help="fio ramp time per point"),
    size: str = typer.Option("256MiB", help="span of the target to use (a file is created at this size)"),
    offset: str = typer.Option("0", help="start of the span"),
    destroy_data: bool = typer.Option(False, "--destroy-data",
                                      help="allow writing over a block device's data"),
    device_class: str = typer.Option("ssd", "--class", help="ssd|raid|csd|nvmeof|pmem"),
    csd_path: str | None = typer.Option(None, help="external|internal|concurrent (class csd)"),
    internal_target: str | None = typer.Option(None, help="path inside the CSD for internal/concurrent"),
    remote: str | None = typer.Option(None, help="HOST:PORT of a fio --server to run the jobs on"),
    nvmeof_transport: str | None = typer.Option(None, help="tcp or rdma: attach with nvme connect"),
    nvmeof_address: str | None = typer.Option(None, help="NVMe-oF target address"),
    nvmeof_port: int = typer.Option(4420, help="NVMe-oF target port"),
    nvmeof_nqn: str | None = typer.Option(None, help="NVMe-oF subsystem NQN"),
    nvmeof_nsid: int = typer.Option(1, help="NVMe-oF namespace id"),
    raid_level: str | None = typer.Option(None, help="RAID level (hardware/GPU/software RAID)"),
    raid_members: str | None = typer.Option(None, help="member devices or count"),
    raid_chunk: str | None = typer.Option(None, help="RAID chunk size, e.g. 512k"),
    raid_kind: str | None = typer.Option(None, help="hardware|gpu|software (md arrays are read from sysfs)"),
    raid_controller: str | None = typer.Option(None, help="RAID controller, e.g. 'GRAID SR-1010'"),
    raid_vendor: str | None = typer.Option(None, help="RAID vendor"),
    repeats: int = typer.Option(1, help="measure each point N times"),
    precondition: bool = typer.Option(False, "--precondition", help="fill the span sequentially first"),
    precondition_passes: int = typer.Option(2, help="sequential fills for --precondition"),
    steady_state: bool = typer.Option(False, "--steady-state", help="measure each point at steady state"),
    steady_state_rule: str = typer.Option("fio", help="fio (fio's steadystate) or pts (5-round window)"),
    engine: str = typer.Option("auto", help="auto|io_uring|libaio|psync|spdk"),
    seed: int | None = typer.Option(None, help="seed of the point order (and sampled plans)"),
    budget: int | None = typer.Option(None, help="points for --plan adaptive/lhs/random"),
    points: int | None = typer.Option(None, help="measure only the first N points of the plan"),
    write_ratios: str | None = typer.Option(None, help="value list, e.g. 0,0.5,1"),
    queue_depths: str | None = typer.Option(None, help="value list, e.g. 1,8,32"),
    sizes: str | None = typer.Option(None, help="value list, e.g. 4k,64k"),
    randomness: str | None = typer.Option(None, help="value list, e.g. 0,1"),
    numjobs: str | None = typer.Option(None, help="value list, e.g. 1,4"),
    open_loop: str | None = typer.Option(
        None, "--open-loop", help="after the sweep, Poisson-arrival points at these fractions of each "
        "mix's measured capacity, e.g. 0.1,0.3,0.6,0.9 (trace predictions learn light-load latency)"),
    json_output: bool = typer.Option(False, "--json", help="print the sweep as JSON"),
) -> None:
    """Measure a device with fio over a plan of workloads; resumes an interrupted sweep."""
    # Imported here so that `ssdpredict --help` does not pay for scipy.
    from collectors.plans import build_plan
    from collectors.sweep import SweepSettings, run_sweep

    nvmeof = None
    if nvmeof_address or nvmeof_nqn or nvmeof_transport:
        if not (nvmeof_address and nvmeof_nqn):
            raise InvalidInput("attaching NVMe-oF needs --nvmeof-address and --nvmeof-nqn")
        from collectors.devices.nvmeof import NvmeofTarget

        nvmeof = NvmeofTarget.model_validate(
            {"transport": nvmeof_transport or "tcp", "address": nvmeof_address, "port": nvmeof_port,
             "nqn": nvmeof_nqn, "nsid": nvmeof_nsid})
    elif not target:
        raise InvalidInput("--target is required (a file or block device), or --nvmeof-address/--nvmeof-nqn")
    lists = {
        "write_ratios": _list(write_ratios, float, "write-ratios"),
        "queue_depths": _list(queue_depths, int, "queue-depths"),
        "sizes": _list(sizes, parse_size, "sizes"),
        "randomness": _list(randomness, float, "randomness"),
        "numjobs": _list(numjobs, int, "numjobs"),
    }
    values = {name: vals for name, vals in lists.items() if vals}
    data = datadir()
    kind = plan or ("nvmeof" if device_class == "nvmeof" else "quick")
    measurements = None
    if kind == "adaptive":
        names = {d.name for d in data.catalog.list_devices()}
        measurements = data.catalog.measurements(device) if device in names else None
    the_plan = build_plan(kind, values=values, n=budget, seed=seed, measurements=measurements).head(points)
    settings = SweepSettings(
        target=target, engine=None if engine == "auto" else engine, runtime=runtime, ramp=ramp,
        size=size, offset=offset, remote=remote, destroy_data=destroy_data, repeats=repeats,
        precondition=precondition, precondition_passes=precondition_passes, steady_state=steady_state,
        steady_state_rule=steady_state_rule, csd_path=csd_path, internal_target=internal_target,
        nvmeof=nvmeof,
    )
    raid = {"level": raid_level, "members": raid_members, "chunk": raid_chunk, "kind": raid_kind,
            "controller": raid_controller, "vendor": raid_vendor}
    if device_class != "raid" and any(raid.values()):
        raise InvalidInput("--raid-* options need --class raid")
    fractions = _list(open_loop, float, "open-loop")
    if fractions and (remote or nvmeof):
        raise InvalidInput("--open-loop measures a local target only")
    if not json_output:
        console.print(f"plan {the_plan.name}: {len(the_plan)} points x {repeats} repeat(s) on "
                      f"{target or 'NVMe-oF ' + str(nvmeof_nqn)}, runtime {runtime}")
    with progress_bar(quiet=json_output) as bar:
        task = bar.add_task("sweep", total=len(the_plan) * repeats)
        started: list[bool] = []

        def advance(done: int, total: int, workload: Workload) -> None:
            label = (f"wr {workload.write_ratio:g} qd {workload.queue_depth} "
                     f"{format_size(workload.request_size)} rnd {workload.randomness:g}")
            if not started:
                # a resumed sweep starts part-way: do not count the jump in the ETA's speed
                bar.reset(task, total=total, completed=done, description=label)
                started.append(True)
            bar.update(task, completed=done, total=total, description=label)

        result = run_sweep(data, device, the_plan, settings, device_class=device_class,
                           progress=advance, raid=raid if device_class == "raid" else None)
        if fractions:
            from collectors.fio.jobs import JobSettings, parse_duration_ms, size_option
            from collectors.openloop import measure_open_loop

            job = JobSettings(target=result.target or target, engine=result.info.get("engine") or "libaio",
                              size=size_option(size), offset=size_option(offset),
                              runtime_ms=parse_duration_ms(runtime), ramp_ms=parse_duration_ms(ramp))
            ol_task = bar.add_task("open-loop points", total=None)

            def ol_advance(done: int, total: int) -> None:
                bar.update(ol_task, completed=done, total=total)

            ol = measure_open_loop(data, device, job, fractions=fractions, progress=ol_advance)
    summary = {"device": device, "sweep_id": result.id, "status": result.status,
               "points": result.n_points, "planned": result.n_planned, "plan": the_plan.name,
               "engine": result.info.get("engine"), "target": result.target,
               "repeat_cv": result.info.get("repeat_cv"),
               "open_loop_sweep_id": ol.id if fractions else None}
    if json_output:
        print_json(summary)
        return
    console.print(f"sweep {result.id} of {device}: {result.n_points}/{result.n_planned} points stored "
                  f"({result.status}, engine {summary['engine']})")
    for metric, stats in (result.info.get("repeat_cv") or {}).items():
        console.print(f"  repeat CV {metric}: mean {100 * stats['mean']:.1f} %, "
                      f"median {100 * stats['median']:.1f} %, max {100 * stats['max']:.1f} %")

