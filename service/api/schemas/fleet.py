"""Schemas of the endpoints acting on many devices: /v1/fleet/predict and /v1/retrain."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from modeling.workload import METRICS
from service.api.schemas.common import EstimatorKind, MetricName
from service.api.schemas.jobs import RetrainRequest
from service.api.schemas.predict import ROWS_OR_COLUMNS, MetricColumns, WorkloadBatch

_MAX_PATTERNS = 10_000

RankMetric = Literal["latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"]
"""The metrics devices can be ranked by: every trained model's (the further percentiles are not)."""
assert set(get_args(RankMetric)) == set(METRICS)

DevicePattern = Annotated[
    str,
    Field(
        # a device name (modeling.store.names), or a shell glob over names: one of * ? [ at
        # least, after a prefix that starts like a name (a name with ] or ! but no glob
        # character is neither, and was refused as a name after the schema allowed it)
        pattern=r"^(?:[A-Za-z0-9][A-Za-z0-9._@:-]*|(?:[A-Za-z0-9][A-Za-z0-9._@:!\]-]*)?[*?\[][A-Za-z0-9._@:*?\[\]!-]*)$",
        max_length=128,
        description="a device name or a glob over names (`ssd-*`)",
        examples=["nvme0", "ssd-*"],
    ),
]


# "exactly one of devices and all_devices: true", in the schema's words (the validator below
# says it in pydantic's): schemathesis sent bodies with neither, which the schema allowed.
ONE_SELECTION: dict[str, Any] = {"oneOf": [
    {"required": ["devices"], "properties": {"devices": {"type": "array"}, "all_devices": {"const": False}}},
    {"required": ["all_devices"],
     "properties": {"all_devices": {"const": True}, "devices": {"type": "null"}}},
]}


class DeviceSelection(BaseModel):
    """Which devices: `devices` (names or globs) or `all_devices`, exactly one of them."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"allOf": [ONE_SELECTION]})

    devices: list[DevicePattern] | None = Field(
        None, min_length=1, max_length=_MAX_PATTERNS, description="device names or globs (`ssd-*`)"
    )
    all_devices: bool = Field(False, description="every device of the catalog")

    @model_validator(mode="after")
    def _one_selection(self) -> DeviceSelection:
        if (self.devices is not None) == self.all_devices:
            raise ValueError("give either devices (names or globs) or all_devices: true, exactly one of them")
        return self


class FleetPredictRequest(WorkloadBatch, DeviceSelection):
    """Workloads to rank devices for (at most the configured ``max_batch``): rows or columns,
    as in ``/v1/predict/batch``, and the devices instead of one device."""

    model_config = ConfigDict(
        extra="forbid",
        protected_namespaces=(),
        json_schema_extra={
            "allOf": [ROWS_OR_COLUMNS, ONE_SELECTION],
            "examples": [
                {
                    "devices": ["ssd-*", "nvme0"],
                    "workloads": [
                        {"write_ratio": 0.3, "queue_depth": 8, "request_size": "16k", "randomness": 1}
                    ],
                },
                {
                    "all_devices": True,
                    "columns": {
                        "write_ratio": [0.0, 1.0],
                        "queue_depth": [1, 32],
                        "request_size": [4096, 131072],
                        "randomness": [1.0, 0.0],
                    },
                    "rank_by": "iops",
                    "top": 3,
                },
            ]
        },
    )

    rank_by: RankMetric = Field(
        "latency_p99_us",
        description="the metric devices are ranked by: lowest first for the latencies, highest first "
        "for `iops` and `bandwidth_mib_s`",
    )
    top: int | None = Field(
        None, ge=1, le=_MAX_PATTERNS, description="keep each workload's best `top` devices"
    )


class DeviceForecastOut(BaseModel):
    """One device's predictions of every workload, from its active model version."""

    model_config = ConfigDict(protected_namespaces=())

    model_version: str
    predictions: dict[str, MetricColumns]


class SkippedDeviceOut(BaseModel):
    """A device left out of the ranking, and why."""

    device: str
    code: str = Field(description="the error code (`no_model`, `not_found`, `corrupt_model`)")
    reason: str


class FleetPredictResponse(BaseModel):
    """Devices ranked for each workload, with every ranked device's predictions (column-wise)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "rank_by": "latency_p99_us",
                    "higher_is_better": False,
                    "count": 1,
                    "devices": {
                        "nvme0": {
                            "model_version": "v20261122-051700-123456",
                            "predictions": {
                                "latency_p99_us": {
                                    "value": [310.0],
                                    "lower": [250.0],
                                    "upper": [390.0],
                                    "extrapolated": [False],
                                    "model": ["read-random-small"],
                                }
                            },
                        }
                    },
                    "ranking": [["nvme0"]],
                    "skipped": [{"device": "ssd-new", "code": "no_model", "reason": "no trained model yet"}],
                }
            ]
        }
    )

    rank_by: MetricName
    higher_is_better: bool
    count: int = Field(description="number of workloads")
    devices: dict[str, DeviceForecastOut] = Field(description="every ranked device's predictions")
    ranking: list[list[str]] = Field(description="per workload, in request order: the devices, best first")
    skipped: list[SkippedDeviceOut]


class FleetRetrainRequest(RetrainRequest, DeviceSelection):
    """Retrain many devices in one job: the devices, and the options of a one-device retrain."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [ONE_SELECTION],
            "examples": [
                {"all_devices": True, "candidates": ["cart"], "folds": 2},
                {"devices": ["ssd-*"], "folds": 3, "time_budget_s": 60},
                {"devices": ["ssd-new-*"], "reference": "nvme0"},
            ]
        },
    )

    candidates: list[EstimatorKind] | None = Field(
        None, min_length=1, max_length=16,
        description="only these estimator kinds, untuned: the fast configuration for a large fleet "
        "(e.g. `[\"cart\"]`; the kinds are cart, xgboost, extra_trees, load_gated, gp); default: "
        "the full selection and tuning within `time_budget_s`",
    )
