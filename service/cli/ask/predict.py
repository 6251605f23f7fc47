"""CLI: ``ssdpredict predict`` -- one workload, a CSV of them, or many devices ranked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modeling.errors import InvalidInput
from modeling.store import DataDir
from modeling.workload import BASIC_FIELDS, METRIC_UNITS, Workload
from service.cli.ask.fleet_predict import RankByOption, TopOption, predict_many
from service.cli.common import cli_table, console, datadir, handle_errors, print_json
from service.cli.learn.fleet import fleet_request
from service.cli.options import (
    AllDevicesOption,
    DevicesOption,
    InputCsvOption,
    JsonOption,
    NumjobsOption,
    OptionalDeviceOption,
    OutputOption,
    RandomnessOption,
)

if TYPE_CHECKING:
    from modeling.serving.predict import Prediction


def register(app: typer.Typer) -> None:
    """Add ``predict``."""
    app.command("predict")(predict)


@handle_errors
def predict(
    device: OptionalDeviceOption = None,
    devices: DevicesOption = None,
    all_devices: AllDevicesOption = False,
    write_ratio: Annotated[float | None, typer.Option(help="fraction of writes, 0..1")] = None,
    queue_depth: Annotated[int | None, typer.Option(help="I/Os in flight per job")] = None,
    request_size: Annotated[str | None, typer.Option(help="bytes per request, e.g. 16k")] = None,
    randomness: RandomnessOption = None,
    numjobs: NumjobsOption = None,
    read_size: Annotated[str | None, typer.Option(help="read request size")] = None,
    write_size: Annotated[str | None, typer.Option(help="write request size")] = None,
    read_randomness: Annotated[float | None, typer.Option(help="randomness of reads")] = None,
    write_randomness: Annotated[float | None, typer.Option(help="randomness of writes")] = None,
    model: Annotated[str, typer.Option(help="auto, global or a region name")] = "auto",
    version: Annotated[str | None, typer.Option(help="model version (default: the active one)")] = None,
    input_csv: InputCsvOption = None,
    output: OutputOption = None,
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
    workload = None if input_csv is not None else workload_from_options(
        write_ratio=write_ratio, queue_depth=queue_depth, request_size=request_size, randomness=randomness,
        numjobs=numjobs, read_size=read_size, write_size=write_size, read_randomness=read_randomness,
        write_randomness=write_randomness,
    )
    if fleet is not None:
        if version is not None:
            raise InvalidInput("--version is for one --device; many devices predict with their active models")
        predict_many(
            fleet, workload=workload, input_csv=input_csv,
            output=output, model=model, rank_by=rank_by, top=top,
        )
        return
    if rank_by is not None or top is not None:
        raise InvalidInput("--rank-by and --top rank many devices: use --all-devices or --devices")
    assert device is not None
    data = datadir()
    if input_csv is not None:
        _predict_file(data, device, input_csv, output, model=model, version=version)
        return
    assert workload is not None
    result = predict_one(data, device, workload, model=model, version=version)
    _present_prediction(device, workload, result, json_output)


def _predict_file(data: DataDir, device: str, path: Path, output: Path | None, *, model: str,
                  version: str | None) -> None:
    """Predict every row of a CSV file; the predictions go to ``output`` or stdout."""
    from modeling.serving.batch import predict_csv

    frame = predict_csv(data, device, path, model=model, version=version)
    if output is None:
        frame.to_csv(sys.stdout, index=False)
    else:
        frame.to_csv(output, index=False)
        console.print(f"wrote {len(frame)} predictions to {output}")


def workload_from_options(**given: Any) -> Workload:
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
                **({"derived": result.derived} if result.derived else {}),
                **({"notes": result.notes} if result.notes else {}),
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
        caption=f"what-if, not measured: {result.derived['law']}" if result.derived else None,
    )
    for metric, p in result.predictions.items():
        unit = METRIC_UNITS[metric]
        interval = "-" if p.lower is None else f"{p.lower:,.1f} .. {p.upper:,.1f}"
        table.add_row(
            metric,
            f"{p.value:,.1f} {unit}",
            interval,
            p.model,
            _extrapolation_note(p.extrapolated, p.extrapolation)
            or ("bimodal" if metric in result.notes else ""),
        )
    console.print(table)
    for note in result.notes.values():
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def _extrapolation_note(extrapolated: bool, far: dict[str, float]) -> str:
    """``extrapolated (request_size x4)``: how far out, along which field."""
    if not extrapolated:
        return ""
    detail = ", ".join(f"{name} x{factor:g}" for name, factor in far.items())
    return f"[yellow]extrapolated[/]{f' ({detail})' if detail else ''}"
