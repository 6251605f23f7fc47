"""CLI: ``ssdpredict report`` -- a device's report as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from modeling.reporting import build_report
from service.cli.common import DeviceOption, console, datadir, handle_errors, write_file


def register(app: typer.Typer) -> None:
    """Add ``report``."""
    app.command("report")(report)


@handle_errors
def report(
    device: DeviceOption,
    compare: Annotated[
        list[str] | None,
        typer.Option("--compare", "-c", help="another device to put side by side (repeatable)"),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="HTML file to write (default: DEVICE-report.html)")
    ] = None,
) -> None:
    """Write a device's report: one HTML file, plots embedded, no external URLs.

    It shows a KDiskMark-style summary (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T16, RND4K Q1T1;
    measured where swept, predicted otherwise), IOPS and latency against queue depth as
    fio-plot draws them, measured vs predicted, the error per workload region, interval
    coverage and the noise floor.  With --compare, the devices side by side.
    """
    path = output or Path(f"{device}-report.html")
    html = build_report(datadir(), device, compare or [])
    write_file(path, html.encode())
    console.print(f"wrote {path} ({len(html) // 1024} KiB)", highlight=False, soft_wrap=True)
