"""Schema pieces shared by every resource: names, metric and model choices, the error body."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, Field

from modeling.store.names import NAME_PATTERN
from modeling.workload import REGION_NAMES, SERVED_METRICS

# the rule of ``modeling.store.validate_name``, stated in the schema so clients see it
DeviceName = Annotated[
    str, Field(pattern=NAME_PATTERN, max_length=128, description="device name", examples=["nvme0"])
]
MetricName = Literal[
    "latency_mean_us",
    "latency_p99_us",
    "bandwidth_mib_s",
    "iops",
    "latency_p50_us",
    "latency_p90_us",
    "latency_p99_9_us",
]
ModelChoice = Literal[
    "auto",
    "global",
    "read-random-small",
    "read-random-large",
    "read-sequential-small",
    "read-sequential-large",
    "write-random-small",
    "write-random-large",
    "write-sequential-small",
    "write-sequential-large",
]
# The literals repeat the domain's names for the schema; fail at import if they drift apart.
assert set(get_args(MetricName)) == set(SERVED_METRICS)
assert set(get_args(ModelChoice)) == {"auto", "global", *REGION_NAMES}

MODEL_DESCRIPTION = "`auto` (region model where it beats the global one), `global`, or a region name"


class ErrorDetail(BaseModel):
    """The body of every error response."""

    code: str = Field(description="stable machine-readable error code", examples=["unknown_device"])
    message: str = Field(description="human-readable explanation")
    details: Any = Field(None, description="structured extra information (e.g. invalid fields)")


class ErrorResponse(BaseModel):
    """Every error answers ``{"error": {"code", "message", "details"}}``."""

    error: ErrorDetail


TOKEN_ERRORS = {401: "token required", 403: "wrong token"}
"""The answers of a route that needs the token and was not given it (or a wrong one)."""


def error_responses(descriptions: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` of error answers (each an :class:`ErrorResponse`), by status code."""
    return {code: {"model": ErrorResponse, "description": text} for code, text in descriptions.items()}
