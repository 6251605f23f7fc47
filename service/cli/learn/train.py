"""CLI: ``ssdpredict train`` -- fit one model per metric and register a new model version."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from service.cli.common import console, datadir, handle_errors, print_json, progress_bar, waiting
from service.cli.learn.fleet import fit_options, fleet_request, train_many
from service.cli.learn.models import print_manifest_summary
from service.cli.learn.whatif import calibrate_whatif
from service.cli.options import (
    AllDevicesOption,
    CandidatesOption,
    DevicesOption,
    FeaturesOption,
    FoldsOption,
    JsonOption,
    OptionalDeviceOption,
    ReferenceOption,
    SchedulerOption,
    TimeBudgetOption,
    WaitOption,
    WorkersOption,
)

ActivateOption = Annotated[bool | None, typer.Option(
    "--activate/--no-activate",
    help="activate even if its CV error is worse than the active version's / register without "
    "activating (default: activate unless worse beyond noise)")]


def register(app: typer.Typer) -> None:
    """Add ``train``."""
    app.command("train")(train)


@handle_errors
def train(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    folds: FoldsOption = 5,
    time_budget: TimeBudgetOption = 60.0,
    features: FeaturesOption = "extended",
    candidates: CandidatesOption = None,
    activate: ActivateOption = None,
    wait: WaitOption = False,
    json_output: JsonOption = False,
    reference: ReferenceOption = None,
) -> None:
    """Train one model per metric (and per region) and register a new model version.

    With --all or --devices the devices train in parallel on Dask, one task per device; a
    device that fails is reported at the end (exit status 1) and the others go on.
    """
    from modeling.training.train import train_device

    if reference is not None and device is not None and calibrate_whatif(device, reference, json_output):
        return  # a what-if reference: calibrated on this device's points, nothing trained
    fit_kw = fit_options(features, candidates)
    options: dict[str, Any] = dict(activate=activate is not False, force_activate=activate is True,
                                   folds=folds, time_budget_s=time_budget, wait=wait, on_wait=waiting,
                                   reference=reference)
    fleet = fleet_request(device, devices, all_devices, scheduler, workers, json_output)
    if fleet is not None:
        train_many(fleet, **options, **fit_kw)
        return
    assert device is not None
    with progress_bar(fraction=True) as bar:
        task = bar.add_task("training", total=1.0)
        mv = train_device(datadir(), device, **options, **fit_kw,
                          progress=lambda msg, frac: bar.update(task, completed=frac, description=msg[:70]))
    if json_output:
        print_json({"device": mv.device, "version": mv.version, "active": mv.active, "manifest": mv.manifest})
        return
    console.print(
        f"trained [bold]{mv.device}[/] version [bold]{mv.version}[/]{' (active)' if mv.active else ''}"
    )
    print_manifest_summary(mv.manifest)
    _print_transfer(mv.manifest)
    _print_activation(mv.manifest)


def _print_transfer(manifest: dict[str, Any]) -> None:
    t = manifest.get("transfer")
    if not t:
        return
    ref, scratch = t["reference"], t.get("scratch_cv_mre")
    scratch_txt = "n/a (too few points)" if scratch is None else f"{scratch:.1%}"
    console.print(
        f"reference {ref['device']} version {ref['version']}: kept [bold]{t['chosen']}[/] "
        f"({t['metric']} {t['cv']} MRE: transfer {t['transfer_cv_mre']:.1%}, from scratch {scratch_txt})"
    )


def _print_activation(manifest: dict[str, Any]) -> None:
    decision = manifest.get("activation") or {}
    previous = decision.get("previous")
    for metric, e in (decision.get("worse") or {}).items():
        new = "missing" if e["new"] is None else f"{e['new']:.2%}"
        margin = "" if e["margin"] is None else f" (noise margin {e['margin']:.2%})"
        console.print(f"  {metric}: CV MRE {new} here vs {e['active']:.2%} in active {previous}{margin}",
                      highlight=False)
    if decision.get("activated"):
        console.print(f"activated: {decision.get('reason')}", highlight=False)
    elif previous is not None and decision.get("worse"):
        console.print(f"[yellow]not activated[/]: {decision.get('reason')}; {previous} stays active "
                      "(use --activate to activate it anyway)", highlight=False)
    elif decision:
        console.print(f"not activated: {decision.get('reason')}", highlight=False)
    missing = manifest.get("missing_metrics") or []
    if missing:
        console.print(f"not trained (no data): {', '.join(missing)}", highlight=False)
