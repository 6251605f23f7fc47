"""CLI: ``ssdpredict devices``."""

from __future__ import annotations

import typer
from rich.table import Table

from service.cli.common import console, datadir, handle_errors, print_json


def register(app: typer.Typer) -> None:
    """Add ``devices``."""
    app.command("devices")(devices)


@handle_errors
def devices(json_output: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List the known devices with their class, sweeps, points and active model."""
    catalog = datadir().catalog
    rows = []
    for dev in catalog.list_devices():
        sweeps = catalog.list_sweeps(dev.name)
        active = catalog.active_model_version(dev.name)
        rows.append(
            {
                "name": dev.name,
                "class": dev.device_class,
                "metadata": dev.metadata,
                "sweeps": len(sweeps),
                "points": sum(s.n_points for s in sweeps if s.status == "complete"),
                "incomplete_sweeps": sum(1 for s in sweeps if s.status != "complete"),
                "active_model": active.version if active else None,
            }
        )
    if json_output:
        print_json({"devices": rows})
        return
    if not rows:
        console.print("no devices yet: run `ssdpredict sweep` or `ssdpredict ingest` first")
        return
    table = Table("device", "class", "sweeps", "points", "active model", "metadata")
    for r in rows:
        meta = ", ".join(f"{k}={v}" for k, v in sorted(r["metadata"].items()))
        table.add_row(
            r["name"], r["class"], str(r["sweeps"]), str(r["points"]), r["active_model"] or "-", meta
        )
    console.print(table)
