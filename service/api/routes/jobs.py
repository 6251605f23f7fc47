"""Routes: start a retrain in the background, and follow a job."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path

from service.api.deps import DeviceDep, JobsDep, TokenDep
from service.api.schemas import TOKEN_ERRORS, ErrorResponse, JobPublic, RetrainRequest, error_responses

router = APIRouter(tags=["jobs"])


@router.post(
    "/v1/devices/{device}/retrain",
    response_model=JobPublic,
    status_code=202,
    dependencies=[TokenDep],
    responses=error_responses(
        {
            **TOKEN_ERRORS,
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
