"""CLI: ``ssdpredict quickstart``, the main job that ``make run`` runs.

Sweep a scratch file in the data directory with the quick plan, train, print the accuracy
table, then serve the API; the steps are :mod:`collectors.quickstart`'s, and each reuses
what is already there.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from modeling.store import DataDir
from modeling.workload import METRICS
from service.cli.common import cli_table, console, datadir, handle_errors, progress_bar
from service.cli.options import (
    BindHostOption,
    BindPortOption,
    DeviceOption,
    FoldsOption,
    PlanNameOption,
    RuntimeOption,
    SizeOption,
    TimeBudgetOption,
)
from service.config import get_settings


def register(app: typer.Typer) -> None:
    """Add ``quickstart``."""
    app.command("quickstart")(quickstart)


@handle_errors
def quickstart(
    device: DeviceOption = "local-scratch",
    size: SizeOption = "256MiB",
    runtime: RuntimeOption = "1s",
    plan_name: PlanNameOption = "quick",
    folds: FoldsOption = 5,
    time_budget: TimeBudgetOption = 60.0,
    host: BindHostOption = "127.0.0.1",
    port: BindPortOption = 8000,
    serve: Annotated[bool, typer.Option("--serve/--no-serve", help="start the API at the end")] = True,
) -> None:
    """Sweep a local scratch file, train, report accuracy and serve the API."""
    data = datadir()
    console.print(f"data directory: {data.root}")
    _sweep_step(data, device, plan_name, size=size, runtime=runtime)
    version = _train_step(data, device, folds=folds, time_budget=time_budget)
    _accuracy_step(data, device, version)
    if serve:
        _serve_step(device, host, port)


def _sweep_step(data: DataDir, device: str, plan_name: str, *, size: str, runtime: str) -> None:
    # Imported here so that `ssdpredict --help` does not pay for scikit-learn and xgboost.
    from collectors.plans.presets import build_plan
    from collectors.quickstart import scratch_settings, sweep_scratch
    from service.cli.progress import sweep_progress

    settings = scratch_settings(data, device, size=size, runtime=runtime, fio=get_settings().fio)
    plan = build_plan(plan_name)
    console.rule(f"[bold]1/3 sweep[/] {len(plan.points)} points on {settings.target}")
    with progress_bar() as bar:
        sweep = sweep_scratch(data, device, plan, settings, progress=sweep_progress(bar, len(plan.points)))
    console.print(f"sweep {sweep.id}: {sweep.n_points} points stored")


def _train_step(data: DataDir, device: str, *, folds: int, time_budget: float) -> str:
    from collectors.quickstart import train_unless_current

    console.rule("[bold]2/3 train[/]")
    version, reused = train_unless_current(data, device, folds=folds, time_budget_s=time_budget,
                                           progress=lambda msg, frac: console.print(f"  {msg}"))
    if reused:
        console.print(f"model {version} is already trained on these sweeps; reusing it")
    else:
        console.print(f"trained and activated model {version}")
    return version


def _accuracy_step(data: DataDir, device: str, version: str) -> None:
    """The model version's stored evaluation: the same numbers ``models list`` and the API show."""
    mv = data.catalog.get_model_version(device, version)
    evaluation = mv.manifest.get("evaluation")
    console.rule("[bold]3/3 accuracy[/]")
    table = cli_table("metric", "mean relative error", "median", "p90", "R²", "workloads", ids=("metric",),
                      title=f"{device} {version}")
    if evaluation:
        for metric in METRICS:
            e = evaluation["metrics"].get(metric)
            if e:
                table.add_row(metric, f"{e['mre']:.1%}", f"{e['median_re']:.1%}", f"{e['p90_re']:.1%}",
                              f"{e['r2']:.3f}" if e.get("r2") is not None else "-", str(e["n"]))
        console.print(table)
        console.print(f"{evaluation['method']}.", highlight=False)
    else:  # a version trained before evaluations were stored: its cross-validated MRE only
        for metric, mre in mv.manifest.get("cv_mre", {}).items():
            table.add_row(metric, "-" if mre is None else f"{mre:.1%}", "-", "-", "-", "-")
        console.print(table)
    console.print(f"`ssdpredict evaluate --device {device}` reruns the whole training inside each fold "
                  "(nested cross-validation, minutes) for an estimate untouched by the model choice.",
                  highlight=False)
    noise = evaluation.get("noise_floor") if evaluation else None
    if noise:
        floor = ", ".join(f"{m} {noise[m]['cv']:.1%}" for m in METRICS if m in noise)
        console.print(f"repeat noise floor (CV between repeats): {floor}", highlight=False)


def _serve_step(device: str, host: str, port: int) -> None:
    import uvicorn

    token = get_settings().api_token
    console.rule("[bold]serving[/]")
    console.print(
        "API token: "
        + ("in force (mutating endpoints need 'Authorization: Bearer ...')" if token else "none set")
    )
    body = json.dumps(
        {"device": device,
         "workload": {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1}}
    )
    console.print("try:", style="bold")
    console.print(
        f"curl -s http://{host}:{port}/v1/predict -H 'content-type: application/json' -d '{body}'",
        soft_wrap=True, highlight=False,
    )
    console.print(f"docs: http://{host}:{port}/docs   (Ctrl-C stops the service)")
    uvicorn.run("service.api.main:app", host=host, port=port, log_level="info")
