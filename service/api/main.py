"""The FastAPI app: every router included here, built by :func:`create_app`.

``uvicorn service.api.main:app`` serves an app built from the environment's settings;
tests and benchmarks call ``create_app(Settings(...))``.  The module-level ``app`` is
built on first access, so importing this module reads no settings and touches no disk.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from threadpoolctl import threadpool_limits

from collectors.ingest.batch import STAGING_PREFIX
from modeling.store.files.workdirs import remove_stale_workdirs
from service.api import errors
from service.api.deps import ServiceState
from service.api.limits import BodyLimitMiddleware
from service.api.metrics import MetricsMiddleware
from service.api.routes import capacity, devices, fleet, health, jobs, models, predict, reports, validate
from service.api.schemas import ErrorResponse
from service.config import Settings, get_settings

log = logging.getLogger("ssdpredict.api")

# Validation errors answer in the one error shape; say so instead of FastAPI's default schema.
# 400 and 503 can come from any route (a body that is not JSON, a value only the domain can
# judge; a damaged catalog, a read-only data directory): schemathesis found 400 undocumented.
_VALIDATION_ERROR: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "malformed request (the message says what)"},
    422: {"model": ErrorResponse, "description": "invalid request (the message names the field)"},
    503: {"model": ErrorResponse,
          "description": "the catalog is damaged, or the data directory is read-only (for writes)"},
}
api_router = APIRouter()
for _module in (predict, fleet, devices, models, reports, jobs, validate, health, capacity):
    api_router.include_router(_module.router, responses=_VALIDATION_ERROR)

_DESCRIPTION = """Black-box SSD performance prediction: per-device regression-tree models of
latency, bandwidth and IOPS as functions of the workload (write ratio, queue depth, request
size, randomness, parallelism).

Every error answers `{"error": {"code", "message", "details"}}`.  When `SSDPREDICT_API_TOKEN`
is set, the mutating endpoints (upload, retrain, activate) need `Authorization: Bearer <token>`.
"""


def preload_models(state: ServiceState) -> None:
    """Load every device's active model into the registry cache (what /readyz reports).

    Jobs left unfinished by a process that died are marked interrupted first, and the
    staging folders of imports that died are removed.
    """
    try:
        for job in state.jobs.recover():
            log.warning("job %s (%s of %s) was interrupted by a crash", job.id, job.kind, job.device)
        for folder in remove_stale_workdirs(state.datadir.measurements_dir, STAGING_PREFIX):
            log.warning("removed %s, left by an import that died", folder)
        for dev in state.datadir.catalog.list_devices():
            try:
                if state.datadir.catalog.active_model_version(dev.name) is None:
                    continue
                state.loaded[dev.name] = state.registry.load(dev.name).version
            except Exception as exc:  # one bad model must not hide the others; /readyz names it
                state.load_errors[dev.name] = f"{type(exc).__name__}: {exc}"
                log.warning("could not load the model of %s: %s", dev.name, exc)
    except Exception as exc:
        state.load_errors["catalog"] = f"{type(exc).__name__}: {exc}"
        log.error("could not read the catalog: %s", exc)
    finally:
        state.preload_done.set()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API app over the data directory named by ``settings``."""
    settings = settings or get_settings()
    # One BLAS thread by default: a prediction's matrix products are thin, and BLAS workers
    # spinning on the cores would slow the row-block threads of modeling.estimators.parallel down.
    # Set here, not in the lifespan: that may run off the main thread (the test client's
    # portal), and OpenBLAS ignores the call there.
    threadpool_limits(limits=settings.blas_threads, user_api="blas")
    state = ServiceState(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Load models in the background: the port opens at once and /readyz says when done.
        threading.Thread(target=preload_models, args=(state,), name="preload", daemon=True).start()
        # Move everything imported so far (numpy, pandas, scikit-learn...) out of the
        # collector's sight: a full collection then scans only request garbage, not the
        # whole heap (tens of ms per large batch request otherwise).
        gc.freeze()
        yield
        state.jobs.wait(timeout=5.0)

    app = FastAPI(
        title="ssdpredict",
        description=_DESCRIPTION,
        version="1",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN; _add_docs serves ours
        redoc_url=None,
    )
    app.state.service = state
    errors.install(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(BodyLimitMiddleware, max_body_size=settings.max_upload_bytes)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)  # added last = outermost: sees every answer
    app.include_router(api_router)
    app.router.routes[0:0] = predict.hot_routes()
    _add_schemas(app, predict.body_schemas())
    _add_docs(app)
    return app


# Swagger UI and ReDoc shipped in the package (see static/VERSIONS; .ci/update_docs_assets.sh
# refreshes them), so /docs and /redoc work on a machine with no internet access.
_STATIC_DIR = Path(__file__).resolve().parent / "static"
_STATIC_URL = "/static/docs"


def _add_docs(app: FastAPI) -> None:
    """Serve /docs (Swagger UI) and /redoc (ReDoc) from the packaged assets, not a CDN."""
    app.mount(_STATIC_URL, StaticFiles(directory=_STATIC_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_redirect_url = "/docs/oauth2-redirect"

    def asset(request: Request, name: str) -> str:
        # root_path: behind a proxy that mounts the API under a prefix, assets follow it.
        return f"{request.scope.get('root_path', '')}{_STATIC_URL}/{name}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_redirect_url}",
            swagger_js_url=asset(request, "swagger-ui/swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui/swagger-ui.css"),
            swagger_favicon_url=asset(request, "swagger-ui/favicon-32x32.png"),
        )

    @app.get(oauth2_redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=asset(request, "redoc/redoc.standalone.js"),
            redoc_favicon_url=asset(request, "swagger-ui/favicon-32x32.png"),
            with_google_fonts=False,
        )


def _add_schemas(app: FastAPI, schemas: dict[str, Any]) -> None:
    """Add component schemas that routes reference by hand (predict bodies) to the OpenAPI document."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            document.setdefault("components", {}).setdefault("schemas", {}).update(schemas)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_app: FastAPI | None = None
_app_lock = threading.Lock()


def __getattr__(name: str) -> Any:
    # PEP 562: `service.api.main:app` (uvicorn) builds the app on first access only.
    global _app
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _app_lock:
        if _app is None:
            _app = create_app()
    return _app
