"""Route: upload a trace, get per-window workload vectors, predictions and errors."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, UploadFile

from modeling.store import DataDir
from service.config import get_settings
from traces.validate import validate_upload

router = APIRouter()


@router.post("/v1/devices/{device}/validate", tags=["traces"])
async def validate_trace(
    device: str,
    file: Annotated[UploadFile, File(description="a block trace in any supported format")],
    format: Annotated[str, Form()] = "auto",
    window_s: Annotated[float | None, Form(gt=0)] = 1.0,
    window_requests: Annotated[int | None, Form(ge=1)] = None,
) -> dict[str, Any]:
    """Characterise an uploaded trace per window and compare predictions with measured values."""
    data = await file.read()
    return validate_upload(
        DataDir(get_settings().home), device, data, filename=file.filename or "",
        fmt=format, window_s=window_s, window_requests=window_requests,
    )
