"""Train a device: read its measurements, fit every metric, save and register a version."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from modeling.serving.registry import register_models, write_model_files
from modeling.training.fit import fit_device_model, training_rows
from modeling.store import DataDir, ModelVersion
from modeling.store.catalog import read_measurement_files
from modeling.workload import METRICS, WORKLOAD_FIELDS


def data_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of the training rows' workload and metric columns (order-independent)."""
    cols = [c for c in WORKLOAD_FIELDS + METRICS if c in frame.columns]
    canon = frame[cols].astype(float).round(9)
    canon = canon.sort_values(cols, kind="mergesort").reset_index(drop=True)
    return hashlib.sha256(canon.to_csv(index=False).encode()).hexdigest()


def new_version(datadir: DataDir, device: str) -> str:
    """A fresh, sortable version name such as ``v20261122-051700-123456``."""
    return plan_fits(datadir, [device])[0].version


@dataclass(frozen=True)
class FitPlan:
    """What fitting one device needs from the catalog: its new version's name and its data files."""

    device: str
    version: str
    files: tuple[tuple[int, str], ...]  # (sweep id, Parquet file under measurements/) of complete sweeps


@dataclass(frozen=True)
class FittedVersion:
    """A model version whose files are written but which the catalog does not know yet."""

    device: str
    version: str
    manifest: dict[str, Any]


def plan_fits(datadir: DataDir, devices: Sequence[str]) -> list[FitPlan]:
    """Plan the fits of ``devices`` from the catalog in two queries; raises ``UnknownDevice``.

    Version names are ``v<UTC time to the microsecond>``, one microsecond apart within a
    plan (names are unique across all devices), so they sort by training time.
    """
    catalog = datadir.catalog
    files = catalog.measurement_files(devices)
    taken = catalog.model_version_names()
    start = datetime.now(timezone.utc)
    plans = []
    for i, device in enumerate(files):
        base = "v" + (start + timedelta(microseconds=i)).strftime("%Y%m%d-%H%M%S-%f")
        version, n = base, 1
        while version in taken or (datadir.device_models_dir(device) / version).exists():
            n += 1
            version = f"{base}-{n}"
        taken.add(version)
        plans.append(FitPlan(device, version, tuple(files[device])))
    return plans


def fit_version(
    datadir: DataDir,
    device: str,
    *,
    folds: int = 5,
    time_budget_s: float | None = None,
    progress: Callable[[str, float], None] | None = None,
    **fit_kw: Any,
) -> FittedVersion:
    """Fit all metrics of ``device`` and write the new version's files; the catalog is only read.

    Raises ``UnknownDevice``, or ``NoData`` when there are too few measured points.
    """
    plan = plan_fits(datadir, [device])[0]
    return fit_plan(datadir, plan, folds=folds, time_budget_s=time_budget_s, progress=progress, **fit_kw)


def fit_plan(
    datadir: DataDir,
    plan: FitPlan,
    *,
    folds: int = 5,
    time_budget_s: float | None = None,
    progress: Callable[[str, float], None] | None = None,
    **fit_kw: Any,
) -> FittedVersion:
    """Fit a planned device and write its version's files, touching files only (never the catalog).

    What a Dask worker runs: it reads the plan's Parquet files and writes under
    ``models/``, so many processes, on many hosts sharing the data directory, can run it at
    once while one client registers their results (:func:`register_versions`).  SQLite
    itself stays on the client's host.  Raises ``NoData`` when there are too few points.
    """
    frame = read_measurement_files(datadir.measurements_dir, plan.files)
    _, _, clean = training_rows(frame)  # raises NoData early, before any work
    model, summary = fit_device_model(
        frame,
        device=plan.device,
        version=plan.version,
        folds=folds,
        time_budget_s=time_budget_s,
        progress=progress,
        **fit_kw,
    )
    sweep_ids = sorted(int(s) for s in clean["sweep_id"].unique()) if "sweep_id" in clean else []
    fio_versions = (
        sorted(str(v) for v in clean["fio_version"].dropna().unique()) if "fio_version" in clean else []
    )
    manifest = {
        **summary,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "data": {
            "sha256": data_hash(clean),
            "sweep_ids": sweep_ids,
            "fio_versions": fio_versions,
            "n_rows": int(len(clean)),
        },
        "cv_mre": {m: float(summary["metrics"][m]["global"]["cv_mre"]) for m in METRICS},
        "time_budget_s": time_budget_s,
    }
    if progress:
        progress("saving", 1.0)
    full = write_model_files(datadir, model, _jsonable(manifest))
    return FittedVersion(plan.device, plan.version, full)


def register_versions(
    datadir: DataDir, fitted: list[FittedVersion], *, activate: bool = True
) -> list[ModelVersion]:
    """Record fitted versions in the catalog, in one transaction (by default active): the client's half."""
    return register_models(datadir, [f.manifest for f in fitted], activate=activate)


def train_device(
    datadir: DataDir,
    device: str,
    *,
    folds: int = 5,
    time_budget_s: float | None = None,
    progress: Callable[[str, float], None] | None = None,
    activate: bool = True,
    **fit_kw: Any,
) -> ModelVersion:
    """Train all metrics of ``device`` and register a new (by default active) model version.

    Raises ``UnknownDevice``, or ``NoData`` when there are too few measured points.  Any
    failure leaves the registered versions, and the active one, as they were.
    """
    fitted = fit_version(
        datadir, device, folds=folds, time_budget_s=time_budget_s, progress=progress, **fit_kw
    )
    return register_versions(datadir, [fitted], activate=activate)[0]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value
