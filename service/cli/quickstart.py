"""CLI: ``ssdpredict quickstart``, the main job that ``make run`` runs.

Sweep a scratch file in the data directory with the quick plan, train, print the accuracy
table, then serve the API. Each step reuses what is already there: a finished identical
sweep is not measured again, and a model trained on the same sweeps is not retrained.
"""

from __future__ import annotations

import json

import typer
from rich.table import Table

from modeling.workload import METRICS, Workload
from service.cli.common import console, datadir, handle_errors, progress_bar
from service.config import get_settings


def register(app: typer.Typer) -> None:
    """Add ``quickstart``."""
    app.command("quickstart")(quickstart)


@handle_errors
def quickstart(
    device: str = typer.Option("local-scratch", help="device name for the scratch file"),
    size: str = typer.Option("256MiB", help="scratch file size"),
    runtime: str = typer.Option("1s", help="fio runtime per point"),
    plan_name: str = typer.Option("quick", "--plan", help="plan preset or .toml plan file"),
    folds: int = typer.Option(5, min=2, max=20, help="cross-validation folds"),
    time_budget: float = typer.Option(60.0, min=1.0, help="seconds for model tuning"),
    host: str = typer.Option("127.0.0.1", help="address to serve on"),
    port: int = typer.Option(8000, help="port to serve on"),
    serve: bool = typer.Option(True, "--serve/--no-serve", help="start the API at the end"),
) -> None:
    """Sweep a local scratch file, train, report accuracy and serve the API."""
    # Imported here so that `ssdpredict --help` does not pay for scikit-learn and xgboost.
    import uvicorn

    from collectors.plans import build_plan
    from collectors.sweep import SweepSettings, run_sweep
    from modeling.training.evaluate import evaluate_device
    from modeling.training.train import train_device

    data = datadir()
    target = data.scratch_dir / f"{device}.img"
    data.scratch_dir.mkdir(parents=True, exist_ok=True)
    console.print(f"data directory: {data.root}")

    plan = build_plan(plan_name)
    console.rule(f"[bold]1/3 sweep[/] {len(plan.points)} points on {target}")
    settings = SweepSettings(target=str(target), runtime=runtime, size=size)
    with progress_bar() as bar:
        task = bar.add_task("sweep", total=len(plan.points))

        def advance(done: int, total: int, workload: Workload) -> None:
            bar.update(task, completed=done, total=total)

        sweep = run_sweep(
            data, device, plan, settings,
            device_class="ssd",
            metadata={"kind": "scratch file", "target": str(target)},
            progress=advance,
        )
    console.print(f"sweep {sweep.id}: {sweep.n_points} points stored")

    console.rule("[bold]2/3 train[/]")
    catalog = data.catalog
    sweep_ids = sorted(s.id for s in catalog.list_sweeps(device) if s.status == "complete")
    active = catalog.active_model_version(device)
    if active is not None and sorted(active.manifest.get("data", {}).get("sweep_ids", [])) == sweep_ids:
        console.print(f"model {active.version} is already trained on these sweeps; reusing it")
        version = active.version
    else:
        trained = train_device(
            data, device, folds=folds, time_budget_s=time_budget,
            progress=lambda msg, frac: console.print(f"  {msg}"),
        )
        version = trained.version
        console.print(f"trained and activated model {version}")

    console.rule(f"[bold]3/3 accuracy[/] ({folds}-fold cross-validation, held-out points)")
    report = evaluate_device(data, device, folds=folds, time_budget_s=time_budget).to_dict()
    table = Table("metric", "mean relative error", "points")
    for metric in METRICS:
        stats = report["metrics"].get(metric)
        if stats:
            table.add_row(metric, f"{100 * stats['mre']:.1f} %", str(stats["n"]))
    console.print(table)
    noise = report.get("noise_floor")
    if noise:
        console.print(f"repeat noise floor: {json.dumps(noise)}")

    if not serve:
        return
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

