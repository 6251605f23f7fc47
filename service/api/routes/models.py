"""Routes: workload-specific model regions, a device's model versions, activation (rollback)."""

from __future__ import annotations


from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from modeling.workload import REGIONS
from service.api.deps import DeviceDep, RegistryDep, StateDep, TokenDep, VersionDep
from service.api.schemas import (
    TOKEN_ERRORS,
    error_responses,
    ErrorResponse,
    ModelVersionPublic,
    ModelVersionsPublic,
    RegionPublic,
    WorkloadModelsPublic,
)

router = APIRouter(tags=["models"])

_REGIONS = WorkloadModelsPublic(
    choices=["auto", "global", *(r.name for r in REGIONS)],
    regions=[RegionPublic.from_region(r) for r in REGIONS],
)


@router.get("/v1/workload-models", response_model=WorkloadModelsPublic)
async def workload_models() -> WorkloadModelsPublic:
    """The eight workload regions, their definitions, and every `model` choice of /v1/predict."""
    return _REGIONS


@router.get(
    "/v1/devices/{device}/models",
    response_model=ModelVersionsPublic,
    responses={404: {"model": ErrorResponse, "description": "unknown device"}},
)
def list_models(device: DeviceDep, registry: RegistryDep) -> ModelVersionsPublic:
    """A device's model versions (oldest first) with their accuracy; `active` names the one in use."""
    versions = registry.versions(device)
    active = next((mv.version for mv in versions if mv.active), None)
    return ModelVersionsPublic(
        device=device, versions=[ModelVersionPublic.from_version(mv) for mv in versions], active=active
    )


@router.post(
    "/v1/devices/{device}/models/{version}/activate",
    response_model=ModelVersionPublic,
    dependencies=[TokenDep],
    responses=error_responses(
        {
            **TOKEN_ERRORS,
            404: "unknown device or version",
            503: "the stored model fails validation",
        }
    ),
)
async def activate_model(device: DeviceDep, version: VersionDep, state: StateDep) -> ModelVersionPublic:
    """Make a stored version the active model (rollback or roll forward); it is loaded and checked first."""
    mv = await run_in_threadpool(state.registry.activate, device, version)
    state.model_loaded(device, mv.version)
    return ModelVersionPublic.from_version(mv)
