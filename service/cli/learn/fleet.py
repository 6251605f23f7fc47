"""CLI: ``train`` and ``evaluate`` of many devices (``--all``, ``--devices a,b,c`` or globs) on Dask."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from modeling.errors import InvalidInput
from modeling.workload import METRICS
from service.cli.common import console, datadir, err_console, print_json, progress_bar
from service.config import get_settings

if TYPE_CHECKING:  # modeling.training.fleet imports the training stack: only commands that train pay for it
    from modeling.training.fleet import DeviceResult, FleetReport


@dataclass(frozen=True)
class FleetRun:
    """A many-device run: which devices (names or globs, or ``--all``), where, and how to print."""

    patterns: list[str]
    all_devices: bool
    scheduler: str | None
    workers: int | None
    json_output: bool


def fleet_request(
    device: str | None,
    devices: str | None,
    all_devices: bool,
    scheduler: str | None,
    workers: int | None,
    json_output: bool,
) -> FleetRun | None:
    """The many-device run named by the options, or None for the single ``--device``."""
    if sum([device is not None, devices is not None, all_devices]) != 1:
        raise InvalidInput("name exactly one of --device NAME, --devices A,B,GLOB* or --all")
    if device is not None:
        return None
    patterns = [d.strip() for d in (devices or "").split(",") if d.strip()]
    return FleetRun(patterns, all_devices, scheduler, workers, json_output)


def fit_options(features: str, candidates: str | None) -> dict[str, Any]:
    """Training options from ``--features`` and ``--candidates`` (kinds: an untuned, fast training)."""
    from modeling.features import feature_choice
    from modeling.training.selection import candidates_of_kinds

    feature_sets = feature_choice(features)
    if candidates is None:
        return {"feature_sets": feature_sets}
    kinds = [k.strip() for k in candidates.split(",") if k.strip()]
    return {"feature_sets": feature_sets, "candidates": candidates_of_kinds(kinds, feature_sets)}


def train_many(run: FleetRun, *, activate: bool, **fit_kw: Any) -> None:
    """Train the run's devices on Dask; exit status 1 when any failed."""
    from modeling.training.fleet import train_fleet

    report = _run(
        run,
        "training",
        lambda data, devices, client, progress: train_fleet(
            data, devices, client, activate=activate, progress=progress, **fit_kw
        ),
    )
    if run.json_output:
        print_json(
            {
                **_summary(report),
                "succeeded": [
                    {
                        "device": r.device,
                        "version": r.value.version,
                        "active": r.value.active,
                        "seconds": r.seconds,
                        "cv_mre": r.value.manifest.get("cv_mre", {}),
                    }
                    for r in report.succeeded
                ],
                "failed": [{"device": r.device, "error": r.error} for r in report.failed],
            }
        )
    else:
        table = Table("device", "version", "seconds", *METRICS, title="trained")
        for r in sorted(report.succeeded, key=lambda r: r.device):
            cv = r.value.manifest.get("cv_mre", {})
            table.add_row(
                r.device,
                r.value.version + (" *" if r.value.active else ""),
                f"{r.seconds:.1f}",
                *(f"{cv[m]:.2%}" if cv.get(m) is not None else "-" for m in METRICS),
            )
        if report.succeeded:
            console.print(table)
        _print_rate(report, "trained")
    _exit_on_failures(report)


def evaluate_many(run: FleetRun, **evaluate_kw: Any) -> None:
    """Evaluate the run's devices on Dask; exit status 1 when any failed."""
    from modeling.training.fleet import evaluate_fleet

    report = _run(
        run,
        "evaluating",
        lambda data, devices, client, progress: evaluate_fleet(
            data, devices, client, progress=progress, **evaluate_kw
        ),
    )
    if run.json_output:
        print_json(
            {
                **_summary(report),
                "reports": {r.device: r.value for r in report.succeeded},
                "failed": [{"device": r.device, "error": r.error} for r in report.failed],
            }
        )
    else:
        table = Table("device", "n", *METRICS, title="nested cross-validated MRE")
        for r in sorted(report.succeeded, key=lambda r: r.device):
            metrics = r.value["metrics"]
            table.add_row(
                r.device,
                str(r.value["n"]),
                *(f"{metrics[m]['mre']:.2%}" if m in metrics else "-" for m in METRICS),
            )
        if report.succeeded:
            console.print(table)
        _print_rate(report, "evaluated")
    _exit_on_failures(report)


def _run(run: FleetRun, verb: str, work: Any) -> FleetReport:
    """``work(data, devices, client, progress)`` on the run's devices and Dask client."""
    from modeling.training.fleet import dask_client, select_devices

    data = datadir()
    devices = select_devices(data, run.patterns, all_devices=run.all_devices)
    settings = get_settings()
    address = run.scheduler or settings.scheduler
    workers = run.workers or settings.fleet_workers
    where = address or f"a local cluster of {workers or 'one worker per core'}"
    err_console.print(f"{verb} {len(devices)} devices on {where}", highlight=False)
    with dask_client(address, workers=workers) as client, progress_bar() as bar:
        task = bar.add_task(verb, total=len(devices))

        def progress(result: DeviceResult, done: int, total: int) -> None:
            bar.update(
                task, completed=done, description=f"{result.device} {'ok' if result.ok else 'FAILED'}"[:32]
            )

        report: FleetReport = work(data, devices, client, progress)
    return report


def _summary(report: FleetReport) -> dict[str, Any]:
    return {
        "devices": len(report.results),
        "workers": report.workers,
        "seconds": round(report.seconds, 3),
        "devices_per_minute": round(_rate(report), 2),
    }


def _rate(report: FleetReport) -> float:
    return 60.0 * len(report.succeeded) / report.seconds if report.seconds > 0 else 0.0


def _print_rate(report: FleetReport, verb: str) -> None:
    console.print(
        f"{verb} {len(report.succeeded)}/{len(report.results)} devices in {report.seconds:.1f} s"
        f" on {report.workers} workers ({_rate(report):.1f} devices/min)"
    )


def _exit_on_failures(report: FleetReport) -> None:
    for r in sorted(report.failed, key=lambda r: r.device):
        err_console.print(f"[bold red]failed:[/] {r.device}: {r.error}", highlight=False, soft_wrap=True)
    if report.failed:
        raise typer.Exit(1)
