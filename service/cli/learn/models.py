"""CLI: ``ssdpredict models list | show | activate`` -- a device's model versions."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from modeling.errors import NoModel
from modeling.workload import METRICS
from service.cli.common import METRIC_LABELS, cli_table, console, datadir, handle_errors, print_json
from service.cli.options import DeviceOption, JsonOption

models_app = typer.Typer(help="List, inspect and activate (roll back) model versions.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``models`` group."""
    app.add_typer(models_app, name="models")


def print_manifest_summary(manifest: dict[str, Any]) -> None:
    """The manifest's estimator, features and CV error per metric, as a table."""
    table = cli_table("metric", "mode", "estimator", "features", "global CV MRE", "auto regions",
                      ids=("metric",))
    for metric in METRICS:
        m = manifest.get("metrics", {}).get(metric)
        if not m:
            continue
        g = m["global"]
        auto = [r for r, e in m.get("regions", {}).items() if e.get("auto")]
        # the global model's fold-to-fold spread: how much its CV error varies by chance
        spread = f" ± {g['cv_fold_std']:.2%}" if g.get("cv_fold_std") is not None else ""
        table.add_row(
            metric, m["mode"], g["estimator"], g["feature_set"], f"{g['cv_mre']:.2%}{spread}",
            ", ".join(auto) or "-",
        )
    console.print(table)


@models_app.command("list")
@handle_errors
def list_versions(device: DeviceOption, json_output: JsonOption = False) -> None:
    """List a device's model versions."""
    from modeling.serving.registry import ModelRegistry

    versions = ModelRegistry(datadir()).versions(device)
    rows = [
        {
            "version": v.version,
            "active": v.active,
            "created_at": v.created_at,
            "cv_mre": v.manifest.get("cv_mre", {}),
            "n_rows": v.manifest.get("n_rows"),
        }
        for v in versions
    ]
    if json_output:
        print_json({"device": device, "versions": rows})
        return
    if not rows:
        console.print(f"{device} has no model yet: run `ssdpredict train --device {device}`")
        return
    table = cli_table("version", "active", "created", "points", *(METRIC_LABELS[m] for m in METRICS),
                      ids=("version",), title=f"{device}: cross-validated mean relative error per metric")
    for r in rows:
        table.add_row(
            r["version"],
            "*" if r["active"] else "",
            str(r["created_at"])[:16].replace("T", " "),
            str(r["n_rows"]),
            *(f"{r['cv_mre'][m]:.1%}" if r["cv_mre"].get(m) is not None else "-" for m in METRICS),
        )
    console.print(table)


@models_app.command("show")
@handle_errors
def show(
    device: DeviceOption,
    version: Annotated[str | None, typer.Argument(help="version (default: the active one)")] = None,
    json_output: JsonOption = False,
) -> None:
    """Show a model version's manifest: estimators, parameters, data hash, CV errors."""
    catalog = datadir().catalog
    if version is None:
        mv = catalog.active_model_version(device)
        if mv is None:
            raise NoModel(
                f"device {device!r} has no trained model yet; run `ssdpredict train --device {device}`"
            )
    else:
        mv = catalog.get_model_version(device, version)
    if json_output:
        print_json({"device": mv.device, "version": mv.version, "active": mv.active, "manifest": mv.manifest})
        return
    man = mv.manifest
    active = " (active)" if mv.active else ""
    console.print(f"[bold]{mv.device}[/] {mv.version}{active}, created {man.get('created_at')}")
    data = man.get("data", {})
    console.print(
        f"data: {data.get('n_rows')} rows, sweeps {data.get('sweep_ids')}, fio {data.get('fio_versions')},"
        f" sha256 {str(data.get('sha256'))[:16]}..."
    )
    print_manifest_summary(man)
    evaluation = man.get("evaluation")
    if evaluation:
        errors = ", ".join(f"{m} {e['mre']:.1%}" for m, e in evaluation["metrics"].items())
        console.print(f"stored evaluation ({evaluation['method']}): MRE {errors}", highlight=False)


@models_app.command("activate")
@handle_errors
def activate(
    device: DeviceOption,
    version: Annotated[str, typer.Argument(help="version to make active")],
) -> None:
    """Make a model version the active one (rollback or roll forward)."""
    from modeling.serving.registry import ModelRegistry

    mv = ModelRegistry(datadir()).activate(device, version)
    console.print(f"{mv.device}: active model is now {mv.version}")

