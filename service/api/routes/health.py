"""Routes: liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from service.api.deps import MetricsDep, StateDep
from service.api.schemas import Health, Readiness

router = APIRouter(tags=["health"])

try:
    _VERSION = version("ssdpredict")
except PackageNotFoundError:  # running from a source tree that was not installed
    _VERSION = "0.0.0"


@router.get("/healthz", response_model=Health)
async def healthz() -> dict[str, Any]:
    """Liveness: the process answers."""
    return {"status": "ok", "version": _VERSION}


@router.get(
    "/readyz", response_model=Readiness, responses={503: {"model": Readiness, "description": "not ready"}}
)
async def readyz(state: StateDep) -> Any:
    """Readiness: the catalog answers and every device's active model has been loaded (503 until then)."""
    ready = state.preload_done.is_set() and not state.load_errors
    if ready:
        try:
            devices = await run_in_threadpool(state.datadir.catalog.list_devices)
        except Exception as exc:  # the catalog file is gone or locked: not ready, say why
            state_errors = {"catalog": f"{type(exc).__name__}: {exc}"}
            return JSONResponse({"ready": False, "models": dict(state.loaded), "errors": state_errors}, 503)
        # a device deleted by another process (the CLI, a replica): its model is not served any more
        names = {d.name for d in devices}
        for gone in [d for d in state.loaded if d not in names]:
            state.model_deleted(gone)
    body = {"ready": ready, "models": dict(state.loaded), "errors": dict(state.load_errors)}
    return body if ready else JSONResponse(body, status_code=503)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def prometheus_metrics(metrics: MetricsDep) -> Response:
    """Prometheus metrics: requests and latencies per route, predictions per device, retrain jobs."""
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
