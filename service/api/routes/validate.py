"""Routes: upload a trace, get its per-window predictions (``predict-trace``) or errors (``validate``).

Errors (predicted vs measured) are returned when the trace itself carries measured
latency (blktrace/blkparse issue-completion pairs, MSR response times, a captured trace).
Replay on a target is not offered over the API: it writes to a device, which needs the
CLI's explicit ``--target`` and ``--destroy-data``.  The upload is written to a scratch file
and parsed, so it needs the token like the other uploads; its errors name the uploaded
file, never the server's scratch path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, UploadFile
from pydantic import WithJsonSchema

from service.api.deps import DataDirDep, DeviceDep, RegistryDep, SettingsDep, TokenDep
from service.api.schemas import TOKEN_ERRORS, error_responses
from traces.predict.openloop import METHODS
from traces.predict.windows import predict_upload
from traces.formats.reader import FORMATS
from traces.upload import TraceUpload
from traces.validate.compare import validate_upload

router = APIRouter()

# the choices as enums in the schema (a generated client and schemathesis see them)
TraceFormat = Literal[FORMATS]  # type: ignore[valid-type]
Method = Literal[METHODS]  # type: ignore[valid-type]

_PREDICT_EXAMPLE = {
    "device": "nvme0",
    "model_version": "v20261122-051700-123456",
    "method": "open-loop",
    "summary": {"windows": 1, "saturated_windows": 0, "peak_utilisation": 0.06, "offered_iops": 412.7,
                "offered_mib_s": 6.07, "pred_latency_mean_us": 24.1, "pred_latency_p99_us_max": 80.3},
    "warnings": [],
    "windows": [
        {"window_start_s": 0.0, "window_end_s": 1.0, "requests": 413, "too_short": False,
         "offered_iops": 413.0, "offered_mib_s": 6.1, "write_ratio": 0.0, "request_size": 15360,
         "randomness": 0.94,
         "arrival_cv2": 1.4, "capacity_iops": 7012.0, "utilisation": 0.059, "saturated": False,
         "pred_inflight": 0.01, "pred_latency_mean_us": 24.1, "pred_latency_mean_us_lower": 19.0,
         "pred_latency_mean_us_upper": 30.2, "pred_latency_p99_us": 80.3, "pred_iops": 413.0,
         "pred_bandwidth_mib_s": 6.1, "extrapolated": False, "method": "open-loop"}
    ],
}


def trace_upload(
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="a block trace in any supported format")],
    format: Annotated[TraceFormat, Form(description="the trace's format; auto detects it")] = "auto",
    window_s: Annotated[float, Form(ge=1e-6, le=86400)] = 1.0,
    window_requests: Annotated[
        int | None,
        Form(ge=1, le=100_000_000, description="windows of this many requests instead of window_s"),
        # a form field cannot carry null: the schema says integer, left out means unset
        WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 100_000_000}),
    ] = None,
    method: Annotated[Method, Form(description="open-loop (offered rate) or trace-qd")] = "open-loop",
) -> TraceUpload:
    """The uploaded trace (a stream, copied to scratch in pieces up to the limit) and its form fields."""
    return TraceUpload(
        file.file,
        filename=file.filename or "",
        fmt=format,
        window_s=window_s,
        window_requests=window_requests,
        method=method,
        max_bytes=settings.max_upload_bytes,
    )


TraceUploadDep = Annotated[TraceUpload, Depends(trace_upload)]
# the answers both trace routes give besides 200 (schemathesis found 404 undocumented)
_UPLOAD_ERRORS = {
    404: "unknown device, or a device without a model",
    413: "upload larger than max_upload_bytes",
    422: "not a trace of the named format (the message says where), or bad form fields",
}


@router.post(
    "/v1/devices/{device}/validate",
    tags=["traces"],
    dependencies=[TokenDep],
    responses=error_responses({**TOKEN_ERRORS, **_UPLOAD_ERRORS}),
)
def validate_trace(
    device: DeviceDep, datadir: DataDirDep, registry: RegistryDep, upload: TraceUploadDep
) -> dict[str, Any]:
    """Characterise an uploaded trace per window, predict each window and compare with measured values."""
    return validate_upload(datadir, device, upload, registry)


@router.post(
    "/v1/devices/{device}/predict-trace",
    tags=["traces"],
    responses={200: {"content": {"application/json": {"example": _PREDICT_EXAMPLE}}},
               **error_responses(_UPLOAD_ERRORS)},
)
def predict_trace(
    device: DeviceDep, datadir: DataDirDep, registry: RegistryDep, upload: TraceUploadDep
) -> dict[str, Any]:
    """What an uploaded trace's load does on the device, per window: offered load, latency, saturation."""
    return predict_upload(datadir, device, upload, registry)
