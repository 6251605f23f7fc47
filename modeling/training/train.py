"""Train a device: read its measurements, fit every metric, save and register a version."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any
from collections.abc import Callable

import numpy as np
import pandas as pd

from modeling.training.fit import fit_device_model, training_rows
from modeling.serving.registry import save_model
from modeling.store import DataDir, ModelVersion
from modeling.workload import METRICS, WORKLOAD_FIELDS


def data_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of the training rows' workload and metric columns (order-independent)."""
    cols = [c for c in WORKLOAD_FIELDS + METRICS if c in frame.columns]
    canon = frame[cols].astype(float).round(9)
    canon = canon.sort_values(cols, kind="mergesort").reset_index(drop=True)
    return hashlib.sha256(canon.to_csv(index=False).encode()).hexdigest()


def new_version(datadir: DataDir, device: str) -> str:
    """A fresh, sortable version name such as ``v20261122-051700-123456``."""
    base = "v" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    taken = {mv.version for mv in datadir.catalog.list_model_versions(device)}
    version, n = base, 1
    while version in taken or (datadir.device_models_dir(device) / version).exists():
        n += 1
        version = f"{base}-{n}"
    return version


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
    catalog = datadir.catalog
    catalog.get_device(device)
    frame = catalog.measurements(device)
    _, _, clean = training_rows(frame)  # raises NoData early, before any work
    version = new_version(datadir, device)
    model, summary = fit_device_model(
        frame,
        device=device,
        version=version,
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
        # the stored evaluation's MRE: what `models list`, the API and `make run` all show
        "cv_mre": {m: float(summary["evaluation"]["metrics"][m]["mre"]) for m in METRICS},
        "time_budget_s": time_budget_s,
    }
    if progress:
        progress("saving", 1.0)
    return save_model(datadir, model, _jsonable(manifest), activate=activate)


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
