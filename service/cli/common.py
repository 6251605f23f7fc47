"""Helpers shared by the CLI command modules: data directory, errors, output."""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from modeling.errors import InvalidInput, SsdPredictError
from modeling.store import DataDir
from modeling.store.files.atomic import atomic_write_bytes
from service.config import get_settings

# the shared options live in service.cli.options; these four are re-exported for older imports
from service.cli.options import DeviceOption as DeviceOption, JsonOption as JsonOption
from service.cli.options import WaitOption as WaitOption, YesOption as YesOption

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

METRIC_LABELS = {
    "latency_mean_us": "mean latency",
    "latency_p99_us": "p99 latency",
    "bandwidth_mib_s": "bandwidth",
    "iops": "IOPS",
}
"""Short column headers of the metrics, for tables that must fit 80 columns."""


def datadir() -> DataDir:
    """The data directory named by the settings (``SSDPREDICT_HOME``)."""
    return DataDir(get_settings().home)


def write_file(path: Path, data: bytes) -> None:
    """Write an output file atomically; a path that cannot be written is a one-line error."""
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None


def waiting(message: str) -> None:
    """Say on stderr that a command waits for another writer of the device (``--wait``)."""
    err_console.print(message, highlight=False, soft_wrap=True)


def validation_message(exc: ValidationError) -> str:
    """One line naming each invalid field (a setting by its environment variable) and why."""
    settings = exc.title == "Settings"
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
        if settings and loc:
            loc = f"SSDPREDICT_{loc.upper()}"
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    what = {"Settings": "invalid setting", "Workload": "invalid workload"}.get(exc.title, "invalid input")
    return f"{what}: " + "; ".join(parts)


def handle_errors(func: F) -> F:
    """Turn domain errors into a one-line message on stderr and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SsdPredictError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except ValidationError as exc:
            message = validation_message(exc)
            err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except PermissionError as exc:  # e.g. a data directory of another user
            where = f" on {exc.filename}" if exc.filename else ""
            message = f"permission denied{where}"
            err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err_console.print("interrupted; run the same command again to resume", highlight=False)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def progress_bar(*, fraction: bool = False, quiet: bool = False) -> Progress:
    """The progress bar of long commands, on stderr so that stdout stays machine-readable.

    ``fraction``: the task's total is 1.0 and the bar shows a percentage; otherwise it
    counts steps (``3/48``) and estimates the time left.
    """
    columns = (
        [TextColumn("{task.percentage:>3.0f}%")]
        if fraction
        else [TextColumn("{task.completed}/{task.total}"), TextColumn("ETA"), TimeRemainingColumn()]
    )
    return Progress(
        TextColumn("{task.description:<32}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet,
    )


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (NaN and infinities become null)."""
    sys.stdout.write(json.dumps(_clean(data), indent=2, default=str) + "\n")


def cli_table(*columns: str, ids: tuple[str, ...] = (), **options: Any) -> Table:
    """A rich table that never cuts a value short on a narrow terminal.

    The ``ids`` columns (device names, model versions) keep every value on one line, so
    it can be copied into the next command; the other columns wrap instead of ending in
    an ellipsis.
    """
    table = Table(**options)
    for name in columns:
        if name in ids:
            table.add_column(name, no_wrap=True)
        else:
            table.add_column(name, overflow="fold")
    return table
