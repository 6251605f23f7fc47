"""CLI: ``ssdpredict trace replay`` -- replay a trace with fio and measure it per window."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import console, datadir, handle_errors, print_json
from service.cli.options import (
    DestroyDataOption,
    FormatOption,
    JsonOption,
    LanesOption,
    ResizeOption,
    SpeedOption,
    TargetOption,
    WindowOption,
)
from service.cli.trace.common import seconds
from service.config import get_settings


@handle_errors
def replay_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    target: TargetOption,
    fmt: FormatOption = "auto",
    destroy_data: DestroyDataOption = False,
    speed: SpeedOption = 1.0,
    window: WindowOption = "1s",
    lanes: LanesOption = None,
    resize: ResizeOption = "round-up",
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
        window_s=seconds(window),
        lanes=lanes,
        fio=get_settings().fio,
        catalog=datadir().catalog,
        resize=resize,
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
