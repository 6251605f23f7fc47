"""Typed records of the catalog's rows: devices, sweeps and model versions."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from modeling.errors import CatalogCorrupt


def load_json(text: Any, what: str) -> Any:
    """A JSON column's value; a damaged one raises ``CatalogCorrupt`` rather than a traceback."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CatalogCorrupt(
            f"the catalog is damaged: a stored {what} is not valid JSON ({exc}). Recover with "
            "`ssdpredict catalog rebuild`, which rebuilds it from the Parquet measurements and "
            "model files",
            details={"detail": f"bad JSON in {what}"},
        ) from None


def utcnow() -> str:
    """Current UTC time as an ISO 8601 string."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Device:
    """A device in the catalog."""

    id: int
    name: str
    device_class: str
    metadata: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class Sweep:
    """A sweep (or ingest) of a device: a set of measured points."""

    id: int
    device_id: int
    source: str
    plan_key: str | None
    plan: dict[str, Any]
    target: str | None
    n_planned: int
    status: str
    info: dict[str, Any]
    parquet: str | None
    created_at: str
    finished_at: str | None
    n_points: int = 0


@dataclass(frozen=True)
class ModelVersion:
    """A stored model version of a device (all metrics trained together)."""

    version: str
    device: str
    active: bool
    path: str
    manifest: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""



def device_from_row(row: sqlite3.Row) -> Device:
    return Device(
        id=row["id"],
        name=row["name"],
        device_class=row["class"],
        metadata=load_json(row["metadata"], "device metadata"),
        created_at=row["created_at"],
    )


def sweep_from_row(row: sqlite3.Row) -> Sweep:
    return Sweep(
        id=row["id"],
        device_id=row["device_id"],
        source=row["source"],
        plan_key=row["plan_key"],
        plan=load_json(row["plan"], "sweep plan"),
        target=row["target"],
        n_planned=row["n_planned"],
        status=row["status"],
        info=load_json(row["info"], "sweep info"),
        parquet=row["parquet"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        n_points=row["n_points"] if "n_points" in row.keys() else 0,
    )


def model_from_row(row: sqlite3.Row, device: str) -> ModelVersion:
    return ModelVersion(
        version=row["version"],
        device=device,
        active=bool(row["active"]),
        path=row["path"],
        manifest=load_json(row["manifest"], "model manifest"),
        created_at=row["created_at"],
    )
