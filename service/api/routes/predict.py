"""Routes: predict one workload, or a batch of them.

Each request takes ONE ``DeviceModel`` from the registry and uses only it, so a retrain
that swaps the active version mid-request cannot mix versions within a response.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any

import numpy as np
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json
from starlette.concurrency import run_in_threadpool
from starlette.routing import Match, Route
from starlette.types import Scope

from modeling.errors import TooLarge
from modeling.serving.device_model import Predictor
from modeling.serving.registry import ModelRegistry
from modeling.store import validate_name
from modeling.workload import BASIC_FIELDS, EXTENDED_FIELDS, WORKLOAD_FIELDS
from service.api.deps import ServiceState, StateDep
from service.api.schemas import (
    BatchPredictRequest,
    BatchPredictResponse,
    ErrorResponse,
    PredictRequest,
    PredictResponse,
    WorkloadBatch,
)

router = APIRouter(prefix="/v1/predict", tags=["predict"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "unknown device, no model yet, or no such region model"},
    422: {"model": ErrorResponse, "description": "invalid request (the message names the field)"},
}


_ONE = TypeAdapter(PredictRequest)
_BATCH = TypeAdapter(BatchPredictRequest)


def _parse(adapter: TypeAdapter[Any], raw: bytes) -> Any:
    """Validate a JSON body straight from its bytes; errors become the usual 422."""
    try:
        return adapter.validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**err, "loc": ("body", *err["loc"])} for err in exc.errors(include_url=False)]
        ) from None


def _body_schema(name: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    }


# The hot path.  The body is parsed and validated by pydantic-core straight from the
# bytes (one Rust pass instead of json.loads, then validation), the response is encoded
# by pydantic-core from a dict of plain values, and the app state is read off the
# request instead of through dependency injection: each of these costs as much as the
# prediction itself.  Both schemas are still documented (openapi_extra, response_model).
@router.post(
    "", response_model=PredictResponse, responses=_ERRORS, openapi_extra=_body_schema("PredictRequest")
)
async def predict_one(request: Request) -> Response:
    """Predict latency, bandwidth and IOPS of one workload, with intervals and an extrapolation flag."""
    body: PredictRequest = _parse(_ONE, await request.body())
    state: ServiceState = request.app.state.service
    # Runs on the event loop: a cached model predicts in a fraction of a millisecond, a
    # thread hop would cost as much.  Requests arriving together share one vectorised
    # model call (service.api.batcher).
    model = state.registry.load(validate_name(body.device))
    predictions = await state.batcher.predict(model, body.workload, body.metrics, body.model)
    state.metrics.count_predictions(body.device)
    result = {
        "device": model.device,
        "model_version": model.version,
        "predictions": predictions,
        **_about(model, predictions),
    }
    return Response(to_json(result), media_type="application/json")


class _HotRoute(Route):
    """A plain Starlette route, placed ahead of the documented FastAPI route of the same path.

    FastAPI's per-request machinery (dependency solving, response handling) costs about
    0.1 ms, as much as the model call; ``predict_one`` needs none of it.  The APIRoute stays
    registered, so the OpenAPI document (and schemathesis) still describe the endpoint;
    requests are answered by the same function either way.  ``scope["route"]`` is set like
    FastAPI does, so the request metrics keep their route label.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self
        return match, child


def hot_routes() -> list[Route]:
    """Routes to put first in the app's router (see :class:`_HotRoute`)."""
    return [_HotRoute("/v1/predict", predict_one, methods=["POST"])]


def body_schemas() -> dict[str, Any]:
    """Component schemas of the request bodies parsed by hand, for the app's OpenAPI document."""
    out: dict[str, Any] = {}
    for name, adapter in (("PredictRequest", _ONE), ("BatchPredictRequest", _BATCH)):
        schema = adapter.json_schema(ref_template="#/components/schemas/{model}")
        out.update(schema.pop("$defs", {}))
        out[name] = schema
    return out


@router.post(
    "/batch",
    response_model=BatchPredictResponse,
    responses={**_ERRORS, 413: {"model": ErrorResponse, "description": "more workloads than max_batch"}},
    # parsed by hand like predict_one's body, so described here
    openapi_extra=_body_schema("BatchPredictRequest"),
)
async def predict_batch(request: Request, state: StateDep) -> Response:
    """Predict many workloads in one call (up to the configured `max_batch`), column-wise per metric."""
    body: BatchPredictRequest = _parse(_BATCH, await request.body())
    check_batch_size(body.count, state.settings.max_batch)
    content = await run_in_threadpool(_predict_batch, state.registry, body)
    state.metrics.count_predictions(body.device, body.count)
    return Response(content, media_type="application/json")


def check_batch_size(count: int, max_batch: int) -> None:
    """Raise ``TooLarge`` (413) for a batch of more than ``max_batch`` workloads."""
    if count > max_batch:
        raise TooLarge(
            f"{count} workloads in one batch; the limit is {max_batch}", details={"max_batch": max_batch}
        )


def _about(model: Predictor, metrics: Iterable[str]) -> dict[str, Any]:
    """What an answer says about itself: a what-if device's law, and per metric a bimodal tail's note."""
    about: dict[str, Any] = {}
    if model.derived is not None:
        about["derived"] = model.derived
    notes = {m: note for m, note in model.tail_notes.items() if m in metrics}
    if notes:  # beside its widened interval
        about["notes"] = notes
    return about


def _predict_batch(registry: ModelRegistry, body: BatchPredictRequest) -> bytes:
    model = registry.load(validate_name(body.device))
    out = model.predict(workload_columns(body), metrics=body.metrics, model=body.model).columns
    result = {
        "device": model.device,
        "model_version": model.version,
        "count": body.count,
        **_about(model, out),
        "predictions": {
            m: {
                "value": value,
                "lower": lower,
                "upper": upper,
                "extrapolated": extrapolated,
                "model": scope.tolist(),
            }
            for m, (value, lower, upper, extrapolated, scope) in out.items()
        },
    }
    # The shape is BatchPredictResponse by construction.  orjson writes the float and
    # bool arrays straight from numpy (NaN -- no interval -- as null): about a third of
    # the time of converting them to lists and encoding those.
    return orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)


def workload_columns(body: WorkloadBatch) -> dict[str, np.ndarray]:
    """The workloads as float columns by field (NaN where an optional field is left out)."""
    nan = float("nan")
    n = body.count
    if body.columns is not None:
        cols = {f: getattr(body.columns, f) for f in WORKLOAD_FIELDS}
        return {f: np.full(n, nan) if c is None else np.array(c, dtype=np.float64) for f, c in cols.items()}
    rows = body.workloads or []
    # column-wise from the validated row dicts: far cheaper than building records
    out = {f: np.fromiter(map(itemgetter(f), rows), np.float64, n) for f in BASIC_FIELDS}
    named = set().union(*rows)  # the fields any row names: one C-level pass, not one per field
    for f in EXTENDED_FIELDS:  # absent or null means NaN (the default applies)
        if f not in named:
            out[f] = np.full(n, nan)
        else:
            out[f] = np.fromiter((nan if (v := r.get(f)) is None else v for r in rows), np.float64, n)
    return out
