"""CLI: ``ssdpredict devices`` (list), ``devices show|delete NAME`` and ``sweeps delete ID``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.measure import Measurement
from rich.table import Table
from collectors.devices import describe_device, describe_devices
from modeling.errors import InvalidInput
from modeling.store.delete import delete_device, delete_sweep
from service.cli.common import cli_table, console, datadir, handle_errors, print_json, waiting
from service.cli.options import JsonOption, WaitOption, YesOption

devices_app = typer.Typer(
    invoke_without_command=True,
    help="List the known devices, or show one device's sweeps.",
)


sweeps_app = typer.Typer(help="Delete a sweep (list them with `ssdpredict devices show NAME`).",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``devices`` (a listing by itself, ``devices show|delete NAME``) and ``sweeps delete ID``."""
    app.add_typer(devices_app, name="devices")
    app.add_typer(sweeps_app, name="sweeps")


META_COLUMN_MIN = 24
"""The narrowest metadata column worth having: narrower, the items go below the table."""


def _meta_items(metadata: dict) -> list[str]:
    """The metadata as ``key=value`` items; a what-if's law and calibration first."""
    items = [f"{k}={v}" for k, v in sorted(metadata.items()) if k != "derived"]
    derived = metadata.get("derived")
    if derived:  # a what-if: its law's parameters, not measurements
        law = ", ".join(f"{k}={v}" for k, v in sorted(derived.items())
                        if k not in ("kind", "base", "calibration") and v is not None)
        calib = derived.get("calibration")
        head = [f"what-if {derived['kind']} of {derived['base']}: {law}"]
        if calib:
            head.append(f"calibrated on {calib['points']} points")
        items = head + items
    return items


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
    cells: list[tuple[str, ...]] = []
    for r in rows:
        sweeps = str(r["sweeps"])
        if r["incomplete_sweeps"]:
            sweeps += f" (+{r['incomplete_sweeps']} unfinished)"
        model = r["active_model"] or ("derived" if r.get("derived") else "-")
        cells.append((r["name"], r["class"], sweeps, str(r["points"]), model))
    meta = {r["name"]: _meta_items(r["metadata"]) for r in rows if r["metadata"]}
    table = _listing(cells)
    if meta and console.width - Measurement.get(console, console.options, table).maximum >= META_COLUMN_MIN:
        # a column of its own, one item a line
        console.print(_listing([(*c, "\n".join(meta.get(c[0], []))) for c in cells], "metadata"))
        return
    console.print(table)  # too narrow for a column that would fold every item: a line per device below
    for name, items in meta.items():
        console.print(f"{name}: {', '.join(items)}", highlight=False)


def _listing(cells: list[tuple[str, ...]], *more: str) -> Table:
    table = cli_table("device", "class", "sweeps", "points", "active model", *more,
                      ids=("device", "active model"))
    for row in cells:
        table.add_row(*row)
    return table


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
        console.print(f"metadata: {', '.join(_meta_items(info['metadata']))}", highlight=False)
    table = cli_table("sweep", "source", "status", "points", "planned", "target", "finished", ids=("sweep",))
    for s in info["sweep_list"]:
        table.add_row(
            str(s["id"]), s["source"], s["status"], str(s["points"]), str(s["planned"]),
            s["target"] or "-", s["finished_at"] or "-",
        )
    console.print(table)


@devices_app.command("delete")
@handle_errors
def delete(
    name: Annotated[str, typer.Argument(help="device name")],
    yes: YesOption = False,
    wait: WaitOption = False,
) -> None:
    """Delete a device: its sweeps, measurements and model versions (files included)."""
    if not yes:
        info = describe_device(datadir().catalog, name)
        raise InvalidInput(
            f"this deletes device {name!r} with {info['sweeps']} sweeps, {info['points']} points and "
            "every model version, files included; run again with --yes"
        )
    gone = delete_device(datadir(), name, wait=wait, on_wait=waiting)
    console.print(f"deleted device {gone.device}: {gone.sweeps} sweeps, {gone.points} points, "
                  f"{gone.models} model versions", highlight=False)


@sweeps_app.command("delete")
@handle_errors
def delete_one_sweep(
    sweep_id: Annotated[int, typer.Argument(help="sweep id (see `ssdpredict devices show NAME`)")],
    yes: YesOption = False,
    wait: WaitOption = False,
) -> None:
    """Delete one sweep: its points and its Parquet file (models trained on it stay)."""
    if not yes:
        sweep = datadir().catalog.get_sweep(sweep_id)
        raise InvalidInput(f"this deletes sweep {sweep_id} ({sweep.n_points} points); run again with --yes")
    gone = delete_sweep(datadir(), sweep_id, wait=wait, on_wait=waiting)
    console.print(f"deleted sweep {sweep_id} of {gone.device}: {gone.points} points", highlight=False)
