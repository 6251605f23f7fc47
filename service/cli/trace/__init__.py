"""CLI room ``trace``: block traces -- characterise, capture, predict, replay and validate.

Each command lives in its own module; this package builds the ``trace`` group from them.
"""

from __future__ import annotations

import typer

from service.cli.trace import capture, characterize, predict, replay, validate

trace_app = typer.Typer(
    help="Block traces: characterise, capture, replay and validate.", no_args_is_help=True
)
trace_app.command("characterize")(characterize.characterize_cmd)
trace_app.command("capture")(capture.capture_cmd)
trace_app.command("replay")(replay.replay_cmd)
trace_app.command("validate")(validate.validate_cmd)
trace_app.command("predict")(predict.predict_cmd)


def register(app: typer.Typer) -> None:
    """Add the ``trace`` group."""
    app.add_typer(trace_app, name="trace")
