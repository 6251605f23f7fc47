"""CLI: ``train``, ``evaluate``, ``predict`` and ``models list|show|activate``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modeling.errors import InvalidInput, NoModel
from modeling.store import DataDir
from modeling.workload import BASIC_FIELDS, METRIC_UNITS, METRICS, Workload
from service.cli.common import (
    DeviceOption,
    METRIC_LABELS,
    JsonOption,
    WaitOption,
    cli_table,
    console,
    datadir,
    handle_errors,
    print_json,
    progress_bar,
    waiting,
)
from service.cli.fleet import (
    AllDevicesOption,
    CandidatesOption,
    DevicesOption,
    OptionalDeviceOption,
    SchedulerOption,
    WorkersOption,
    evaluate_many,
    fit_options,
    fleet_request,
    train_many,
)
from service.cli.fleet_predict import RankByOption, TopOption, predict_many

if TYPE_CHECKING:
    from modeling.serving.predict import Prediction

FeaturesOption = Annotated[str, typer.Option(
    "--features", help="feature set: extended, basic, or both (cross-validation chooses)")]

if TYPE_CHECKING:
    import pandas as pd

models_app = typer.Typer(help="List, inspect and activate (roll back) model versions.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``train``, ``evaluate``, ``predict`` and the ``models`` group."""
    app.command("train")(train)
    app.command("evaluate")(evaluate)
    app.command("predict")(predict)
    app.add_typer(models_app, name="models")


@handle_errors
def train(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    folds: Annotated[int, typer.Option(min=2, max=20, help="cross-validation folds for model selection")] = 5,
    time_budget: Annotated[float, typer.Option(
        min=0.0, help="seconds to spend tuning (whole device)")] = 60.0,
    features: FeaturesOption = "extended",
    candidates: CandidatesOption = None,
    activate: Annotated[bool | None, typer.Option(
        "--activate/--no-activate",
        help="activate even if its CV error is worse than the active version's / register without "
        "activating (default: activate unless worse beyond noise)")] = None,
    wait: WaitOption = False,
    json_output: JsonOption = False,
    reference: Annotated[str | None, typer.Option(
        help="another device whose model this one's few measurements correct (relative fitness); "
        "cross-validation keeps it or trains from scratch")] = None,
) -> None:
    """Train one model per metric (and per region) and register a new model version.

    With --all or --devices the devices train in parallel on Dask, one task per device; a
    device that fails is reported at the end (exit status 1) and the others go on.
    """
    from modeling.training.train import train_device

    fit_kw = fit_options(features, candidates)
    fleet = fleet_request(device, devices, all_devices, scheduler, workers, json_output)
    if fleet is not None:
        train_many(
            fleet,
            activate=activate is not False,
            force_activate=activate is True,
            folds=folds,
            time_budget_s=time_budget,
            wait=wait,
            on_wait=waiting,
            reference=reference,
            **fit_kw,
        )
        return
    assert device is not None
    with progress_bar(fraction=True) as bar:
        task = bar.add_task("training", total=1.0)
        mv = train_device(
            datadir(),
            device,
            folds=folds,
            time_budget_s=time_budget,
            activate=activate is not False,
            force_activate=activate is True,
            wait=wait,
            on_wait=waiting,
            progress=lambda msg, frac: bar.update(task, completed=frac, description=msg[:70]),
            reference=reference,
            **fit_kw,
        )
    if json_output:
        print_json({"device": mv.device, "version": mv.version, "active": mv.active, "manifest": mv.manifest})
        return
    console.print(
        f"trained [bold]{mv.device}[/] version [bold]{mv.version}[/]{' (active)' if mv.active else ''}"
    )
    _print_manifest_summary(mv.manifest)
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


def _print_manifest_summary(manifest: dict[str, Any]) -> None:
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


@handle_errors
def evaluate(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    scheduler: SchedulerOption = None,
    workers: WorkersOption = None,
    folds: Annotated[int, typer.Option(min=2, max=20, help="outer cross-validation folds")] = 5,
    holdout: Annotated[str | None, typer.Option(
        "--holdout", help="CSV of measured workloads to test on")] = None,
    time_budget: Annotated[float, typer.Option(
        min=0.0, help="seconds of tuning per training (one training per fold)")] = 30.0,
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


@handle_errors
def predict(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    write_ratio: Annotated[float | None, typer.Option(help="fraction of writes, 0..1")] = None,
    queue_depth: Annotated[int | None, typer.Option(help="I/Os in flight per job")] = None,
    request_size: Annotated[str | None, typer.Option(help="bytes per request, e.g. 16k")] = None,
    randomness: Annotated[float | None, typer.Option(help="fraction of random requests, 0..1")] = None,
    numjobs: Annotated[int | None, typer.Option(help="parallel jobs")] = None,
    read_size: Annotated[str | None, typer.Option(help="read request size")] = None,
    write_size: Annotated[str | None, typer.Option(help="write request size")] = None,
    read_randomness: Annotated[float | None, typer.Option(help="randomness of reads")] = None,
    write_randomness: Annotated[float | None, typer.Option(help="randomness of writes")] = None,
    model: Annotated[str, typer.Option(help="auto, global or a region name")] = "auto",
    version: Annotated[str | None, typer.Option(help="model version (default: the active one)")] = None,
    input_csv: Annotated[str | None, typer.Option(
        "--input", "-i", help="CSV of workloads (ingest columns)")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="output CSV (default: stdout)")] = None,
    json_output: JsonOption = False,
    rank_by: RankByOption = None,
    top: TopOption = None,
) -> None:
    """Predict the metrics of one workload, or of every row of a CSV file.

    With --all-devices or --devices the devices are ranked for each workload by
    --rank-by (default: the lowest p99 latency first), each with its predictions and
    intervals; a device without a model is listed as skipped.
    """
    from modeling.serving.predict import predict as predict_one

    fleet = fleet_request(device, devices, all_devices, None, None, json_output)  # no Dask: no cluster
    workload = None if input_csv is not None else _workload_from_options(
        write_ratio=write_ratio, queue_depth=queue_depth, request_size=request_size, randomness=randomness,
        numjobs=numjobs, read_size=read_size, write_size=write_size, read_randomness=read_randomness,
        write_randomness=write_randomness,
    )
    if fleet is not None:
        if version is not None:
            raise InvalidInput("--version is for one --device; many devices predict with their active models")
        predict_many(
            fleet, workload=workload, input_csv=None if input_csv is None else Path(input_csv),
            output=output, model=model, rank_by=rank_by, top=top,
        )
        return
    if rank_by is not None or top is not None:
        raise InvalidInput("--rank-by and --top rank many devices: use --all-devices or --devices")
    assert device is not None
    data = datadir()
    if input_csv is not None:
        _predict_file(data, device, Path(input_csv), output, model=model, version=version)
        return
    assert workload is not None
    result = predict_one(data, device, workload, model=model, version=version)
    _present_prediction(device, workload, result, json_output)


def _predict_file(data: DataDir, device: str, path: Path, output: str | None, *, model: str,
                  version: str | None) -> None:
    """Predict every row of a CSV file; the predictions go to ``output`` or stdout."""
    from modeling.serving.batch import predict_csv

    frame = predict_csv(data, device, path, model=model, version=version)
    if output is None:
        frame.to_csv(sys.stdout, index=False)
    else:
        frame.to_csv(output, index=False)
        console.print(f"wrote {len(frame)} predictions to {output}")


def _workload_from_options(**given: Any) -> Workload:
    """The workload of the ``--write-ratio``-style options; the four basic ones are required."""
    missing = [k for k in BASIC_FIELDS if given[k] is None]
    if missing:
        raise InvalidInput(
            "missing " + ", ".join("--" + m.replace("_", "-") for m in missing) + " (or use --input FILE.csv)"
        )
    return Workload.model_validate({k: v for k, v in given.items() if v is not None})


def _present_prediction(device: str, workload: Workload, result: Prediction, json_output: bool) -> None:
    if json_output:
        print_json(
            {
                "device": result.device,
                "model_version": result.model_version,
                "workload": workload.as_row(),
                "predictions": {m: vars(p) for m, p in result.predictions.items()},
            }
        )
        return
    table = cli_table(
        "metric",
        "value",
        "90% interval",
        "model",
        "note",
        ids=("metric",),
        title=f"{device} ({result.model_version}), region {workload.region}",
    )
    for metric, p in result.predictions.items():
        unit = METRIC_UNITS[metric]
        interval = "-" if p.lower is None else f"{p.lower:,.1f} .. {p.upper:,.1f}"
        table.add_row(
            metric,
            f"{p.value:,.1f} {unit}",
            interval,
            p.model,
            _extrapolation_note(p.extrapolated, p.extrapolation),
        )
    console.print(table)


def _extrapolation_note(extrapolated: bool, far: dict[str, float]) -> str:
    """``extrapolated (request_size x4)``: how far out, along which field."""
    if not extrapolated:
        return ""
    detail = ", ".join(f"{name} x{factor:g}" for name, factor in far.items())
    return f"[yellow]extrapolated[/]{f' ({detail})' if detail else ''}"


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
    _print_manifest_summary(man)
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
