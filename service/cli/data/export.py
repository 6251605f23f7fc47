"""CLI: ``ssdpredict export`` -- a device's measurements in the format ingest reads."""

from __future__ import annotations

import sys

import typer

from collectors.ingest.export import export_device
from modeling.errors import InvalidInput
from service.cli.common import console, datadir, err_console, handle_errors, write_file
from service.cli.options import FormatOption, OutputOption, DeviceOption


def register(app: typer.Typer) -> None:
    """Add ``export``."""
    app.command("export")(export)


@handle_errors
def export(
    device: DeviceOption,
    fmt: FormatOption = "csv",
    output: OutputOption = None,
) -> None:
    """Export a device's measured runs with the columns ingest reads (export -> ingest round-trips).

    Columns: the workload fields, then the metric columns the device has; an empty cell is
    a metric that was not measured.  Sweep bookkeeping (fio version, engine, raw fio JSON)
    stays in the data directory.  Parquet holds the same table, for analysis tools.
    """
    if output is None and fmt == "parquet":
        raise InvalidInput("parquet is binary: name a file with -o/--output")
    result = export_device(datadir(), device, fmt)
    data = result.data
    if result.left_out:
        err_console.print(
            f"left out {result.left_out} open-loop point(s) (fio rate_iops runs): the ingest format has no"
            " column for their offered rate; they stay in the data directory",
            highlight=False,
            soft_wrap=True,
        )
    if output is None:
        sys.stdout.write(data.decode())
        return
    write_file(output, data)
    console.print(f"wrote {output} ({fmt}, {len(data) // 1024} KiB)", highlight=False, soft_wrap=True)
