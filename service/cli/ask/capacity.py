"""CLI: ``ssdpredict capacity``: the most IO/s of a mix a device takes under a latency target."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from modeling.errors import InvalidInput
from service.cli.common import cli_table, console, datadir, handle_errors, print_json
from service.cli.options import (
    AllDevicesOption,
    DeviceOption,
    DevicesOption,
    FormatOption,
    InputCsvOption,
    JsonOption,
    OptionalDeviceOption,
    SloOption,
    WindowOption,
    WorkloadMixesOption,
    WindowRequestsOption,
)
from service.cli.trace import trace_app
from service.cli.trace.common import seconds
from traces.capacity.slo import format_us

if TYPE_CHECKING:
    import pandas as pd

    from traces.capacity.device import DeviceCapacity
    from traces.capacity.fleet import FleetCapacity
    from traces.capacity.headroom import TraceHeadroom
    from traces.capacity.search import CapacityAnswer

BurstinessOption = Annotated[
    float,
    typer.Option("--burstiness", help="squared coefficient of variation of the arrival gaps (1: Poisson)"),
]
MixCsvOption = InputCsvOption


def read_question(workload: list[str] | None, input_csv: Path | None) -> tuple[pd.DataFrame, list[str]]:
    """The mixes of ``--workload`` (one or more) or ``--input`` (exactly one of the two)."""
    from traces.capacity.device import mix_table, parse_mix, read_mixes

    if (not workload) == (input_csv is None):
        raise InvalidInput("give --workload MIX or --input FILE.csv (one of them)")
    if input_csv is not None:
        return read_mixes(input_csv)
    assert workload
    return mix_table([parse_mix(text) for text in workload]), []


def _mix_text(workload: dict) -> str:
    from modeling.workload import format_size

    return (
        f"{workload['write_ratio']:.0%} writes, {format_size(int(workload['request_size']))}, "
        f"{workload['randomness']:.0%} random"
    )


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


MAX_TABLES = 20
"""Answers printed as tables; ``--json`` gives them all."""


_SHORT_BINDS = {"saturation": "none (saturates)", "never": "never met", "measured": "none (measured)"}


def _short_binding(outcome: str, binding: str) -> str:
    """The binding-target cell of the fleet and headroom tables: the outcome where none binds."""
    return _SHORT_BINDS.get(outcome, binding)


def answer_table(a: CapacityAnswer, title: str) -> object:
    """One answer: max IO/s, MiB/s, interval, in flight, utilisation, binding target, beyond measured."""
    table = cli_table("", "", title=title, show_header=False)
    binds = {"saturation": "none: throughput is the limit", "never": "every load breaks it",
             "measured": "none up to the fastest open-loop point"}
    lat = "lightest-load latency" if a.outcome == "never" else "latency there"
    rows = [
        ("max IO/s", _rate(a.iops)),
        ("MiB/s", f"{a.bandwidth_mib_s:,.2f}"),
        ("interval IO/s", f"{_rate(a.iops_lower)} - {_rate(a.iops_upper)} (model bounds)"),
        ("in flight", f"{a.inflight:.2f}"),
        ("utilisation", f"{a.utilisation:.1%} of {_rate(a.capacity_iops)} IO/s"),
        ("binding target", binds.get(a.outcome, a.binding or "")),
        (lat, f"mean {format_us(a.latency_mean_us, 3)}, p99 {format_us(a.latency_p99_us, 3)}"),
        ("beyond measured", "yes" if a.beyond_measured else "no"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def print_device(result: DeviceCapacity) -> None:
    """A table per answer with its notes, then the device's notes."""
    burst = "" if result.arrival_cv2 == 1 else f", arrivals C2={result.arrival_cv2:g}"
    console.print(f"{result.device} ({result.model_version}) under {result.slo}{burst}", highlight=False)
    for a in result.answers[:MAX_TABLES]:
        console.print(answer_table(a, _mix_text(a.workload)))
        for note in a.notes:
            console.print(note, highlight=False, soft_wrap=True)
    if len(result.answers) > MAX_TABLES:
        console.print(
            f"... {len(result.answers) - MAX_TABLES} more answers: --json gives them all", highlight=False
        )
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)


def print_fleet(result: FleetCapacity) -> None:
    """Per mix, the devices by headroom: a row each, best first; then the marked and the skipped."""
    burst = "" if result.arrival_cv2 == 1 else f", arrivals C2={result.arrival_cv2:g}"
    rows = result.to_dict()["mixes"]
    for mix in rows[:MAX_TABLES]:
        table = cli_table(
            "#",
            "device",
            "max IO/s",
            "MiB/s",
            "interval IO/s",
            "util",
            "binding target",
            ids=("device",),
            title=f"{_mix_text(mix['workload'])} under {result.slo}{burst}",
        )
        for r in mix["ranking"]:
            binds = _short_binding(r["outcome"], r["binding"])
            mark = "" if r["open_loop_points"] else " *"
            table.add_row(
                str(r["rank"]),
                r["device"] + mark,
                _rate(r["iops"]),
                f"{r['bandwidth_mib_s']:,.1f}",
                f"{_rate(r['iops_lower'])}-{_rate(r['iops_upper'])}",
                f"{r['utilisation']:.0%}",
                binds,
            )
        console.print(table)
    if len(rows) > MAX_TABLES:
        console.print(f"... {len(rows) - MAX_TABLES} more mixes: --json gives them all", highlight=False)
    bare = [d.device for d in result.devices if not d.open_loop_points]
    if bare:
        console.print(
            f"* no open-loop points (latency under load from the closed-loop method alone): "
            f"{', '.join(bare)}",
            highlight=False,
            soft_wrap=True,
        )
    for s in result.skipped:
        console.print(f"skipped {s.device}: {s.reason}", highlight=False, soft_wrap=True)


def capacity_cmd(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    workload: WorkloadMixesOption = None,
    slo: SloOption = "",
    burstiness: BurstinessOption = 1.0,
    input_csv: MixCsvOption = None,
    json_out: JsonOption = False,
) -> None:
    """The largest offered IO/s of a mix whose predicted open-loop latency meets a target;
    with --devices or --all-devices, the devices ranked by it (headroom)."""
    from modeling.store.device_selection import select_devices
    from traces.capacity.device import device_capacity
    from traces.capacity.fleet import fleet_capacity
    from traces.capacity.slo import parse_slo

    if sum((device is not None, devices is not None, all_devices)) != 1:
        raise InvalidInput("give one of --device D, --devices a,b or --all-devices")
    target = parse_slo(slo)
    mixes, notes = read_question(workload, input_csv)
    data = datadir()
    if device is not None:
        one = device_capacity(data, device, mixes, target, burstiness)
        one.notes[:0] = notes
        if json_out:
            print_json(one.to_dict())
        else:
            print_device(one)
        return
    names = select_devices(
        data, [p.strip() for p in (devices or "").split(",") if p.strip()], all_devices=all_devices
    )
    many = fleet_capacity(data, names, mixes, target, burstiness)
    if json_out:
        print_json({**many.to_dict(), "notes": notes})
        return
    print_fleet(many)
    for note in notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)


ShareOption = Annotated[
    float, typer.Option("--share", help="the share of windows that must meet the target (1: every window)")
]


def print_headroom(h: TraceHeadroom) -> None:
    """The speed-up, its interval and the windows that break first."""
    every = "every window" if h.allowed_to_break == 0 else f"{h.share:.0%} of the windows"
    if h.outcome == "never":
        console.print(
            f"window {h.binding_window['window']} cannot meet {h.slo} at any speed on {h.device}",
            highlight=False,
        )
    else:
        console.print(
            f"{h.device} keeps {every} under {h.slo} with the trace's time line up to "
            f"{h.speedup:.3g}x faster (interval {h.speedup_lower:.3g}-{h.speedup_upper:.3g}x, "
            f"model bounds); {h.windows} windows judged",
            highlight=False,
            soft_wrap=True,
        )
    table = cli_table(
        "window",
        "start s",
        "offered IO/s",
        "max speed-up",
        "binding target",
        title="the windows that break first",
    )
    for w in h.breaking_first:
        binds = _short_binding(w["outcome"], w["binding"])
        table.add_row(
            str(w["window"]),
            f"{w['window_start_s']:.3f}",
            _rate(w["offered_iops"]),
            f"{w['speedup']:.3g}x",
            binds,
        )
    console.print(table)
    for note in h.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)


def headroom_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    device: DeviceOption,
    slo: SloOption = "",
    share: ShareOption = 1.0,
    fmt: FormatOption = "auto",
    window: WindowOption = "1s",
    window_requests: WindowRequestsOption = None,
    json_out: JsonOption = False,
) -> None:
    """The largest speed-up of the trace's own time line that keeps its windows under a target
    (how many copies of this tenant fit), and the windows that break first."""
    from traces.capacity.headroom import trace_headroom
    from traces.capacity.slo import parse_slo

    target = parse_slo(slo)
    result = trace_headroom(
        datadir(),
        device,
        file,
        target,
        share=share,
        fmt=fmt,
        window_s=seconds(window),
        window_requests=window_requests,
    )
    if json_out:
        print_json(result.to_dict())
    else:
        print_headroom(result)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app: ``capacity`` and ``trace headroom``."""
    app.command("capacity")(handle_errors(capacity_cmd))
    trace_app.command("headroom")(handle_errors(headroom_cmd))
