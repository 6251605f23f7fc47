"""CLI: ``ssdpredict trace capture`` -- record a device's block I/O."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import console, handle_errors
from service.cli.options import DeviceOption, MethodOption, OutputDirOption
from service.cli.trace.common import seconds


@handle_errors
def capture_cmd(
    device: DeviceOption,
    output: OutputDirOption,
    duration: Annotated[str, typer.Option("--duration", help="e.g. 10s")] = "10s",
    method: MethodOption = "auto",
) -> None:
    """Capture a device's block I/O: blktrace, else kernel tracepoints (ftrace, perf)."""
    from traces.capture import capture

    result = capture(device, seconds(duration), output, method=method)
    for m, why in result.skipped.items():
        console.print(f"[yellow]{m} not used:[/] {why}", highlight=False)
    console.print(
        f"captured {result.requests} requests with [bold]{result.method}[/] -> "
        f"{result.trace_path} (format {result.format})",
        highlight=False,
    )
