"""Routes: workload-specific model regions, a device's model versions, activation (rollback)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from modeling.workload import REGIONS
from service.api.deps import DeviceDep, RegistryDep, StateDep, TokenDep, VersionDep
from service.api.routes.devices import model_public
from service.api.schemas import ErrorResponse, ModelVersionPublic, ModelVersionsPublic, WorkloadModelsPublic

router = APIRouter(tags=["models"])

_REGIONS = {
    "choices": ["auto", "global", *(r.name for r in REGIONS)],
    "regions": [
        {
            "name": r.name,
            "definition": r.description,
            "write_dominant": r.write_dominant,
            "random": r.random,
            "small": r.small,
        }
        for r in REGIONS
    ],
}


@router.get("/v1/workload-models", response_model=WorkloadModelsPublic)
async def workload_models() -> dict[str, Any]:
    """The eight workload regions, their definitions, and every `model` choice of /v1/predict."""
    return _REGIONS


@router.get(
    "/v1/devices/{device}/models",
    response_model=ModelVersionsPublic,
    responses={404: {"model": ErrorResponse, "description": "unknown device"}},
)
def list_models(device: DeviceDep, registry: RegistryDep) -> dict[str, Any]:
    """A device's model versions (oldest first) with their accuracy; `active` names the one in use."""
    versions = registry.versions(device)
    active = next((mv.version for mv in versions if mv.active), None)
    return {"device": device, "versions": [model_public(mv) for mv in versions], "active": active}


@router.post(
    "/v1/devices/{device}/models/{version}/activate",
    response_model=ModelVersionPublic,
    dependencies=[TokenDep],
    responses={
        401: {"model": ErrorResponse, "description": "token required"},
        403: {"model": ErrorResponse, "description": "wrong token"},
        404: {"model": ErrorResponse, "description": "unknown device or version"},
        503: {"model": ErrorResponse, "description": "the stored model fails validation"},
    },
)
async def activate_model(device: DeviceDep, version: VersionDep, state: StateDep) -> dict[str, Any]:
    """Make a stored version the active model (rollback or roll forward); it is loaded and checked first."""
    mv = await run_in_threadpool(state.registry.activate, device, version)
    state.model_loaded(device, mv.version)
    return model_public(mv)
