"""CLI: ``ssdpredict reference create | list | destroy`` -- a reference block device (zram, loop, file)."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import console, datadir, handle_errors

reference_app = typer.Typer(
    help="A reference device every machine has (zram, else a loop device over tmpfs, else a file).",
    no_args_is_help=True,
)


@reference_app.command("create")
@handle_errors
def create_cmd(
    kind: Annotated[str, typer.Option("--kind", help="auto, zram, loop or file")] = "auto",
    size: Annotated[str, typer.Option("--size", help="e.g. 256MiB")] = "256MiB",
) -> None:
    """Make a reference device and print its path."""
    from collectors.devices.reference import create_reference
    from collectors.sweep.settings import size_option

    ref = create_reference(datadir(), kind, size_option(size))
    sectors = f"{ref.logical_block_size}-byte sectors"
    console.print(f"{ref.path} ({ref.kind}, {ref.size} bytes, {sectors}): {ref.note}", highlight=False)


@reference_app.command("list")
@handle_errors
def list_cmd() -> None:
    """The reference devices made here and not yet destroyed."""
    from collectors.devices.reference import list_references

    for ref in list_references(datadir()):
        console.print(f"{ref.path} ({ref.kind}, {ref.size} bytes): {ref.note}", highlight=False)


@reference_app.command("destroy")
@handle_errors
def destroy_cmd(path: Annotated[str, typer.Argument(help="the device path `create` printed")]) -> None:
    """Remove a reference device made by `create` (and only those)."""
    from collectors.devices.reference import destroy_reference

    ref = destroy_reference(datadir(), path)
    console.print(f"removed {ref.path} ({ref.kind})", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(reference_app, name="reference")
