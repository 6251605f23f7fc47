"""One error body for every failure: ``{"error": {"code", "message", "details"}}``.

Domain errors carry a ``kind``; :data:`STATUS_BY_KIND` is the only place that turns a kind
into an HTTP status.  Validation errors name the offending field; anything unexpected
answers a bare 500 (the traceback goes to the server log, never to the client).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from modeling.errors import SsdPredictError

log = logging.getLogger("ssdpredict.api")

STATUS_BY_KIND: dict[str, int] = {
    "invalid": 422,
    "not_found": 404,
    "conflict": 409,
    "unsafe": 403,
    "too_large": 413,
    "unavailable": 503,
}
# Codes whose status differs from their kind's: a damaged stored model is the server's
# problem, not the client's input.
STATUS_BY_CODE: dict[str, int] = {"corrupt_model": 503}

_MAX_FIELD_ERRORS = 50

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_requests",
    503: "unavailable",
}


def error_response(
    status: int, code: str, message: str, details: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """A JSON response in the one error shape."""
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


def _field_errors(errors: list[Any]) -> list[dict[str, Any]]:
    # Keep location, message and type; drop the (possibly huge) input and ctx objects.
    return [
        {
            "loc": [p for p in err.get("loc", ())],
            "msg": str(err.get("msg", "")),
            "type": str(err.get("type", "")),
        }
        for err in errors
    ]


def _message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid request: " + "; ".join(parts) + more


async def domain_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Map a domain error's kind to its status."""
    assert isinstance(exc, SsdPredictError)
    status = STATUS_BY_CODE.get(exc.code, STATUS_BY_KIND.get(exc.kind, 400))
    return error_response(status, exc.code, exc.message, exc.details)


async def request_validation_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 naming every invalid field."""
    assert isinstance(exc, (RequestValidationError, ValidationError))
    errors = _field_errors(list(exc.errors()))
    # A bad 10,000-row batch must not produce a 10,000-entry error body.
    return error_response(422, "validation_error", _message(errors), errors[:_MAX_FIELD_ERRORS])


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Framework HTTP errors (404 route, 405, 401/403 from auth, 413 body limit) in the one shape."""
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail
    message = detail if isinstance(detail, str) else _HTTP_CODES.get(exc.status_code, "error")
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code == 405:
        # Starlette names the methods of the first route on the path only; GET and DELETE of
        # one path are two routes here, so `Allow` listed GET alone (schemathesis ST205).
        headers = {**(headers or {})}
        headers["Allow"] = _allowed_methods(request, headers.get("Allow", ""))
    details = getattr(exc, "details", None) if isinstance(detail, str) else detail
    return error_response(exc.status_code, code, message, details, headers)


def _allowed_methods(request: Request, default: str) -> str:
    """The methods the OpenAPI document gives the request's path (``default`` if none does)."""
    paths: list[tuple[re.Pattern[str], str]] | None = getattr(request.app.state, "allow_by_path", None)
    if paths is None:
        paths = [
            (re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"),
             ", ".join(sorted(m.upper() for m in ops)))
            for template, ops in request.app.openapi().get("paths", {}).items()
        ]
        request.app.state.allow_by_path = paths
    return next((allow for pattern, allow in paths if pattern.match(request.url.path)), default)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """500 without internals; the traceback is logged."""
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal server error; see the server log")


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(SsdPredictError, domain_error_handler)
    app.add_exception_handler(RequestValidationError, request_validation_handler)
    app.add_exception_handler(ValidationError, request_validation_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(Exception, unexpected_error_handler)
