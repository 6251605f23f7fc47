"""CLI: ``ssdpredict report`` -- a device's report as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import console, datadir, handle_errors, write_file
from service.cli.options import DeviceOption, OptionalSloOption, OutputOption


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
    output: OutputOption = None,
    slo: OptionalSloOption = None,
) -> None:
    """Write a device's report: one HTML file, plots embedded, no external URLs.

    It shows a KDiskMark-style summary (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T16, RND4K Q1T1;
    measured where swept, predicted otherwise), IOPS and latency against queue depth as
    fio-plot draws them, measured vs predicted, the error per workload region, interval
    coverage and the noise floor, and each device's capacity under --slo (latency against
    offered load for a few mixes).  With --compare, the devices side by side.
    """
    # Imported here so that `ssdpredict --help` does not pay for scikit-learn and matplotlib.
    from modeling.reporting import build_report
    from traces.capacity.report import DEFAULT_SLO, capacity_section
    from traces.capacity.slo import parse_slo

    path = output or Path(f"{device}-report.html")
    section = capacity_section(datadir(), [device, *(compare or [])], parse_slo(slo or DEFAULT_SLO))
    html = build_report(datadir(), device, compare or [], sections=[section])
    write_file(path, html.encode())
    console.print(f"wrote {path} ({len(html) // 1024} KiB)", highlight=False, soft_wrap=True)
