"""CLI: ``ssdpredict trace characterize`` -- a trace's workload vector per window, and its tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box

from service.cli.common import cli_table, console, handle_errors, print_json
from service.cli.options import (
    FormatOption,
    JsonOption,
    OutputOption,
    WindowOption,
    WindowRequestsOption,
)
from service.cli.trace.common import seconds

if TYPE_CHECKING:
    import pandas as pd
    from rich.table import Table


@handle_errors
def characterize_cmd(
    file: Annotated[Path, typer.Argument(help="trace file")],
    fmt: FormatOption = "auto",
    window: WindowOption = "1s",
    window_requests: WindowRequestsOption = None,
    json_out: JsonOption = False,
    output: OutputOption = None,
) -> None:
    """One workload vector per window plus a whole-trace summary (CSV feeds `predict --input`)."""
    from traces.characterize import characterize

    result = characterize(str(file), fmt, window_s=seconds(window), window_requests=window_requests)
    if output is not None:
        result.windows.to_csv(output, index=False)
    if json_out:
        print_json(result.to_dict())
        return
    s = result.summary
    console.print(
        f"{s['format']}: {s['requests']} requests over {s['duration_s']:.3f} s, "
        f"{s['windows']} windows, queue depth by {s['qd_method']}",
        highlight=False,
    )
    console.print(_summary_table(s))
    if output is not None:
        console.print(f"window table written to {output}")
    else:
        console.print(_windows_table(result.windows, max_rows=CHARACTERIZE_ROWS))
        if len(result.windows) > CHARACTERIZE_ROWS:
            console.print(f"... {len(result.windows) - CHARACTERIZE_ROWS} more windows: "
                          "-o FILE.csv or --json gives them all", highlight=False)


CHARACTERIZE_ROWS = 30

_WINDOW_COLUMNS = (
    ("window_start_s", "start s", "{:.1f}"),
    ("requests", "reqs", "{:,.0f}"),
    ("write_ratio", "writes", "{:.0%}"),
    ("queue_depth", "QD", "{:.0f}"),
    ("request_size", "size", None),
    ("randomness", "random", "{:.0%}"),
    ("iops", "IOPS", "{:,.0f}"),
    ("bandwidth_mib_s", "MiB/s", "{:,.1f}"),
    ("latency_mean_us", "mean us", "{:,.0f}"),
    ("latency_p99_us", "p99 us", "{:,.0f}"),
)


def _size_text(size: float) -> str:
    for unit, mult in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= mult:
            value = size / mult
            return f"{value:g} {unit}" if (value * 10).is_integer() else f"{value:.1f} {unit}"
    return f"{size:.0f} B"


def _cell(value: object, fmt: str | None) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if fmt is None:
        return _size_text(float(value))  # type: ignore[arg-type]
    return fmt.format(value)


def _summary_table(summary: dict) -> Table:
    """The whole trace's workload vector and measured metrics, one per row."""
    table = cli_table("trace summary", "value", ids=("trace summary",))
    w, m = summary["workload"], summary["measured"]
    for name, value in w.items():
        size = name.endswith("_size")
        fmt = None if size else ("{:.0f}" if name in ("queue_depth", "numjobs") else "{:.0%}")
        table.add_row(name, _cell(value, fmt))
    for name, fmt in (("iops", "{:,.1f}"), ("bandwidth_mib_s", "{:,.2f}"), ("latency_mean_us", "{:,.1f}"),
                      ("latency_p99_us", "{:,.1f}")):
        table.add_row(f"measured {name}", _cell(m.get(name), fmt))
    return table


def _windows_table(windows: pd.DataFrame, *, max_rows: int) -> Table:
    """The first windows' workload and measured metrics, formatted for reading."""
    shown = [c for c in _WINDOW_COLUMNS if c[0] in windows.columns]
    # no side borders, numbers right-aligned: ten columns fit 80 characters
    table = cli_table(*(header for _, header, _ in shown), title="windows", box=box.SIMPLE_HEAD,
                      show_edge=False, pad_edge=False)
    for column in table.columns:
        column.justify = "right"
    for row in windows.head(max_rows).itertuples(index=False):
        values = row._asdict()
        table.add_row(*(_cell(values[col], fmt) for col, _, fmt in shown))
    return table
