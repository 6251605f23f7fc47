"""Dependencies of the routes, as typed aliases (``RegistryDep``, ``DeviceDep``...).

Every dependency here is ``async def`` on purpose: FastAPI runs a plain ``def`` dependency
in the thread pool, and a dozen thread hops per request cost far more than a prediction.

The app's long-lived objects (settings, data directory, model registry, jobs, metrics)
live in one :class:`ServiceState` on ``app.state.service``, built by ``create_app``.
"""

from __future__ import annotations

import hmac
import threading
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir, validate_name
from service.api.batcher import PredictionBatcher
from service.api.jobs import RetrainJobs
from service.api.metrics import ServiceMetrics
from service.api.schemas import NAME_PATTERN
from service.config import Settings


class ServiceState:
    """Everything one app instance shares between requests."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.datadir = DataDir(settings.home)
        self.registry = ModelRegistry(
            self.datadir,
            refresh_s=settings.model_refresh_ms / 1000,
            cache_bytes=settings.model_cache_mb * 2**20,
            build_tables=True,  # at preload, not on the first requests
        )
        self.metrics = ServiceMetrics()
        self.batcher = PredictionBatcher()
        self.preload_done = threading.Event()
        self.loaded: dict[str, str] = {}  # device -> active version in the cache (for /readyz)
        self.load_errors: dict[str, str] = {}
        self.jobs = RetrainJobs(self.datadir, self.registry, self.metrics, on_model=self.model_loaded,
                                scheduler=settings.scheduler, fleet_workers=settings.fleet_workers)

    def model_deleted(self, device: str) -> None:
        """Forget a deleted device's cached models and readiness entries."""
        self.registry.forget(device)
        self.loaded.pop(device, None)
        self.load_errors.pop(device, None)

    def model_loaded(self, device: str, version: str) -> None:
        """Record that ``version`` is now the device's loaded, active model."""
        self.loaded[device] = version
        self.load_errors.pop(device, None)


async def get_state(request: Request) -> ServiceState:
    """The app's shared state."""
    state: ServiceState = request.app.state.service
    return state


StateDep = Annotated[ServiceState, Depends(get_state)]


async def get_settings_dep(state: StateDep) -> Settings:
    """The app's settings."""
    return state.settings


async def get_datadir(state: StateDep) -> DataDir:
    """The app's data directory."""
    return state.datadir


async def get_registry(state: StateDep) -> ModelRegistry:
    """The app's model registry (caches loaded models)."""
    return state.registry


async def get_jobs(state: StateDep) -> RetrainJobs:
    """The app's retrain jobs."""
    return state.jobs


async def get_metrics(state: StateDep) -> ServiceMetrics:
    """The app's Prometheus metrics."""
    return state.metrics


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DataDirDep = Annotated[DataDir, Depends(get_datadir)]
RegistryDep = Annotated[ModelRegistry, Depends(get_registry)]
JobsDep = Annotated[RetrainJobs, Depends(get_jobs)]
MetricsDep = Annotated[ServiceMetrics, Depends(get_metrics)]


async def _device_name(
    device: Annotated[str, Path(pattern=NAME_PATTERN, max_length=128, examples=["nvme0"])],
) -> str:
    # The schema pattern makes pydantic answer 422; validate_name stays the single authority.
    return validate_name(device)


async def _version_name(
    version: Annotated[str, Path(pattern=NAME_PATTERN, max_length=128, examples=["v20261122-051700-123456"])],
) -> str:
    return validate_name(version, "model version")


DeviceDep = Annotated[str, Depends(_device_name)]
VersionDep = Annotated[str, Depends(_version_name)]

_bearer = HTTPBearer(
    auto_error=False, description="required on mutating endpoints when SSDPREDICT_API_TOKEN is set"
)


async def require_token(
    state: StateDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """Guard a mutating endpoint: 401 without a bearer token, 403 with a wrong one."""
    expected = state.settings.api_token
    if expected is None:
        return
    if credentials is None:
        raise HTTPException(
            401, "this endpoint needs `Authorization: Bearer <token>`", headers={"WWW-Authenticate": "Bearer"}
        )
    # Constant-time comparison, so response timing does not reveal the token prefix.
    if not hmac.compare_digest(credentials.credentials.encode(), expected.encode()):
        raise HTTPException(403, "invalid API token")


TokenDep = Depends(require_token)
