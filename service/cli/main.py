"""Entry point of the ``ssdpredict`` command: one Typer app, commands registered per module."""

from __future__ import annotations

import typer

from service.cli import (
    catalog, devices, export, ingest, models, quickstart, reference, report, serve, sweep, traces,
)

app = typer.Typer(
    name="ssdpredict",
    help="Black-box SSD performance prediction: sweep a device with fio, train models, predict.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root() -> None:
    """Black-box SSD performance prediction: sweep a device with fio, train models, predict."""


for module in (sweep, ingest, devices, models, report, export, traces, reference, serve, quickstart, catalog):
    module.register(app)


def main() -> None:
    """Run the CLI."""
    app()


if __name__ == "__main__":
    main()
