"""Request and response schemas of the API; their ``Field`` limits make pydantic produce the 422s."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, get_args

# pydantic needs typing_extensions' TypedDict before Python 3.12.
from typing_extensions import TypedDict

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, with_config

from modeling.workload import MAX_REQUEST_SIZE, METRICS, REGION_NAMES, Workload, parse_size

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""The rule of ``modeling.store.validate_name``, stated in the schema so clients see it."""

DeviceName = Annotated[
    str, Field(pattern=NAME_PATTERN, max_length=128, description="device name", examples=["nvme0"])
]
MetricName = Literal["latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"]
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
assert set(get_args(MetricName)) == set(METRICS)
assert set(get_args(ModelChoice)) == {"auto", "global", *REGION_NAMES}

_MODEL_DESCRIPTION = "`auto` (region model where it beats the global one), `global`, or a region name"


class ErrorDetail(BaseModel):
    """The body of every error response."""

    code: str = Field(description="stable machine-readable error code", examples=["unknown_device"])
    message: str = Field(description="human-readable explanation")
    details: Any = Field(None, description="structured extra information (e.g. invalid fields)")


class ErrorResponse(BaseModel):
    """Every error answers ``{"error": {"code", "message", "details"}}``."""

    error: ErrorDetail


# -- prediction ------------------------------------------------------------------------

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
        None, min_length=1, max_length=len(METRICS), description="metrics to predict; default all"
    )
    model: ModelChoice = Field("auto", description=_MODEL_DESCRIPTION)


class MetricPredictionOut(BaseModel):
    """One predicted metric."""

    value: float
    lower: float | None = Field(description="lower bound of the prediction interval")
    upper: float | None = Field(description="upper bound of the prediction interval")
    extrapolated: bool = Field(description="the workload lies outside what the model was trained on")
    model: str = Field(description="the model used: `global` or a region name")


class PredictResponse(BaseModel):
    """Predictions for one workload; every metric comes from the same model version."""

    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "device": "nvme0",
                    "model_version": "v20261122-051700-123456",
                    "predictions": {
                        "iops": {
                            "value": 41250.0,
                            "lower": 37100.0,
                            "upper": 45900.0,
                            "extrapolated": False,
                            "model": "read-random-small",
                        },
                    },
                }
            ]
        },
    )

    device: str
    model_version: str
    predictions: dict[str, MetricPredictionOut]


# Batch rows are validated by pydantic-core alone (strict JSON numbers, TypedDict rows, no
# Python validator unless a size is a string like "16k"): 10,000 rows cost milliseconds,
# where a list of ``Workload`` models would cost a hundred.
def _size_string(value: str) -> int:
    size = parse_size(value)
    if not (512 <= size <= MAX_REQUEST_SIZE) or size % 512:
        raise ValueError(f"size must be 512..{MAX_REQUEST_SIZE} bytes and a multiple of 512")
    return size


_SizeInt = Annotated[int, Strict(), Field(ge=512, le=MAX_REQUEST_SIZE, multiple_of=512)]
_SizeStr = Annotated[str, Field(max_length=32), AfterValidator(_size_string)]
BatchSize = Annotated[_SizeInt | _SizeStr, Field(union_mode="left_to_right")]
BatchFraction = Annotated[float, Strict(), Field(ge=0.0, le=1.0, allow_inf_nan=False)]


@with_config(ConfigDict(extra="forbid"))
class BatchWorkload(TypedDict):
    """A workload row of a batch: the fields of ``Workload`` (numbers as JSON numbers)."""

    write_ratio: BatchFraction
    queue_depth: Annotated[int, Strict(), Field(ge=1, le=4096)]
    request_size: BatchSize
    randomness: BatchFraction
    numjobs: NotRequired[Annotated[int, Strict(), Field(ge=1, le=1024)]]
    read_size: NotRequired[BatchSize | None]
    write_size: NotRequired[BatchSize | None]
    read_randomness: NotRequired[BatchFraction | None]
    write_randomness: NotRequired[BatchFraction | None]


class BatchPredictRequest(BaseModel):
    """Many workloads to predict on one device (at most the configured ``max_batch``)."""

    model_config = ConfigDict(
        extra="forbid",
        protected_namespaces=(),
        json_schema_extra={
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
                }
            ]
        },
    )

    device: DeviceName
    workloads: list[BatchWorkload] = Field(min_length=1, max_length=1_000_000)
    metrics: list[MetricName] | None = Field(None, min_length=1, max_length=len(METRICS))
    model: ModelChoice = Field("auto", description=_MODEL_DESCRIPTION)


class MetricColumns(BaseModel):
    """One metric's predictions for every workload of a batch, in request order."""

    value: list[float]
    lower: list[float | None]
    upper: list[float | None]
    extrapolated: list[bool]
    model: list[str]


class BatchPredictResponse(BaseModel):
    """Batch predictions, column-wise per metric (compact and fast to encode)."""

    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "device": "nvme0",
                    "model_version": "v20261122-051700-123456",
                    "count": 2,
                    "predictions": {
                        "iops": {
                            "value": [9800.0, 2100.0],
                            "lower": [8900.0, 1800.0],
                            "upper": [10800.0, 2450.0],
                            "extrapolated": [False, False],
                            "model": ["read-random-small", "global"],
                        },
                    },
                }
            ]
        },
    )

    device: str
    model_version: str
    count: int
    predictions: dict[str, MetricColumns]


# -- devices, sweeps, models -----------------------------------------------------------


class SweepPublic(BaseModel):
    """A sweep or ingest of a device."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": 3,
                    "source": "ingest",
                    "status": "complete",
                    "n_points": 98,
                    "n_planned": 98,
                    "target": None,
                    "info": {"upload": "randread-1-1.json", "n_files": 1},
                    "created_at": "2026-11-22T05:10:00.000+00:00",
                    "finished_at": "2026-11-22T05:10:00.100+00:00",
                }
            ]
        }
    )

    id: int
    source: str = Field(description="`sweep` (measured here) or `ingest` (uploaded/imported)")
    status: str = Field(description="`running` or `complete`")
    n_points: int
    n_planned: int
    target: str | None
    info: dict[str, Any]
    created_at: str
    finished_at: str | None


class ModelVersionPublic(BaseModel):
    """A stored model version; ``accuracy`` is the cross-validated mean relative error per metric."""

    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "version": "v20261122-051700-123456",
                    "active": True,
                    "created_at": "2026-11-22T05:17:00",
                    "accuracy": {"iops": 0.05, "latency_mean_us": 0.07},
                    "n_rows": 98,
                    "regions": ["read-random-small"],
                }
            ]
        },
    )

    version: str
    active: bool
    created_at: str
    accuracy: dict[str, float | None] = Field(description="cross-validated MRE per metric")
    n_rows: int | None = Field(None, description="measured points the model was trained on")
    regions: list[str] = Field(default_factory=list, description="regions that had data")


class DeviceSummary(BaseModel):
    """A device in the list."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    device_class: str = Field(alias="class")
    created_at: str
    active_model_version: str | None


class DevicesPublic(BaseModel):
    """All known devices."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "devices": [
                        {
                            "name": "nvme0",
                            "class": "ssd",
                            "created_at": "2026-11-22T05:10:00",
                            "active_model_version": "v20261122-051700-123456",
                        }
                    ],
                    "count": 1,
                }
            ]
        }
    )

    devices: list[DeviceSummary]
    count: int


class DevicePublic(BaseModel):
    """One device: class, metadata, sweeps and the active model with its accuracy."""

    model_config = ConfigDict(
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {
                    "name": "nvme0",
                    "class": "ssd",
                    "metadata": {"model": "Samsung PM9A1"},
                    "created_at": "2026-11-22T05:10:00",
                    "sweeps": [],
                    "active_model": None,
                }
            ]
        },
    )

    name: str
    device_class: str = Field(alias="class")
    metadata: dict[str, Any]
    created_at: str
    sweeps: list[SweepPublic]
    active_model: ModelVersionPublic | None


class ModelVersionsPublic(BaseModel):
    """A device's model versions, oldest first."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"device": "nvme0", "versions": [], "active": None}]}
    )

    device: str
    versions: list[ModelVersionPublic]
    active: str | None


class RegionPublic(BaseModel):
    """A workload-specific model region."""

    name: str
    definition: str
    write_dominant: bool
    random: bool
    small: bool


class WorkloadModelsPublic(BaseModel):
    """The model choices: the global model and the eight regions."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "choices": ["auto", "global", "read-random-small"],
                    "regions": [
                        {
                            "name": "read-random-small",
                            "definition": "write_ratio <= 0.5, randomness >= 0.5, request_size <= 32 KiB",
                            "write_dominant": False,
                            "random": True,
                            "small": True,
                        }
                    ],
                }
            ]
        }
    )

    choices: list[str]
    regions: list[RegionPublic]


# -- jobs ------------------------------------------------------------------------------

JobState = Literal["queued", "running", "succeeded", "failed"]


class RetrainRequest(BaseModel):
    """Options of a retrain; all optional."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"folds": 5}, {"folds": 3, "time_budget_s": 60}]}
    )

    folds: int = Field(5, ge=2, le=20, description="cross-validation folds")
    time_budget_s: float | None = Field(
        None, gt=0, le=86_400, allow_inf_nan=False, description="rough limit on training time"
    )


class JobPublic(BaseModel):
    """A background job (a retrain): state, progress, and its result or error."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2a9c0d4e5b6a7980716253443a2b1c",
                    "kind": "retrain",
                    "device": "nvme0",
                    "state": "running",
                    "stage": "iops",
                    "progress": 0.4,
                    "created_at": "2026-11-22T05:20:00.000+00:00",
                    "started_at": "2026-11-22T05:20:00.010+00:00",
                    "finished_at": None,
                    "result": None,
                    "error": None,
                }
            ]
        }
    )

    id: str
    kind: str
    device: str
    state: JobState
    stage: str | None
    progress: float
    created_at: str
    started_at: str | None
    finished_at: str | None
    result: dict[str, Any] | None
    error: ErrorDetail | None


# -- health ----------------------------------------------------------------------------


class Health(BaseModel):
    """Liveness."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok", "version": "0.1.0"}]})

    status: str
    version: str


class Readiness(BaseModel):
    """Readiness: the catalog answers and every active model has been loaded."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"ready": True, "models": {"nvme0": "v20261122-051700-123456"}, "errors": {}}]
        }
    )

    ready: bool
    models: dict[str, str] = Field(description="device -> loaded active model version")
    errors: dict[str, str] = Field(description="device -> why its model could not be loaded")
