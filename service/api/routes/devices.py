"""Routes: the devices in the catalog, and uploading measurements of a device."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, BinaryIO

from dataclasses import asdict

from fastapi import APIRouter, File, Form, Path, UploadFile
from pydantic import WithJsonSchema
from starlette.concurrency import run_in_threadpool

from collectors.devices import DEVICE_CLASSES
from collectors.ingest import ingest_bytes
from modeling.errors import InvalidInput
from modeling.store import DataDir, Sweep
from modeling.store.delete import delete_device, delete_sweep
from service.api.deps import DataDirDep, DeviceDep, SettingsDep, StateDep, TokenDep
from service.api.schemas import (
    TOKEN_ERRORS,
    error_responses,
    DeletedPublic,
    DevicePublic,
    DevicesPublic,
    DeviceSummary,
    ErrorResponse,
    ModelVersionPublic,
    SweepPublic,
)

router = APIRouter(prefix="/v1/devices", tags=["devices"])

MAX_METADATA_BYTES = 65536
MAX_METADATA_DEPTH = 16
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "unknown device"}}


@router.get("", response_model=DevicesPublic)
def list_devices(datadir: DataDirDep) -> DevicesPublic:
    """List every device with its class and active model version."""
    catalog = datadir.catalog
    devices = []
    for dev in catalog.list_devices():
        active = catalog.active_model_version(dev.name)
        devices.append(
            DeviceSummary(
                name=dev.name,
                device_class=dev.device_class,
                created_at=dev.created_at,
                active_model_version=active.version if active else None,
                derived=dev.metadata.get("derived"),
            )
        )
    return DevicesPublic(devices=devices, count=len(devices))


@router.get("/{device}", response_model=DevicePublic, responses=_NOT_FOUND)
def get_device(device: DeviceDep, datadir: DataDirDep) -> DevicePublic:
    """One device: class, metadata, sweeps and the active model with its cross-validated accuracy."""
    catalog = datadir.catalog
    dev = catalog.get_device(device)
    active = catalog.active_model_version(device)
    return DevicePublic(
        name=dev.name,
        device_class=dev.device_class,
        metadata=dev.metadata,
        created_at=dev.created_at,
        sweeps=[SweepPublic.from_sweep(s) for s in catalog.list_sweeps(device)],
        active_model=ModelVersionPublic.from_version(active) if active else None,
    )


@router.post(
    "/{device}/sweeps",
    response_model=SweepPublic,
    status_code=201,
    dependencies=[TokenDep],
    responses=error_responses(
        {
            **TOKEN_ERRORS,
            409: "another writer holds the device",
            413: "upload larger than max_upload_bytes",
            422: "not fio JSON nor ingest CSV (the message says where)",
        }
    ),
)
async def upload_sweep(
    device: DeviceDep,
    datadir: DataDirDep,
    file: Annotated[UploadFile, File(description="fio JSON output or a CSV in the ingest format")],
    settings: SettingsDep,
    device_class: Annotated[
        str | None,
        Form(
            pattern=f"^({'|'.join(DEVICE_CLASSES)})$",
            examples=["ssd"],
            description="class of a new device (default ssd); must match an existing one",
        ),
        # a form field cannot carry null: the schema names the classes, left out means unset
        WithJsonSchema({"type": "string", "enum": list(DEVICE_CLASSES)}),
    ] = None,
    metadata: Annotated[
        str | None,
        Form(max_length=MAX_METADATA_BYTES, description="a JSON object"),
        WithJsonSchema({"type": "string", "contentMediaType": "application/json"}),
    ] = None,
) -> SweepPublic:
    """Upload fio JSON or ingest-format CSV measurements of a device (created if new), as one sweep.

    The body limit (`max_upload_bytes`) is enforced while the upload streams in; the file
    is only parsed as data, never executed or unpickled.
    """
    meta = _metadata(metadata)
    # the upload as spooled to disk (over 1 MiB) by the form parser, read in pieces: a 64 MiB
    # upload was read whole into memory here before
    sweep = await run_in_threadpool(
        _ingest_locked, datadir, device, file.filename or "upload", file.file, device_class, meta,
        settings.max_upload_bytes,
    )
    return SweepPublic.from_sweep(sweep)


def _ingest_locked(datadir: DataDir, device: str, name: str, data: BinaryIO, device_class: str | None,
                   meta: dict[str, Any] | None, max_bytes: int) -> Sweep:
    # one writer per device, as on the CLI: a busy device answers 409 at once
    with datadir.device_lock(device, "ingest"):
        return ingest_bytes(datadir, device, name, data, device_class=device_class, metadata=meta,
                            max_bytes=max_bytes)


_DELETE_RESPONSES = error_responses(
    {**TOKEN_ERRORS, 404: "unknown device or sweep", 409: "another writer holds the device"}
)


@router.delete(
    "/{device}", response_model=DeletedPublic, dependencies=[TokenDep], responses=_DELETE_RESPONSES
)
def remove_device(device: DeviceDep, state: StateDep) -> dict[str, Any]:
    """Delete a device with its sweeps, measurements and model versions (files included)."""
    gone = delete_device(state.datadir, device)
    state.model_deleted(device)
    return asdict(gone)


@router.delete(
    "/{device}/sweeps/{sweep_id}", response_model=DeletedPublic, dependencies=[TokenDep],
    responses=_DELETE_RESPONSES,
)
def remove_sweep(
    device: DeviceDep, sweep_id: Annotated[int, Path(ge=1, le=2**62, examples=[12])], datadir: DataDirDep
) -> dict[str, Any]:
    """Delete one sweep of a device: its points and Parquet file (models trained on it stay)."""
    return asdict(delete_sweep(datadir, sweep_id, device=device))


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None or not text.strip():
        return None
    depth = json_depth(text)
    if depth > MAX_METADATA_DEPTH:
        # json.loads recurses per level: bound the nesting before parsing, not after a RecursionError.
        raise InvalidInput(
            f"metadata nests {depth} levels deep; at most {MAX_METADATA_DEPTH} are allowed",
            details={"field": "metadata"},
        )
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"metadata is not JSON: {exc}", details={"field": "metadata"}) from None
    if not isinstance(value, dict):
        raise InvalidInput("metadata must be a JSON object", details={"field": "metadata"})
    return value


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (brackets inside strings ignored)."""
    level = deepest = 0
    for char in "".join(re.findall(r"[\[\]{}]", _JSON_STRING.sub("", text))):
        level += 1 if char in "[{" else -1
        deepest = max(deepest, level)
    return deepest


__all__ = ["json_depth", "router"]
