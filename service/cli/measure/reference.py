"""CLI: ``ssdpredict reference create | list | destroy`` -- a reference block device.

Kinds: zram, a loop device over tmpfs, a file, or zram under the block throttle (``throttled``).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from service.cli.common import console, datadir, handle_errors
from service.cli.options import SizeOption

reference_app = typer.Typer(
    help="A reference device every machine has (zram, else a loop device over tmpfs, else a file).",
    no_args_is_help=True,
)


@reference_app.command("create")
@handle_errors
def create_cmd(
    kind: Annotated[str, typer.Option("--kind", help="auto, zram, loop, file or throttled")] = "auto",
    size: SizeOption = "256MiB",
    iops: Annotated[Optional[int], typer.Option(
        "--iops", help="with --kind throttled: the cap, N reads/s and N writes/s (a cloud volume's)")] = None,
) -> None:
    """Make a reference device and print its path."""
    from collectors.devices.reference import create_reference
    from modeling.units import parse_size

    ref = create_reference(datadir(), kind, parse_size(size), iops)
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
