"""CLI: ``ssdpredict trace validate`` -- predicted against measured, per window, with a plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from service.cli.common import console, datadir, handle_errors
from service.cli.options import (
    CapacityProbesOption,
    DestroyDataOption,
    DeviceOption,
    FormatOption,
    JsonOption,
    LanesOption,
    ResizeOption,
    MethodOption,
    OpenLoopProbeOption,
    OptionalTargetOption,
    OutputOption,
    SpeedOption,
    WindowOption,
    WindowRequestsOption,
)
from service.cli.trace.common import emit, seconds
from service.config import get_settings

if TYPE_CHECKING:
    from traces.validate.compare import ValidationReport


@handle_errors
def validate_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    device: DeviceOption,
    target: OptionalTargetOption = None,
    fmt: FormatOption = "auto",
    window: WindowOption = "1s",
    window_requests: WindowRequestsOption = None,
    destroy_data: DestroyDataOption = False,
    lanes: LanesOption = None,
    speed: SpeedOption = 1.0,
    method: MethodOption = "open-loop",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="PNG path (default: FILE.validation.png)")
    ] = None,
    json_out: JsonOption = False,
    output: OutputOption = None,
    device_check: Annotated[
        bool,
        typer.Option("--device-check/--no-device-check",
                     help="with --target: probe it at QD1 first against the model (drift since the sweep)"),
    ] = True,
    resize: ResizeOption = "round-up",
    capacity_probes: CapacityProbesOption = 3,
    open_loop_probe: OpenLoopProbeOption = True,
) -> None:
    """Per window: predicted vs measured latency, bandwidth and IOPS, their errors, MRE and a PNG."""
    from traces.validate.compare import validate_trace

    png = plot if plot is not None else Path(f"{file.name}.validation.png")
    report = validate_trace(
        datadir(),
        device,
        file,
        fmt=fmt,
        window_s=seconds(window),
        window_requests=window_requests,
        target=target,
        destroy_data=destroy_data,
        speed=speed,
        plot_path=png,
        lanes=lanes,
        method=method,
        fio=get_settings().fio,
        device_check=device_check,
        resize=resize,
        capacity_probes=capacity_probes,
        open_loop_probe=open_loop_probe,
    )
    if emit(report, output, json_out, "warning"):
        return
    _print_report(report)


def _print_report(report: ValidationReport) -> None:
    """The window table, the errors per metric, saturation and the device check."""
    cols = ["window_start_s", "offered_iops", "utilisation", "saturated", "pred_latency_mean_us",
            "latency_mean_us", "pred_latency_p99_us", "latency_p99_us", "pred_iops", "iops"]
    shown = [c for c in cols if c in report.windows.columns]
    console.print(report.windows[shown].to_string(index=False, max_rows=40))
    for metric, e in report.summary["errors"].items():
        mre = "n/a" if e["mre"] is None else f"{e['mre'] * 100:.1f} %"
        uns = e["unsaturated"]
        extra = "" if uns["mre"] is None else f" ({uns['mre'] * 100:.1f} % over {uns['n']} unsaturated)"
        console.print(f"MRE {metric}: {mre} over {e['n']} windows{extra}", highlight=False)
    sat = report.summary.get("saturation")
    if sat and sat["agree"] is not None:
        console.print(
            f"saturation flagged correctly on {sat['agree'] * 100:.0f} % of {sat['windows']} windows "
            f"(predicted {sat['predicted']}, measured {sat['measured']})",
            highlight=False,
        )
    for probe in report.capacity_probe or []:
        console.print(probe["note"], highlight=False)
    anchors = report.open_loop_probe
    if anchors:
        for point in anchors["points"]:
            console.print(point["note"], highlight=False)
        e = anchors["as_swept"]["errors"].get("latency_mean_us")
        if e is not None:
            uns = e["unsaturated"]
            swept = "n/a" if uns["mre"] is None else f"{uns['mre'] * 100:.1f} %"
            took = anchors["seconds"]
            console.print(f"the MREs above are re-anchored on the open-loop probe ({took:.1f} s); "
                          f"as swept, against the same replay: MRE latency_mean_us {swept} over {uns['n']} "
                          "unsaturated windows", highlight=False)
    if report.device_check:
        console.print(report.device_check["note"], highlight=False)
    if report.plot:
        console.print(f"plot: {report.plot}")
