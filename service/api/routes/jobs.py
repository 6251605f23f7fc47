"""Routes: start a retrain in the background, and follow a job."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path

from modeling.store.device_selection import select_devices
from service.api.deps import DataDirDep, DeviceDep, JobsDep, TokenDep
from service.api.schemas import (
    TOKEN_ERRORS,
    ErrorResponse,
    FleetRetrainRequest,
    JobPublic,
    RetrainRequest,
    error_responses,
)

router = APIRouter(tags=["jobs"])


@router.post(
    "/v1/devices/{device}/retrain",
    response_model=JobPublic,
    status_code=202,
    dependencies=[TokenDep],
    responses=error_responses(
        {
            **TOKEN_ERRORS,
            400: "a body that is not JSON",
            404: "unknown device",
            409: "a retrain (or other writer) of this device is running",
        }
    ),
)
def retrain(
    device: DeviceDep,
    jobs: JobsDep,
    options: Annotated[
        RetrainRequest | None,
        Body(
            openapi_examples={
                "defaults": {"summary": "5-fold cross-validation, no time limit", "value": {}},
                "quick": {"summary": "3 folds, about a minute", "value": {"folds": 3, "time_budget_s": 60}},
            }
        ),
    ] = None,
) -> dict[str, Any]:
    """Retrain a device's models in the background; follow the returned job at `/v1/jobs/{id}`.

    The new version becomes active only when training succeeded and its cross-validated
    error is not worse than the active version's beyond noise (or `activate` is true);
    the job's `result.activation` says what was decided, with both errors.  Until then
    (and if it fails) predictions keep coming from the current version.
    """
    opts = options or RetrainRequest.model_validate({})
    job = jobs.start(device, folds=opts.folds, time_budget_s=opts.time_budget_s,
                     activate=opts.activate is not False, force_activate=opts.activate is True,
                     reference=opts.reference)
    return asdict(job)


@router.post(
    "/v1/retrain",
    response_model=JobPublic,
    status_code=202,
    dependencies=[TokenDep],
    responses=error_responses(
        {
            **TOKEN_ERRORS,
            404: "unknown device, or a reference without a model",
            409: "one of the devices has a writer (sweep, ingest, train, delete): nothing was started",
        }
    ),
)
def retrain_many(body: FleetRetrainRequest, jobs: JobsDep, datadir: DataDirDep) -> dict[str, Any]:
    """Retrain many devices in one background job, as `ssdpredict train --all` does (on Dask).

    Choose the devices by name or glob (`devices`) or take them all (`all_devices`); the
    options are a one-device retrain's, the same for every device (with `reference`,
    every device transfers from it and it is not retrained).  Every device's writer lock
    is taken before the job starts, so a device with a writer answers 409 and nothing is
    started.  Follow the job at `/v1/jobs/{id}`: its `result.devices` gives each device's
    outcome (version, activation, or the error).  A failed device does not stop the
    others; the job ends `failed` if any failed, with their names in `error`.
    """
    devices = select_devices(datadir, body.devices or (), all_devices=body.all_devices)
    job = jobs.start_fleet(devices, folds=body.folds, time_budget_s=body.time_budget_s,
                           activate=body.activate is not False, force_activate=body.activate is True,
                           reference=body.reference,
                           candidates=None if body.candidates is None else [str(c) for c in body.candidates])
    return asdict(job)


@router.get(
    "/v1/jobs/{job_id}",
    response_model=JobPublic,
    responses={404: {"model": ErrorResponse, "description": "no such job"}},
)
def get_job(
    job_id: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", examples=["3f2a9c0d4e5b6a7980716253443a2b1c"])],
    jobs: JobsDep,
) -> dict[str, Any]:
    """A job's state (`queued`, `running`, `succeeded`, `failed`, `interrupted`), progress, outcome."""
    return asdict(jobs.get(job_id))
