"""Request and response schemas of the API; their ``Field`` limits make pydantic produce the 422s."""

from service.api.schemas.common import (
    NAME_PATTERN,
    DeviceName,
    ErrorDetail,
    ErrorResponse,
    MetricName,
    ModelChoice,
)
from service.api.schemas.jobs import Health, JobPublic, JobState, Readiness, RetrainRequest
from service.api.schemas.predict import (
    BatchPredictRequest,
    BatchPredictResponse,
    BatchWorkload,
    MetricColumns,
    MetricPredictionOut,
    PredictRequest,
    PredictResponse,
    WorkloadColumns,
)
from service.api.schemas.resources import (
    DeletedPublic,
    DevicePublic,
    DevicesPublic,
    DeviceSummary,
    ModelVersionPublic,
    ModelVersionsPublic,
    RegionPublic,
    SweepPublic,
    WorkloadModelsPublic,
)

__all__ = [
    "NAME_PATTERN",
    "BatchPredictRequest",
    "BatchPredictResponse",
    "BatchWorkload",
    "DeletedPublic",
    "DeviceName",
    "DevicePublic",
    "DeviceSummary",
    "DevicesPublic",
    "ErrorDetail",
    "ErrorResponse",
    "Health",
    "JobPublic",
    "JobState",
    "MetricColumns",
    "MetricName",
    "MetricPredictionOut",
    "ModelChoice",
    "ModelVersionPublic",
    "ModelVersionsPublic",
    "PredictRequest",
    "PredictResponse",
    "Readiness",
    "RegionPublic",
    "RetrainRequest",
    "SweepPublic",
    "WorkloadColumns",
    "WorkloadModelsPublic",
]
