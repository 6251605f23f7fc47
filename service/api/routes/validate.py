"""Route: upload a trace, get per-window workload vectors, predictions and errors.

Errors (predicted vs measured) are returned when the trace itself carries measured
latency (blktrace/blkparse issue-completion pairs, MSR response times, a captured trace).
Replay on a target is not offered over the API: it writes to a device, which needs the
CLI's explicit ``--target`` and ``--destroy-data``.  The upload is written to a scratch file
and parsed, so it needs the token like the other uploads; its errors name the uploaded
file, never the server's scratch path.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, UploadFile

from service.api.deps import DataDirDep, DeviceDep, RegistryDep, SettingsDep, TokenDep
from service.api.schemas import ErrorResponse
from traces.reader import FORMATS
from traces.validate import validate_upload

router = APIRouter()


@router.post(
    "/v1/devices/{device}/validate",
    tags=["traces"],
    dependencies=[TokenDep],
    responses={
        401: {"model": ErrorResponse, "description": "token required"},
        403: {"model": ErrorResponse, "description": "wrong token"},
    },
)
def validate_trace(
    device: DeviceDep,
    datadir: DataDirDep,
    registry: RegistryDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="a block trace in any supported format")],
    format: Annotated[str, Form(description=f"one of {', '.join(FORMATS)}")] = "auto",
    window_s: Annotated[float | None, Form(ge=1e-6, le=86400)] = 1.0,
    window_requests: Annotated[int | None, Form(ge=1, le=100_000_000)] = None,
) -> dict[str, Any]:
    """Characterise an uploaded trace per window, predict each window and compare with measured values."""
    data = file.file.read(settings.max_upload_bytes + 1)
    return validate_upload(
        datadir,
        device,
        data,
        filename=file.filename or "",
        fmt=format,
        window_s=window_s,
        window_requests=window_requests,
        max_bytes=settings.max_upload_bytes,
        registry=registry,
    )
