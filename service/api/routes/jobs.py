"""Routes: start a retrain in the background, and follow a job."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path

from modeling.training.fleet import select_devices
from modeling.training.selection import candidates_of_kinds
from service.api.deps import DataDirDep, DeviceDep, JobsDep, TokenDep
from service.api.schemas import ErrorResponse, FleetRetrainRequest, JobPublic, RetrainRequest

router = APIRouter(tags=["jobs"])


@router.post(
    "/v1/devices/{device}/retrain",
    response_model=JobPublic,
    status_code=202,
    dependencies=[TokenDep],
    responses={
        401: {"model": ErrorResponse, "description": "token required"},
        403: {"model": ErrorResponse, "description": "wrong token"},
        404: {"model": ErrorResponse, "description": "unknown device"},
        409: {"model": ErrorResponse, "description": "a retrain of this device is already running"},
    },
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

    The new version becomes active only when training succeeded; until then (and if it
    fails) predictions keep coming from the current version.
    """
    opts = options or RetrainRequest.model_validate({})
    job = jobs.start(device, folds=opts.folds, time_budget_s=opts.time_budget_s)
    return asdict(job)


@router.post(
    "/v1/retrain",
    response_model=JobPublic,
    status_code=202,
    dependencies=[TokenDep],
    responses={
        401: {"model": ErrorResponse, "description": "token required"},
        403: {"model": ErrorResponse, "description": "wrong token"},
        404: {"model": ErrorResponse, "description": "unknown device"},
        409: {"model": ErrorResponse, "description": "one of the devices is already retraining"},
    },
)
def retrain_many(body: FleetRetrainRequest, jobs: JobsDep, datadir: DataDirDep) -> dict[str, Any]:
    """Retrain many devices in one background job, in parallel on Dask; follow it at `/v1/jobs/{id}`.

    Each device's new version becomes active as soon as it is trained; a device that fails
    keeps its current version and is named in the job's `result.failed`.  The job fails
    (`partial_failure`) if any device did.
    """
    devices = select_devices(datadir, body.devices, all_devices=body.all)
    candidates = None if body.candidates is None else candidates_of_kinds(body.candidates)
    job = jobs.start_many(devices, folds=body.folds, time_budget_s=body.time_budget_s, candidates=candidates)
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
    """A job's state (`queued`, `running`, `succeeded`, `failed`), progress, and result or error."""
    return asdict(jobs.get(job_id))
