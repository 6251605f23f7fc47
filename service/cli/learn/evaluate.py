"""CLI: ``ssdpredict evaluate`` -- cross-validated (or hold-out) errors of a device's models."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modeling.errors import InvalidInput
from modeling.workload import METRICS
from service.cli.common import cli_table, console, datadir, handle_errors, print_json, progress_bar
from service.cli.learn.fleet import evaluate_many, fit_options, fleet_request
from service.cli.options import (
    AllDevicesOption,
    CandidatesOption,
    DevicesOption,
    FeaturesOption,
    FoldsOption,
    JsonOption,
    OptionalDeviceOption,
    SchedulerOption,
    TimeBudgetOption,
    WorkersOption,
)

if TYPE_CHECKING:
    import pandas as pd

HoldoutOption = Annotated[str | None, typer.Option("--holdout", help="CSV of measured workloads to test on")]


def register(app: typer.Typer) -> None:
    """Add ``evaluate``."""
    app.command("evaluate")(evaluate)


@handle_errors
def evaluate(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    folds: FoldsOption = 5,
    holdout: HoldoutOption = None,
    time_budget: TimeBudgetOption = 30.0,
    features: FeaturesOption = "extended",
    candidates: CandidatesOption = None,
    json_output: JsonOption = False,
) -> None:
    """Report cross-validated (or hold-out) errors per metric, basic vs extended, global vs region."""
    from modeling.training.evaluate import evaluate_device

    fit_kw = fit_options(features, candidates)
    fleet = fleet_request(device, devices, all_devices, scheduler, workers, json_output)
    if fleet is not None:
        if holdout is not None:
            raise InvalidInput("--holdout is for one --device; many devices are cross-validated")
        evaluate_many(fleet, folds=folds, time_budget_s=time_budget, **fit_kw)
        return
    assert device is not None
    held = _read_holdout(Path(holdout)) if holdout is not None else None
    with progress_bar(fraction=True) as bar:
        task = bar.add_task("evaluating", total=1.0)
        report = evaluate_device(
            datadir(),
            device,
            folds=folds,
            holdout=held,
            time_budget_s=time_budget,
            progress=lambda msg, frac: bar.update(task, completed=frac, description=msg[:70]),
            **fit_kw,
        ).to_dict()
    if json_output:
        print_json(report)
        return
    _print_report(device, report)


def _print_report(device: str, report: dict[str, Any]) -> None:
    """The errors per metric, per region, and the noise floor, as tables."""
    table = cli_table(
        "metric",
        "MRE",
        "median",
        "p90",
        "R²",
        "coverage",
        "global MRE",
        "basic",
        "extended",
        ids=("metric",),
        title=f"{device}: {report['method']}, n={report['n']}",
    )
    fs = report.get("feature_sets") or {}
    for metric, e in report["metrics"].items():
        table.add_row(
            metric,
            f"{e['mre']:.2%}",
            f"{e['median_re']:.2%}",
            f"{e['p90_re']:.2%}",
            f"{e['r2']:.3f}",
            f"{e['coverage']:.0%}",
            f"{e['mre_global']:.2%}",
            *(f"{fs[s][metric]:.2%}" if s in fs else "-" for s in ("basic", "extended")),
        )
    console.print(table)
    metrics = [m for m in METRICS if m in report["metrics"]]  # the metrics the data has
    if report.get("regions"):
        rt = cli_table("region", "n", *metrics, ids=("region",), title="MRE: global / region model / auto")
        for region, e in report["regions"].items():
            cells = [
                f"{e[m]['global']:.1%} / {'-' if e[m]['region'] is None else format(e[m]['region'], '.1%')}"
                f" / {e[m]['auto']:.1%}"
                for m in metrics
            ]
            rt.add_row(region, str(e["n"]), *cells)
        console.print(rt)
    noise = report.get("noise_floor")
    if noise:
        console.print("noise floor (repeat CV): "
                      + ", ".join(f"{m} {noise[m]['cv']:.1%}" for m in metrics if m in noise))
    else:
        console.print("noise floor: no repeated workloads in the data")


def _read_holdout(path: Path) -> pd.DataFrame:
    """Measured rows of an ingest-format CSV (workload columns plus metric columns)."""
    import pandas as pd

    from collectors.ingest import parse_csv_measurements

    if not path.is_file():
        raise InvalidInput(f"no such file: {path}")
    try:
        return pd.DataFrame(parse_csv_measurements(path))
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from exc
