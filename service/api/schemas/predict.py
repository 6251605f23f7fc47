"""Schemas of /v1/predict and /v1/predict/batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NotRequired

# pydantic needs typing_extensions' TypedDict before Python 3.12.
from typing_extensions import TypedDict

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    WithJsonSchema,
    create_model,
    model_validator,
    with_config,
)

from modeling.workload import (
    LIMITS,
    SERVED_METRICS,
    SIZE_PATTERN,
    SIZE_STEP,
    WORKLOAD_FIELDS,
    WORKLOAD_LIMITS,
    FieldLimit,
    Workload,
    parse_size,
)

from service.api.schemas.common import MODEL_DESCRIPTION, DeviceName, MetricName, ModelChoice

_WORKLOAD_EXAMPLE: dict[str, Any] = {
    "write_ratio": 0.3,
    "queue_depth": 8,
    "request_size": "16k",
    "randomness": 1.0,
}


class PredictRequest(BaseModel):
    """One workload to predict on one device."""

    model_config = ConfigDict(
        extra="forbid",
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {"device": "nvme0", "workload": _WORKLOAD_EXAMPLE},
                {
                    "device": "nvme0",
                    "workload": {**_WORKLOAD_EXAMPLE, "numjobs": 4},
                    "metrics": ["iops", "latency_p99_us"],
                    "model": "global",
                },
            ]
        },
    )

    device: DeviceName
    workload: Workload
    metrics: list[MetricName] | None = Field(
        None, min_length=1, max_length=len(SERVED_METRICS), description="metrics to predict; default all"
    )
    model: ModelChoice = Field("auto", description=MODEL_DESCRIPTION)


class MetricPredictionOut(BaseModel):
    """One predicted metric."""

    value: float
    lower: float | None = Field(description="lower bound of the prediction interval")
    upper: float | None = Field(description="upper bound of the prediction interval")
    extrapolated: bool = Field(description="the workload lies outside what the model was trained on")
    model: str = Field(description="the model used: `global` or a region name")
    extrapolation: dict[str, float] = Field(
        default_factory=dict,
        description="when extrapolated: per workload field (or `outstanding_io`, queue depth x numjobs) "
        "how many times beyond the measured range",
        examples=[{"request_size": 4.0}],
    )


def _answer_config(**example: Any) -> ConfigDict:
    """The config of a prediction answer (``model_version`` is a field) with its docs example."""
    answered = {"device": "nvme0", "model_version": "v20261122-051700-123456"}
    return ConfigDict(protected_namespaces=(), json_schema_extra={"examples": [{**answered, **example}]})


class DerivedOut(BaseModel):
    """How a what-if device's predictions are made: a law over a measured device's model."""

    whatif: bool = True
    kind: str = Field(description="raid or fabric")
    base: str = Field(description="the measured device whose model the law reads")
    base_version: str | None = None
    law: str = Field(description="the law that produced every prediction, in words")
    calibrated_points: int = Field(0, description="measured points of the real device it was calibrated on")


class PredictResponse(BaseModel):
    """Predictions for one workload; every metric comes from the same model version."""

    model_config = _answer_config(
        predictions={
            "iops": {
                "value": 41250.0,
                "lower": 37100.0,
                "upper": 45900.0,
                "extrapolated": False,
                "model": "read-random-small",
            },
        },
    )

    device: str
    model_version: str
    predictions: dict[str, MetricPredictionOut]
    derived: DerivedOut | None = Field(
        None, description="present for a what-if device: not measured, computed from its base device's model")
    notes: dict[str, str] = Field(
        default_factory=dict,
        description="per metric, what its answer says about itself: a tail percentile that is bimodal on "
        "this device (its interval widened to cover both modes)",
    )


# Batch rows are validated by pydantic-core alone (strict JSON numbers, TypedDict rows, no
# Python validator unless a size is a string like "16k"): 10,000 rows cost milliseconds,
# where a list of ``Workload`` models would cost a hundred.  Both batch shapes are built
# from the workload's limits table, so they cannot drift from ``Workload``.
_MAX_ROWS = 1_000_000  # a hard ceiling; the configured max_batch is checked by the route


def _size_string(value: str) -> int:
    size = parse_size(value)
    limit = LIMITS["request_size"]
    if not (limit.low <= size <= limit.high) or size % SIZE_STEP:
        raise ValueError(f"size must be {limit.allowed} bytes")
    return size


def _whole(value: float) -> float:
    if not value.is_integer():
        raise ValueError("should be a whole number")
    return value


def _strict_type(limit: FieldLimit) -> Any:
    """The strict (JSON number) type of one batch value of a workload field."""
    number: Any = Annotated[limit.python_type, Strict(), Field(**limit.constraints())]  # type: ignore[name-defined]
    if limit.python_type is int:
        # JSON Schema's integer includes 32.0: take it (the batch is float columns anyway); a
        # JSON integer still takes the strict int path, in pydantic-core alone
        limits = limit.constraints()
        whole = Annotated[float, Strict(), Field(**limits), AfterValidator(_whole)]
        schema = {"type": "integer", "minimum": limits["ge"], "maximum": limits["le"],
                  **({"multipleOf": limits["multiple_of"]} if "multiple_of" in limits else {})}
        number = Annotated[number | whole, Field(union_mode="left_to_right"), WithJsonSchema(schema)]
    if limit.kind != "size":
        return number
    text = Annotated[
        str,
        Field(max_length=32, pattern=SIZE_PATTERN, json_schema_extra={
            "format": "size", "description": f"a size string whose value is {limit.allowed} bytes"}),
        AfterValidator(_size_string),
    ]
    return Annotated[number | text, Field(union_mode="left_to_right")]


def _batch_row_type() -> Any:
    """``BatchWorkload``: a workload row as a TypedDict (optional fields may be null)."""
    fields: dict[str, Any] = {}
    for limit in WORKLOAD_LIMITS:
        value = _strict_type(limit)
        if not limit.required:
            value = NotRequired[value if limit.default_from is None else value | None]
        fields[limit.name] = Annotated[value, Field(description=limit.full_description)]
    row = TypedDict("BatchWorkload", fields)  # type: ignore[misc]
    row.__doc__ = "A workload row of a batch: the fields of ``Workload`` (numbers as JSON numbers)."
    return with_config(ConfigDict(extra="forbid"))(row)


class _ColumnsBase(BaseModel):
    """Workloads column-wise: one list per field, all the same length (the fastest shape)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _same_length(self) -> _ColumnsBase:
        n = len(getattr(self, WORKLOAD_FIELDS[0]))
        for name in type(self).model_fields:
            column = getattr(self, name)
            if column is not None and len(column) != n:
                raise ValueError(f"column {name} has {len(column)} values, {WORKLOAD_FIELDS[0]} has {n}")
        return self


def _columns_type() -> type[_ColumnsBase]:
    """``WorkloadColumns``: one list per workload field (optional lists may hold nulls)."""
    fields: dict[str, Any] = {}
    for limit in WORKLOAD_LIMITS:
        value = _strict_type(limit)
        about = limit.full_description
        if limit.required:
            fields[limit.name] = (list[value], Field(min_length=1, max_length=_MAX_ROWS, description=about))  # type: ignore[valid-type]
        else:
            if limit.default_from is not None:
                value = value | None
            fields[limit.name] = (list[value] | None, Field(None, max_length=_MAX_ROWS, description=about))  # type: ignore[valid-type]
    model = create_model("WorkloadColumns", __base__=_ColumnsBase, __module__=__name__, **fields)
    model.__doc__ = _ColumnsBase.__doc__
    return model


if TYPE_CHECKING:
    BatchWorkload = dict[str, Any]
    WorkloadColumns = _ColumnsBase
else:
    BatchWorkload = _batch_row_type()
    WorkloadColumns = _columns_type()


# "exactly one of workloads and columns", in the schema's words (the validator below says it
# in pydantic's): schemathesis sent bodies with neither, which the schema allowed.
ROWS_OR_COLUMNS: dict[str, Any] = {"oneOf": [
    {"required": ["workloads"], "properties": {"workloads": {"type": "array"}}},
    {"required": ["columns"], "properties": {"columns": {"type": "object"}}},
]}


class WorkloadBatch(BaseModel):
    """Many workloads: rows (``workloads``) or columns (``columns``), exactly one of them."""

    model_config = ConfigDict(
        extra="forbid", protected_namespaces=(), json_schema_extra={"allOf": [ROWS_OR_COLUMNS]}
    )

    workloads: list[BatchWorkload] | None = Field(None, min_length=1, max_length=_MAX_ROWS)
    columns: WorkloadColumns | None = None
    metrics: list[MetricName] | None = Field(None, min_length=1, max_length=len(SERVED_METRICS))
    model: ModelChoice = Field("auto", description=MODEL_DESCRIPTION)

    @model_validator(mode="after")
    def _rows_or_columns(self) -> WorkloadBatch:
        if (self.workloads is None) == (self.columns is None):
            raise ValueError("give either workloads (rows) or columns, exactly one of them")
        return self

    @property
    def count(self) -> int:
        """Number of workloads in the batch."""
        if self.columns is not None:
            return len(getattr(self.columns, WORKLOAD_FIELDS[0]))
        return len(self.workloads or ())


class BatchPredictRequest(WorkloadBatch):
    """Many workloads on one device (at most the configured ``max_batch``): rows or columns.

    Give ``workloads`` (a list of workload objects) or ``columns`` (one list per field),
    not both.
    """

    model_config = ConfigDict(
        extra="forbid",
        protected_namespaces=(),
        json_schema_extra={
            "allOf": [ROWS_OR_COLUMNS],
            "examples": [
                {
                    "device": "nvme0",
                    "workloads": [
                        {"write_ratio": 0.0, "queue_depth": 1, "request_size": 4096, "randomness": 1.0},
                        {
                            "write_ratio": 1.0,
                            "queue_depth": 32,
                            "request_size": "128k",
                            "randomness": 0.0,
                            "numjobs": 4,
                        },
                    ],
                    "metrics": ["iops"],
                },
                {
                    "device": "nvme0",
                    "columns": {
                        "write_ratio": [0.0, 1.0],
                        "queue_depth": [1, 32],
                        "request_size": [4096, 131072],
                        "randomness": [1.0, 0.0],
                        "numjobs": [1, 4],
                    },
                },
            ]
        },
    )

    device: DeviceName


class MetricColumns(BaseModel):
    """One metric's predictions for every workload of a batch, in request order."""

    value: list[float]
    lower: list[float | None]
    upper: list[float | None]
    extrapolated: list[bool]
    model: list[str]


class BatchPredictResponse(BaseModel):
    """Batch predictions, column-wise per metric (compact and fast to encode)."""

    model_config = _answer_config(
        count=2,
        predictions={
            "iops": {
                "value": [9800.0, 2100.0],
                "lower": [8900.0, 1800.0],
                "upper": [10800.0, 2450.0],
                "extrapolated": [False, False],
                "model": ["read-random-small", "global"],
            },
        },
    )

    device: str
    model_version: str
    count: int
    predictions: dict[str, MetricColumns]
    derived: DerivedOut | None = Field(None, description="present for a what-if device")
    notes: dict[str, str] = Field(
        default_factory=dict,
        description="per metric, what its answers say about themselves: a tail percentile that is "
        "bimodal on this device (its intervals widened to cover both modes)",
    )
