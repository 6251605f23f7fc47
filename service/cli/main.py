"""Entry point of the ``ssdpredict`` command: one Typer app, each command registered from its room.

The rooms hold the commands by job: ``measure`` (sweep, reference), ``data`` (ingest,
devices, export, catalog), ``learn`` (train, evaluate, models, report), ``ask`` (predict)
and ``trace``; ``serve`` and ``quickstart`` sit beside this file.  A command module has a
``register(app)``; a new command is one line in ``COMMANDS``.  Command modules import their
heavy libraries inside the command, so ``ssdpredict --help`` starts fast.
"""

from __future__ import annotations

import typer

from service.cli import quickstart, serve, trace
from service.cli.ask import capacity, predict
from service.cli.data import catalog, devices, export, ingest
from service.cli.learn import evaluate, models, report, train, whatif
from service.cli.measure import reference, sweep

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


COMMANDS = (
    sweep, ingest, devices, train, evaluate, predict, models, report, export, trace, reference, serve,
    quickstart, catalog, capacity, whatif,
)
"""The command modules, in the order ``ssdpredict --help`` lists them."""

for module in COMMANDS:
    module.register(app)


def main() -> None:
    """Run the CLI."""
    app()


if __name__ == "__main__":
    main()
