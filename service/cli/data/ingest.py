"""CLI: ``ssdpredict ingest`` -- import fio JSON results and CSV measurements."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collectors.ingest import ingest_paths
from modeling.errors import InvalidInput
from modeling.units import parse_size
from service.cli.common import console, datadir, handle_errors, print_json, waiting
from service.cli.options import DeviceOption, JsonOption, OptionalClassOption, WaitOption
from service.config import get_settings

if TYPE_CHECKING:
    from modeling.store import Sweep

PER_FILE_LIMIT = 10  # above this many files, print one line per folder


def register(app: typer.Typer) -> None:
    """Add ``ingest``."""
    app.command("ingest")(ingest)


def parse_meta(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs into a dict (whole numbers become ints)."""
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").replace("-", "").isalnum():
            raise InvalidInput(f"invalid --meta {item!r}: use KEY=VALUE, e.g. --meta controller=P420i")
        meta[key] = int(value) if value.strip().isdigit() else value.strip()
    return meta


def _limit(text: str | None) -> int:
    if text is None:
        return get_settings().max_ingest_bytes
    try:
        limit = parse_size(text)
    except ValueError as exc:
        raise InvalidInput(f"invalid --max-bytes {text!r}: {exc}") from None
    if limit <= 0:
        raise InvalidInput(f"invalid --max-bytes {text!r}: must be > 0")
    return limit


MetaOption = Annotated[list[str] | None, typer.Option(
    "--meta", help="device metadata KEY=VALUE (repeatable)")]
MaxBytesOption = Annotated[str | None, typer.Option(
    "--max-bytes",
    help="refuse an import larger than this in total, e.g. 2g (default: SSDPREDICT_MAX_INGEST_BYTES, 1g)")]


@handle_errors
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="fio JSON files, CSV files, or folders of them")],
    device: DeviceOption,
    device_class: OptionalClassOption = None,
    meta: MetaOption = None,
    wait: WaitOption = False,
    json_output: JsonOption = False,
    max_bytes: MaxBytesOption = None,
) -> None:
    """Import measurements (all or nothing): fio JSON files or folders, or CSV.

    fio JSON: the workload comes from each job's options; folders are searched recursively.

    CSV required columns: write_ratio, queue_depth, request_size, randomness.

    CSV optional columns: numjobs, read_size, write_size, read_randomness, write_randomness.

    CSV metric columns (one at least): latency_mean_us, latency_p99_us, bandwidth_mib_s, iops.

    Sizes are bytes.  Unknown columns are refused.  One bad row rejects the whole import.
    CSV is read in chunks: memory stays bounded whatever the file size.
    """
    metadata, limit = parse_meta(meta or []) or None, _limit(max_bytes)  # checked before the lock
    data = datadir()
    # One writer per device: parallel imports of the same files store them once.
    with data.device_lock(device, "ingest", wait=wait, on_wait=waiting):
        sweep = ingest_paths(data, device, paths, device_class=device_class, metadata=metadata,
                             max_bytes=limit)
    _present(device, sweep, json_output)


def _present(device: str, sweep: Sweep, json_output: bool) -> None:
    files = sweep.info.get("files", [])
    if json_output:
        print_json({"device": device, "sweep_id": sweep.id, "points": sweep.n_points, **sweep.info})
        return
    if sweep.info.get("already_ingested"):
        console.print(
            f"already ingested: sweep {sweep.id} of {device} holds this data "
            f"({sweep.n_points} points); nothing stored again"
        )
        return
    if len(files) <= PER_FILE_LIMIT:
        for f in files:
            console.print(f"{f['name']}: {f['points']} points ({f['format']})", highlight=False)
    else:
        folders: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for f in files:
            counts = folders[str(Path(f["name"]).parent)]
            counts[0] += 1
            counts[1] += f["points"]
        for folder, (n_files, n_points) in sorted(folders.items()):
            console.print(f"{folder}/: {n_points} points from {n_files} files", highlight=False)
    console.print(
        f"stored {sweep.n_points} points from {len(files)} files as sweep {sweep.id} of {device}",
        highlight=False,
    )
