"""CLI: ``ssdpredict trace characterize | capture | replay | validate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box

if TYPE_CHECKING:
    import pandas as pd
    from rich.table import Table

    from traces.predict.windows import TracePrediction

from service.cli.common import (
    DeviceOption,
    JsonOption,
    cli_table,
    console,
    datadir,
    handle_errors,
    print_json,
)
from service.config import get_settings

trace_app = typer.Typer(
    help="Block traces: characterise, capture, replay and validate.", no_args_is_help=True
)

FormatOpt = Annotated[str, typer.Option("--format", "-f", help="trace format or 'auto'")]
WindowOpt = Annotated[str, typer.Option("--window", help="window length, e.g. 1s, 500ms")]
LanesOpt = Annotated[
    Optional[int],
    typer.Option("--lanes", help="parallel replay jobs (default: the trace's peak in flight, else 16)"),
]
MethodOpt = Annotated[
    str, typer.Option("--method", help="open-loop (queueing on the device's curve) or trace-qd (the old one)")
]
WindowReqOpt = Annotated[
    Optional[int], typer.Option("--window-requests", help="N requests per window", min=1)
]
WindowsCsvOpt = Annotated[
    Optional[Path], typer.Option("-o", "--output", help="write the window table as CSV")
]


def _emit(result: TracePrediction, output: Path | None, json_out: bool, label: str) -> bool:
    """Write the window table (``-o``), then print the JSON (True: nothing more to print) or the warnings."""
    if output is not None:
        result.windows.to_csv(output, index=False)
    if json_out:
        print_json(result.to_dict())
        return True
    for w in result.warnings:
        console.print(f"[yellow]{label}:[/] {w}", highlight=False)
    return False


def parse_duration(text: str) -> float:
    """Seconds from '10s', '500ms', '2m' or a plain number of seconds."""
    from modeling.errors import InvalidInput

    t = text.strip().lower()
    for suffix, mult in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)], mult
            break
    else:
        scale = 1.0
    try:
        value = float(t) * scale
    except ValueError:
        raise InvalidInput(f"not a duration: {text!r} (use e.g. 1s, 500ms, 2m)") from None
    if not value > 0:
        raise InvalidInput(f"duration must be positive: {text!r}")
    return value


@trace_app.command("characterize")
@handle_errors
def characterize_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    fmt: FormatOpt = "auto",
    window: WindowOpt = "1s",
    window_requests: WindowReqOpt = None,
    json_out: JsonOption = False,
    output: WindowsCsvOpt = None,
) -> None:
    """One workload vector per window plus a whole-trace summary (CSV feeds `predict --input`)."""
    from traces.characterize import characterize

    result = characterize(str(file), fmt, window_s=parse_duration(window), window_requests=window_requests)
    if output is not None:
        result.windows.to_csv(output, index=False)
    if json_out:
        print_json(result.to_dict())
        return
    s = result.summary
    console.print(
        f"{s['format']}: {s['requests']} requests over {s['duration_s']:.3f} s, "
        f"{s['windows']} windows, queue depth by {s['qd_method']}",
        highlight=False,
    )
    console.print(_summary_table(s))
    if output is not None:
        console.print(f"window table written to {output}")
    else:
        console.print(_windows_table(result.windows, max_rows=CHARACTERIZE_ROWS))
        if len(result.windows) > CHARACTERIZE_ROWS:
            console.print(f"... {len(result.windows) - CHARACTERIZE_ROWS} more windows: "
                          "-o FILE.csv or --json gives them all", highlight=False)


CHARACTERIZE_ROWS = 30
"""Windows ``trace characterize`` prints; the CSV (``-o``) and ``--json`` hold all of them."""

# (column, header, format) of the window table: the workload vector, then what was measured
_WINDOW_COLUMNS = (
    ("window_start_s", "start s", "{:.1f}"),
    ("requests", "reqs", "{:,.0f}"),
    ("write_ratio", "writes", "{:.0%}"),
    ("queue_depth", "QD", "{:.0f}"),
    ("request_size", "size", None),
    ("randomness", "random", "{:.0%}"),
    ("iops", "IOPS", "{:,.0f}"),
    ("bandwidth_mib_s", "MiB/s", "{:,.1f}"),
    ("latency_mean_us", "mean us", "{:,.0f}"),
    ("latency_p99_us", "p99 us", "{:,.0f}"),
)


def _size_text(size: float) -> str:
    for unit, mult in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= mult:
            value = size / mult
            return f"{value:g} {unit}" if (value * 10).is_integer() else f"{value:.1f} {unit}"
    return f"{size:.0f} B"


def _cell(value: object, fmt: str | None) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if fmt is None:
        return _size_text(float(value))  # type: ignore[arg-type]
    return fmt.format(value)


def _summary_table(summary: dict) -> Table:
    """The whole trace's workload vector and measured metrics, one per row."""
    table = cli_table("trace summary", "value", ids=("trace summary",))
    w, m = summary["workload"], summary["measured"]
    for name, value in w.items():
        size = name.endswith("_size")
        fmt = None if size else ("{:.0f}" if name in ("queue_depth", "numjobs") else "{:.0%}")
        table.add_row(name, _cell(value, fmt))
    for name, fmt in (("iops", "{:,.1f}"), ("bandwidth_mib_s", "{:,.2f}"), ("latency_mean_us", "{:,.1f}"),
                      ("latency_p99_us", "{:,.1f}")):
        table.add_row(f"measured {name}", _cell(m.get(name), fmt))
    return table


def _windows_table(windows: pd.DataFrame, *, max_rows: int) -> Table:
    """The first windows' workload and measured metrics, formatted for reading."""
    shown = [c for c in _WINDOW_COLUMNS if c[0] in windows.columns]
    # no side borders, numbers right-aligned: ten columns fit 80 characters
    table = cli_table(*(header for _, header, _ in shown), title="windows", box=box.SIMPLE_HEAD,
                      show_edge=False, pad_edge=False)
    for column in table.columns:
        column.justify = "right"
    for row in windows.head(max_rows).itertuples(index=False):
        values = row._asdict()
        table.add_row(*(_cell(values[col], fmt) for col, _, fmt in shown))
    return table


@trace_app.command("capture")
@handle_errors
def capture_cmd(
    device: Annotated[str, typer.Option("--device", help="block device, e.g. /dev/nvme0n1")],
    output: Annotated[Path, typer.Option("-o", "--output", help="output directory")],
    duration: Annotated[str, typer.Option("--duration", help="e.g. 10s")] = "10s",
    method: Annotated[str, typer.Option("--method", help="auto, blktrace, ftrace or perf")] = "auto",
) -> None:
    """Capture a device's block I/O: blktrace, else kernel tracepoints (ftrace, perf)."""
    from traces.capture import capture

    result = capture(device, parse_duration(duration), output, method=method)
    for m, why in result.skipped.items():
        console.print(f"[yellow]{m} not used:[/] {why}", highlight=False)
    console.print(
        f"captured {result.requests} requests with [bold]{result.method}[/] -> "
        f"{result.trace_path} (format {result.format})",
        highlight=False,
    )


@trace_app.command("replay")
@handle_errors
def replay_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    target: Annotated[str, typer.Option("--target", help="file or block device to replay on")],
    fmt: FormatOpt = "auto",
    destroy_data: Annotated[
        bool, typer.Option("--destroy-data", help="allow writing to a device with data")
    ] = False,
    speed: Annotated[float, typer.Option("--speed", help="time scale: 2.0 replays twice as fast")] = 1.0,
    window: WindowOpt = "1s",
    lanes: LanesOpt = None,
    json_out: JsonOption = False,
) -> None:
    """Replay a trace with fio on a target and measure it per window."""
    from traces.replay.run import replay

    result = replay(
        file,
        target,
        fmt=fmt,
        destroy_data=destroy_data,
        speed=speed,
        window_s=parse_duration(window),
        lanes=lanes,
        fio=get_settings().fio,
        catalog=datadir().catalog,
    )
    if json_out:
        print_json(result.to_dict())
        return
    console.print(
        f"replayed {result.requests} requests on {result.target}: trace rate "
        f"{result.trace_rate:.0f} IO/s, replayed {result.replay_rate:.0f} IO/s "
        f"(drift {result.drift * 100:+.2f} %)",
        highlight=False,
    )
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    console.print(result.windows.to_string(index=False, max_rows=40))


@trace_app.command("validate")
@handle_errors
def validate_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    device: DeviceOption,
    target: Annotated[
        Optional[str], typer.Option("--target", help="replay on this target to measure")
    ] = None,
    fmt: FormatOpt = "auto",
    window: WindowOpt = "1s",
    window_requests: WindowReqOpt = None,
    destroy_data: Annotated[bool, typer.Option("--destroy-data")] = False,
    lanes: LanesOpt = None,
    speed: Annotated[float, typer.Option("--speed")] = 1.0,
    method: MethodOpt = "open-loop",
    plot: Annotated[
        Optional[Path], typer.Option("--plot", help="PNG path (default: FILE.validation.png)")
    ] = None,
    json_out: JsonOption = False,
    output: WindowsCsvOpt = None,
    device_check: Annotated[
        bool,
        typer.Option("--device-check/--no-device-check",
                     help="with --target: probe it at QD1 first against the model (drift since the sweep)"),
    ] = True,
) -> None:
    """Per window: predicted vs measured latency, bandwidth and IOPS, their errors, MRE and a PNG."""
    from traces.validate.compare import validate_trace

    png = plot if plot is not None else Path(f"{file.name}.validation.png")
    report = validate_trace(
        datadir(),
        device,
        file,
        fmt=fmt,
        window_s=parse_duration(window),
        window_requests=window_requests,
        target=target,
        destroy_data=destroy_data,
        speed=speed,
        plot_path=png,
        lanes=lanes,
        method=method,
        fio=get_settings().fio,
        device_check=device_check,
    )
    if _emit(report, output, json_out, "warning"):
        return
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
    if report.device_check:
        console.print(report.device_check["note"], highlight=False)
    if report.plot:
        console.print(f"plot: {report.plot}")


@trace_app.command("predict")
@handle_errors
def predict_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    device: DeviceOption,
    fmt: FormatOpt = "auto",
    window: WindowOpt = "1s",
    window_requests: WindowReqOpt = None,
    method: MethodOpt = "open-loop",
    json_out: JsonOption = False,
    output: WindowsCsvOpt = None,
) -> None:
    """What the trace's load does on the device, per window: latency, in flight, utilisation, saturation."""
    from traces.predict.windows import predict_trace

    result, _ = predict_trace(
        datadir(), device, file, fmt=fmt, window_s=parse_duration(window),
        window_requests=window_requests, method=method,
    )
    if _emit(result, output, json_out, "note"):
        return
    s = result.summary
    console.print(
        f"{s['windows']} windows, offered {s['offered_iops']:.0f} IO/s ({s['offered_mib_s']:.1f} MiB/s) on "
        f"average; peak utilisation {s['peak_utilisation'] * 100:.0f} %, {s['saturated_windows']} window(s) "
        f"saturated; mean latency {s['pred_latency_mean_us']:.1f} us ({result.method})",
        highlight=False,
    )
    cols = ["window_start_s", "offered_iops", "offered_mib_s", "utilisation", "saturated", "pred_inflight",
            "pred_latency_mean_us", "pred_latency_p99_us"]
    console.print(result.windows[cols].to_string(index=False, max_rows=40))
    if output is not None:
        console.print(f"window table written to {output}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(trace_app, name="trace")
