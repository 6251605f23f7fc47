"""Schemas of /v1/capacity and /v1/fleet/capacity: the most IO/s of a mix under a latency target."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from modeling.workload import Workload
from service.api.schemas.common import DeviceName, SloText
from service.api.schemas.fleet import ONE_SELECTION, DeviceSelection, SkippedDeviceOut
from traces.capacity.device import MIX_FIELDS

MAX_MIXES = 100
"""Mixes in one request: each distinct one is a search (15-40 ms here), on every device named."""

WorkloadMix: Any = create_model(  # type: ignore[call-overload]
    "WorkloadMix",
    __config__=ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"write_ratio": 0.3, "request_size": "16k", "randomness": 1.0}]},
    ),
    __doc__="A workload without a load: the offered rate sets the queue depth, so there is none.",
    **{name: (Workload.model_fields[name].annotation, Workload.model_fields[name]) for name in MIX_FIELDS},
)
"""The workload's own fields and limits (:class:`modeling.workload.Workload`), less ``queue_depth``
and ``numjobs``."""

_SLO = Field(
    description="latency targets that must all hold, each `mean` or `p99`, `<=` and a duration with a "
    "unit: `p99<=1ms` or `p99<=1ms,mean<=200us`",
    examples=["p99<=1ms,mean<=200us"],
)
_BURSTINESS = Field(
    1.0, gt=0, le=1e4, description="squared coefficient of variation of the arrival gaps (1: Poisson)"
)


class CapacityRequest(BaseModel):
    """One device, one or more mixes, one SLO."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "device": "nvme0",
                    "workloads": [{"write_ratio": 0.3, "request_size": "16k", "randomness": 1}],
                    "slo": "p99<=1ms,mean<=200us",
                }
            ]
        },
    )

    device: DeviceName
    workloads: list[WorkloadMix] = Field(min_length=1, max_length=MAX_MIXES)  # type: ignore[valid-type]
    slo: SloText = _SLO
    burstiness: float = _BURSTINESS


class FleetCapacityRequest(DeviceSelection):
    """Many devices (names, globs or all), one or more mixes, one SLO."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [ONE_SELECTION],
            "examples": [
                {
                    "all_devices": True,
                    "workloads": [{"write_ratio": 0.3, "request_size": "16k", "randomness": 1}],
                    "slo": "p99<=1ms",
                }
            ]
        },
    )

    workloads: list[WorkloadMix] = Field(min_length=1, max_length=MAX_MIXES)  # type: ignore[valid-type]
    slo: SloText = _SLO
    burstiness: float = _BURSTINESS


class CapacityAnswerOut(BaseModel):
    """How much of one mix a device takes under the SLO, and why."""

    workload: dict[str, float | int] = Field(description="the mix, defaults filled in")
    slo: str
    outcome: Literal["limited", "saturation", "measured", "never"] = Field(
        description="`limited`: a target binds below capacity; `saturation`: the targets hold even at "
        "saturation (the answer is the capacity); `measured`: they hold up to the fastest open-loop "
        "point served in full, below capacity, and the answer stops there; `never`: no load meets them "
        "(the answer is 0 and the "
        "latencies are the lightest load's)"
    )
    iops: float = Field(description="the largest offered IO/s whose predicted latency meets every target")
    iops_lower: float | None = Field(description="the same search on the model's upper latency bound")
    iops_upper: float | None = Field(description="the same search on the model's lower latency bound")
    bandwidth_mib_s: float
    capacity_iops: float = Field(description="the device's throughput at this mix")
    utilisation: float = Field(description="iops over capacity_iops")
    inflight: float = Field(description="requests in flight at the answer (Little's law)")
    binding: str | None = Field(description="the target that breaks first; none at saturation or never")
    latency_mean_us: float | None = Field(description="predicted at the answer (never: at the lightest load)")
    latency_p99_us: float | None
    beyond_measured: bool = Field(description="the answer rests on the model beyond what was measured")
    notes: list[str]


_ANSWER_EXAMPLE: dict[str, Any] = {
    "workload": {"write_ratio": 0.3, "request_size": 16384, "randomness": 1.0},
    "slo": "p99<=1ms",
    "outcome": "limited",
    "iops": 41200.0,
    "iops_lower": 36900.0,
    "iops_upper": 44800.0,
    "bandwidth_mib_s": 643.8,
    "capacity_iops": 52000.0,
    "utilisation": 0.79,
    "inflight": 6.1,
    "binding": "p99<=1ms",
    "latency_mean_us": 148.0,
    "latency_p99_us": 1000.0,
    "beyond_measured": False,
    "notes": [],
}


class CapacityResponse(BaseModel):
    """One device's answers, one per mix in request order."""

    model_config = ConfigDict(
        protected_namespaces=(),
        json_schema_extra={
            "examples": [
                {
                    "device": "nvme0",
                    "model_version": "v20261122-051700-123456",
                    "slo": "p99<=1ms",
                    "arrival_cv2": 1.0,
                    "open_loop_points": True,
                    "notes": [],
                    "answers": [_ANSWER_EXAMPLE],
                }
            ]
        },
    )

    device: str
    model_version: str
    slo: str
    arrival_cv2: float
    open_loop_points: bool = Field(
        description="whether the device has open-loop points (else the latency "
        "under load is the closed-loop method's alone)"
    )
    notes: list[str]
    answers: list[CapacityAnswerOut]


class RankedCapacityOut(CapacityAnswerOut):
    """One device's answer for a mix, with its rank."""

    model_config = ConfigDict(protected_namespaces=())

    rank: int = Field(description="1: the most headroom")
    device: str
    model_version: str
    open_loop_points: bool


class MixRankingOut(BaseModel):
    """One mix and its devices, most headroom first."""

    workload: dict[str, float | int]
    ranking: list[RankedCapacityOut]


class FleetCapacityResponse(BaseModel):
    """Per mix in request order, the devices ranked by headroom; the marked and the skipped devices."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "slo": "p99<=1ms",
                    "arrival_cv2": 1.0,
                    "mixes": [
                        {
                            "workload": _ANSWER_EXAMPLE["workload"],
                            "ranking": [
                                {
                                    **_ANSWER_EXAMPLE,
                                    "rank": 1,
                                    "device": "nvme0",
                                    "model_version": "v20261122-051700-123456",
                                    "open_loop_points": True,
                                }
                            ],
                        }
                    ],
                    "without_open_loop_points": [],
                    "device_notes": {},
                    "skipped": [],
                }
            ]
        }
    )

    slo: str
    arrival_cv2: float
    mixes: list[MixRankingOut]
    without_open_loop_points: list[str] = Field(
        description="ranked devices whose latency under load is the closed-loop method's alone"
    )
    device_notes: dict[str, list[str]]
    skipped: list[SkippedDeviceOut]
