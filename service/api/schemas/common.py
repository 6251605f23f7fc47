"""Schema pieces shared by every resource: names, metric and model choices, the error body."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, Field

from modeling.errors import SsdPredictError
from modeling.store.names import NAME_PATTERN
from traces.capacity.slo import parse_slo
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
EstimatorKind = Literal["cart", "xgboost", "extra_trees", "load_gated", "gp"]
"""The estimator kinds a training may be limited to (``modeling.training.selection``; a test
holds them equal to the default candidates' kinds, which need not be imported here)."""
# The literals repeat the domain's names for the schema; fail at import if they drift apart.
assert set(get_args(MetricName)) == set(SERVED_METRICS)
assert set(get_args(ModelChoice)) == {"auto", "global", *REGION_NAMES}

def _slo_pattern() -> str:
    """The latency targets ``traces.capacity.slo.parse_slo`` takes, as one regex for the schema.

    ``mean`` or ``p99`` (any case), ``<=`` or ``<``, a positive number and a unit (us, ms, s,
    m, min, h); one target or one of each statistic, comma-separated (a statistic named twice
    is refused, so the schema names the two orders).  Narrower than the parser in one way only:
    spaces are plain spaces.
    """
    number = r"(?:[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)"  # > 0
    unit = r"(?:[uUmM]?[sS]|[mM](?:[iI][nN])?|[hH])"

    def target(stat: str) -> str:
        return rf" *{stat} *<=? *{number} *{unit} *"

    mean, p99 = target("[mM][eE][aA][nN]"), target("[pP]99")
    return rf"^(?:{mean}|{p99}|{mean},{p99}|{p99},{mean})$"


SLO_PATTERN = _slo_pattern()
"""A latency target (``p99<=1ms``, ``p99<=1ms,mean<=200us``) as the API schema states it."""
_SLO_RE = re.compile(SLO_PATTERN)


def check_slo(text: str) -> str:
    """``text`` if it matches :data:`SLO_PATTERN`, else the parser's own words for what is wrong
    (``cannot target 'p95'``) rather than a 400-character regex."""
    if _SLO_RE.fullmatch(text):
        return text
    try:
        parse_slo(text)
    except SsdPredictError as exc:
        raise ValueError(exc.message) from None
    raise ValueError(f"not a latency target: {text.strip()!r} (use e.g. p99<=1ms or mean<=200us)")


SloText = Annotated[
    str,
    Field(min_length=1, max_length=200, json_schema_extra={"pattern": SLO_PATTERN}),
    AfterValidator(check_slo),
]
"""An SLO field: the schema states the pattern, the check answers in the parser's words."""

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
