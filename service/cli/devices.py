"""CLI: ``ssdpredict devices`` (list) and ``ssdpredict devices show NAME``."""

from __future__ import annotations

from typing import Annotated

import typer
from collectors.devices import describe_device, describe_devices
from service.cli.common import JsonOption, cli_table, console, datadir, handle_errors, print_json

devices_app = typer.Typer(
    invoke_without_command=True,
    help="List the known devices, or show one device's sweeps.",
)


def register(app: typer.Typer) -> None:
    """Add ``devices`` (a listing by itself, ``devices show NAME`` for one device)."""
    app.add_typer(devices_app, name="devices")


def _meta_text(metadata: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(metadata.items()))


@devices_app.callback()
@handle_errors
def devices(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """List the known devices with their class, metadata, sweeps, points and active model."""
    if ctx.invoked_subcommand is not None:
        return
    rows = describe_devices(datadir().catalog)
    if json_output:
        print_json({"devices": rows})
        return
    if not rows:
        console.print("no devices yet: run `ssdpredict sweep` or `ssdpredict ingest` first")
        return
    table = cli_table("device", "class", "sweeps", "points", "active model", "metadata",
                      ids=("device", "active model"))
    for r in rows:
        sweeps = str(r["sweeps"])
        if r["incomplete_sweeps"]:
            sweeps += f" (+{r['incomplete_sweeps']} unfinished)"
        table.add_row(
            r["name"], r["class"], sweeps, str(r["points"]), r["active_model"] or "-",
            _meta_text(r["metadata"]),
        )
    console.print(table)


@devices_app.command("show")
@handle_errors
def show(
    name: Annotated[str, typer.Argument(help="device name")],
    json_output: JsonOption = False,
) -> None:
    """Show one device: class, metadata and every sweep with its point count."""
    info = describe_device(datadir().catalog, name, with_sweeps=True)
    if json_output:
        print_json(info)
        return
    console.print(
        f"{info['name']}: class {info['class']}, {info['points']} points in {info['sweeps']} complete "
        f"sweeps, active model {info['active_model'] or '-'}",
        highlight=False,
    )
    if info["metadata"]:
        console.print(f"metadata: {_meta_text(info['metadata'])}", highlight=False)
    table = cli_table("sweep", "source", "status", "points", "planned", "target", "finished", ids=("sweep",))
    for s in info["sweep_list"]:
        table.add_row(
            str(s["id"]), s["source"], s["status"], str(s["points"]), str(s["planned"]),
            s["target"] or "-", s["finished_at"] or "-",
        )
    console.print(table)
