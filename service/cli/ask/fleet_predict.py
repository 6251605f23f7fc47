"""CLI: ``predict --all-devices`` / ``--devices a,b,ssd-*``: rank the devices for each workload."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from modeling.errors import InvalidInput
from modeling.workload import METRICS, Workload, format_size
from service.cli.common import METRIC_LABELS, cli_table, console, datadir, err_console

if TYPE_CHECKING:
    import pandas as pd

    from modeling.serving.fleet_rank import FleetRanking
    from service.cli.learn.fleet import FleetRun

RankByOption = Annotated[
    str | None,
    typer.Option(
        "--rank-by",
        help="with many devices: the metric to rank them by (default latency_p99_us; iops and "
        "bandwidth_mib_s: higher is better, latencies: lower)",
    ),
]
TopOption = Annotated[
    int | None, typer.Option("--top", min=1, help="with many devices: keep each workload's best N")
]

_TABLE_ORDER = ("iops", "bandwidth_mib_s", "latency_mean_us", "latency_p99_us")
_HEADERS = {
    "iops": "IOPS", "bandwidth_mib_s": "MiB/s", "latency_mean_us": "mean us", "latency_p99_us": "p99 us"
}
assert set(_TABLE_ORDER) == set(METRICS)

MAX_TABLE_ROWS = 2_000
"""A table longer than this is refused (use -o or --json): rich would take minutes to draw it."""


def predict_many(
    run: FleetRun,
    *,
    workload: Workload | None,
    input_csv: Path | None,
    output: Path | None,
    model: str,
    rank_by: str | None,
    top: int | None,
) -> None:
    """Rank the named devices for one workload or every row of a CSV; table, JSON or CSV."""
    import pandas as pd

    from modeling.serving.fleet_rank import rank_csv, rank_devices
    from modeling.serving.registry import ModelRegistry
    from modeling.store.device_selection import select_devices

    data = datadir()
    devices = select_devices(data, run.patterns, all_devices=run.all_devices)
    how = {"rank_by": rank_by or "latency_p99_us", "model": model}
    if input_csv is not None:
        frame, ranking = rank_csv(data, devices, input_csv, top=top, **how)
    else:
        assert workload is not None
        frame = pd.DataFrame([workload.as_row()])
        ranking = rank_devices(ModelRegistry(data), devices, {c: frame[c] for c in frame}, top=top, **how)
    if run.json_output:
        import orjson

        doc = orjson.dumps(ranking.as_json(), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2)
        sys.stdout.buffer.write(doc + b"\n")
        sys.stdout.flush()
    elif output is not None:
        rows = ranking.frame(frame)
        rows.to_csv(output, index=False)
        console.print(
            f"wrote {len(rows)} rows ({ranking.count} workloads x {ranking.order.shape[1]} devices,"
            f" best first by {ranking.rank_by}) to {output}",
            highlight=False,
        )
    else:
        _print_table(ranking, frame)
    for s in ranking.skipped:
        err_console.print(f"[yellow]skipped:[/] {s.device}: {s.reason}", highlight=False, soft_wrap=True)


def _print_table(ranking: FleetRanking, frame: pd.DataFrame) -> None:
    """One table per workload (titled with it), its devices best first."""
    n, k = ranking.order.shape
    if n * k > MAX_TABLE_ROWS:
        raise InvalidInput(
            f"{n * k} rows ({n} workloads x {k} devices) are too many for a table:"
            " write them with -o FILE.csv or --json, or keep the best few with --top N"
        )
    better = "higher" if ranking.higher_is_better else "lower"
    console.print(
        f"devices ranked by {METRIC_LABELS[ranking.rank_by]} ({better} is better);"
        " 90% intervals below the values",
        highlight=False,
    )
    metrics = [m for m in _TABLE_ORDER if any(m in f.predictions for f in ranking.forecasts)]
    rows = ranking.frame()
    flags = [f"{m}_extrapolated" for m in metrics]
    extrapolated = rows[flags].fillna(False).astype(bool).any(axis=1).to_numpy()
    note = ("note",) if extrapolated.any() else ()  # a column only when some value is extrapolated
    for i in range(n):
        table = cli_table(
            "#", "device", "version", *(_HEADERS[m] for m in metrics), *note,
            ids=("device", "version"), title=(f"{i + 1}: " if n > 1 else "") + _label(frame.iloc[i]),
        )
        for j, r in enumerate(rows.iloc[i * k:(i + 1) * k].itertuples(index=False), start=i * k):
            table.add_row(
                str(r.rank), str(r.device), str(r.model_version),
                *(_cell(getattr(r, f"pred_{m}"), getattr(r, f"pred_{m}_lower"), getattr(r, f"pred_{m}_upper"))
                  for m in metrics),
                *(("[yellow]extrapolated[/]" if extrapolated[j] else "",) if note else ()),
            )
        console.print(table)


def _cell(value: float, lower: float, upper: float) -> str:
    if value != value:  # NaN: the device's model lacks this metric
        return "-"
    if lower != lower:
        return _number(value)
    return f"{_number(value)}\n{_number(lower)}-{_number(upper)}"


def _number(value: float) -> str:
    """Three significant digits or so: the table is read, the CSV and JSON hold every digit."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.0f}k"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _label(row: pd.Series) -> str:
    """A workload in a few words: writes, queue depth x jobs, size, randomness."""
    jobs = row.get("numjobs")
    jobs = 1 if jobs is None or jobs != jobs else int(jobs)  # absent or NaN: the default
    return (
        f"{row['write_ratio']:.0%} writes, QD{int(row['queue_depth'])}x{jobs},"
        f" {format_size(int(row['request_size']))}, {row['randomness']:.0%} random"
    )
