"""CLI: ``ssdpredict trace predict`` -- what a trace's load does on a device, per window."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import console, datadir, handle_errors
from service.cli.options import (
    DeviceOption,
    FormatOption,
    JsonOption,
    MethodOption,
    OutputOption,
    WindowOption,
    WindowRequestsOption,
)
from service.cli.trace.common import emit, seconds


@handle_errors
def predict_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    device: DeviceOption,
    fmt: FormatOption = "auto",
    window: WindowOption = "1s",
    window_requests: WindowRequestsOption = None,
    method: MethodOption = "open-loop",
    json_out: JsonOption = False,
    output: OutputOption = None,
) -> None:
    """What the trace's load does on the device, per window: latency, in flight, utilisation, saturation."""
    from traces.predict.windows import predict_trace

    result, _ = predict_trace(
        datadir(), device, file, fmt=fmt, window_s=seconds(window),
        window_requests=window_requests, method=method,
    )
    if emit(result, output, json_out, "note"):
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
