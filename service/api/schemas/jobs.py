"""Schemas of retrain jobs and of the health endpoints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


from service.api.schemas.common import DeviceName, ErrorDetail

JobState = Literal["queued", "running", "succeeded", "failed", "interrupted"]


class RetrainRequest(BaseModel):
    """Options of a retrain; all optional."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"folds": 5}, {"folds": 3, "time_budget_s": 60}]}
    )

    folds: int = Field(5, ge=2, le=20, description="cross-validation folds")
    time_budget_s: float | None = Field(
        None, gt=0, le=86_400, allow_inf_nan=False, description="rough limit on training time"
    )
    activate: bool | None = Field(
        None,
        description="null (default): activate the new version unless its cross-validated error is worse "
        "than the active version's beyond noise; true: activate it anyway; false: register only",
    )
    reference: DeviceName | None = Field(
        None,
        description="another device whose model this device's few measurements correct (relative "
        "fitness); cross-validation on this device's points keeps the transfer or trains from scratch",
    )


class JobPublic(BaseModel):
    """A background job (a retrain): state, progress, and its result or error."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2a9c0d4e5b6a7980716253443a2b1c",
                    "kind": "retrain",
                    "device": "nvme0",
                    "state": "running",
                    "stage": "iops",
                    "progress": 0.4,
                    "created_at": "2026-11-22T05:20:00.000+00:00",
                    "started_at": "2026-11-22T05:20:00.010+00:00",
                    "finished_at": None,
                    "result": None,
                    "error": None,
                }
            ]
        }
    )

    id: str
    kind: str
    device: str = Field(description="the device, or `*` for a job over many devices (see `devices`)")
    devices: list[str] | None = Field(None, description="the devices of a job over many devices")
    state: JobState
    stage: str | None
    progress: float
    created_at: str
    started_at: str | None
    finished_at: str | None
    result: dict[str, Any] | None
    error: ErrorDetail | None


# -- health ----------------------------------------------------------------------------


class Health(BaseModel):
    """Liveness."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok", "version": "0.1.0"}]})

    status: str
    version: str


class Readiness(BaseModel):
    """Readiness: the catalog answers and every active model has been loaded."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"ready": True, "models": {"nvme0": "v20261122-051700-123456"}, "errors": {}}]
        }
    )

    ready: bool
    models: dict[str, str] = Field(description="device -> loaded active model version")
    errors: dict[str, str] = Field(description="device -> why its model could not be loaded")
