"""What the trace commands share: the window length, and writing a window table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from service.cli.common import console, print_json

if TYPE_CHECKING:
    from traces.predict.windows import TracePrediction


def seconds(text: str) -> float:
    """Seconds from a positive duration ('10s', '500ms', '2m'; see :mod:`modeling.units`)."""
    from modeling.errors import InvalidInput
    from modeling.units import parse_duration as seconds_of

    value = seconds_of(text)
    if not value > 0:
        raise InvalidInput(f"duration must be positive: {text!r}")
    return value


def emit(result: TracePrediction, output: Path | None, json_out: bool, label: str) -> bool:
    """Write the window table (``-o``), then print the JSON (True: nothing more to print) or the warnings."""
    if output is not None:
        result.windows.to_csv(output, index=False)
    if json_out:
        print_json(result.to_dict())
        return True
    for w in result.warnings:
        console.print(f"[yellow]{label}:[/] {w}", highlight=False)
    return False
