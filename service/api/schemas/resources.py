"""Schemas of devices, sweeps, model versions and workload regions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from modeling.store import ModelVersion, Sweep
from modeling.workload import Region


class DeletedPublic(BaseModel):
    """What a delete removed."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"device": "nvme0", "sweeps": 2, "points": 96, "models": 3}]}
    )

    device: str
    sweeps: int
    points: int
    models: int


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

    @classmethod
    def from_sweep(cls, sweep: Sweep) -> SweepPublic:
        """The public view of a stored sweep."""
        return cls.model_validate(sweep, from_attributes=True)


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

    @classmethod
    def from_version(cls, mv: ModelVersion) -> ModelVersionPublic:
        """The public view of a stored model version (a few fields of its manifest)."""
        manifest = mv.manifest
        data = manifest.get("data")
        data = data if isinstance(data, dict) else {}
        return cls(
            version=mv.version,
            active=mv.active,
            created_at=mv.created_at,
            accuracy=dict(manifest.get("cv_mre") or {}),
            n_rows=data.get("n_rows"),
            regions=list(manifest.get("data_regions") or []),
        )


class DeviceSummary(BaseModel):
    """A device in the list."""

    name: str
    device_class: str = Field(serialization_alias="class")
    created_at: str
    active_model_version: str | None
    derived: dict[str, Any] | None = Field(
        None, description="a what-if device's spec (kind, base device, law parameters); null when measured")


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
    device_class: str = Field(serialization_alias="class")
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

    @classmethod
    def from_region(cls, region: Region) -> RegionPublic:
        """The public view of a workload region."""
        return cls(
            name=region.name,
            definition=region.description,
            write_dominant=region.write_dominant,
            random=region.random,
            small=region.small,
        )


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
