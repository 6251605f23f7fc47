"""Train a device: read its measurements, fit every metric, save and register a version."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from modeling.serving.device_model import DeviceModel
from modeling.serving.registry import read_model, register_models, save_model, write_model_files
from modeling.training.fit import fit_device_model, training_rows
from modeling.training.transfer import MIN_TRANSFER_ROWS, fit_with_reference, load_reference
from modeling.store import DataDir, ModelVersion
from modeling.store.catalog import read_measurement_files
from modeling.store.files.locks import DeviceLock
from modeling.workload import METRICS, WORKLOAD_FIELDS


ACTIVATION_MARGIN = 0.10
"""A new version may be this much (relative) worse than the active one and still be activated."""
NOISE_SE = 2.0
"""... or this many standard errors of the difference of the two cross-validated errors."""
DEFAULT_FOLDS = 5


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
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    lock: DeviceLock | None = None,
    job_id: str | None = None,
    force_activate: bool = False,
    reference: str | None = None,
    **fit_kw: Any,
) -> ModelVersion:
    """Train all metrics of ``device`` and register a new (by default active) model version.

    With ``reference`` (another device with an active model) the model is that device's
    corrected by this one's measurements, or trained from scratch if cross-validation on
    this device's points prefers it (:mod:`modeling.training.transfer`); ``UnknownDevice``
    or ``NoModel`` when the reference does not exist or has no model.

    Raises ``UnknownDevice``, or ``NoData`` when there are too few measured points.  Any
    failure leaves the registered versions, and the active one, as they were.  With
    ``activate`` the new version becomes active only if it is not worse than the active
    one beyond noise (see :func:`activation_decision`), or with ``force_activate``; the
    manifest's ``activation`` says what was decided and why.  The
    device's writer lock is held throughout (``DeviceBusy`` if another writer has it,
    unless ``wait``); a caller that already holds it passes it as ``lock``.  ``job_id``
    names the catalog job that ends as succeeded when the version is registered.
    """
    with lock or datadir.device_lock(device, "train", wait=wait, on_wait=on_wait):
        return _train(datadir, device, folds=folds, time_budget_s=time_budget_s, progress=progress,
                      activate=activate, force_activate=force_activate, job_id=job_id,
                      reference=reference, **fit_kw)


def _train(
    datadir: DataDir,
    device: str,
    *,
    folds: int,
    time_budget_s: float | None,
    progress: Callable[[str, float], None] | None,
    activate: bool,
    force_activate: bool,
    job_id: str | None,
    reference: str | None = None,
    **fit_kw: Any,
) -> ModelVersion:
    catalog = datadir.catalog
    catalog.get_device(device)
    ref = load_reference(datadir, device, reference) if reference else None
    frame = catalog.measurements(device)
    # raises NoData early, before any work
    _, _, clean = training_rows(frame, MIN_TRANSFER_ROWS) if ref else training_rows(frame)
    version = new_version(datadir, device)
    model, manifest = _fit(frame, clean, device, version, folds, time_budget_s, progress, ref=ref, **fit_kw)
    decision = activation_decision(catalog.active_model_version(device), manifest, activate=activate,
                                   force=force_activate)
    manifest["activation"] = decision
    if progress:
        progress("saving", 1.0)
    return save_model(datadir, model, _jsonable(manifest), activate=decision["activated"], job_id=job_id)


def _fit(
    frame: pd.DataFrame,
    clean: pd.DataFrame,
    device: str,
    version: str,
    folds: int,
    time_budget_s: float | None,
    progress: Callable[[str, float], None] | None,
    ref: DeviceModel | None = None,
    **fit_kw: Any,
) -> tuple[DeviceModel, dict[str, Any]]:
    """Fit every metric and describe the version (its manifest, before activation is decided).

    With ``ref`` the model is a transfer from that reference model, or from scratch if
    cross-validation prefers it (:func:`~modeling.training.transfer.fit_with_reference`).
    """
    if ref is not None:
        model, summary = fit_with_reference(frame, ref, device=device, version=version, folds=folds,
                                            time_budget_s=time_budget_s, progress=progress, **fit_kw)
    else:
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
        "cv_mre": {m: float(e["mre"]) for m, e in summary["evaluation"]["metrics"].items() if m in METRICS},
        # the fold-to-fold spread of those same errors (the activation gate's noise)
        "cv_fold_std": {m: float(e["fold_std"]) for m, e in summary["evaluation"]["metrics"].items()
                        if m in METRICS},
        "time_budget_s": time_budget_s,
    }
    return model, manifest


# -- the two halves of a fleet's training: workers fit files, one client registers ------------


@dataclass(frozen=True)
class FitPlan:
    """What fitting one device needs from the catalog: version name, data files, active version."""

    device: str
    version: str
    files: tuple[tuple[int, str], ...]  # (sweep id, Parquet file under measurements/) of complete sweeps
    active: ModelVersion | None  # what the new version must not be worse than to be activated
    reference: ModelVersion | None = None  # another device's active version to transfer from


@dataclass(frozen=True)
class FittedVersion:
    """A model version whose files are written but which the catalog does not know yet."""

    device: str
    version: str
    manifest: dict[str, Any]


def plan_fits(
    datadir: DataDir, devices: Sequence[str], *, reference: ModelVersion | None = None
) -> list[FitPlan]:
    """Plan the fits of ``devices`` from the catalog in three queries; raises ``UnknownDevice``.

    ``reference``: the active version of another device (see
    :func:`~modeling.training.transfer.check_reference`) every device transfers from.
    Version names are ``v<UTC time to the microsecond>``, one microsecond apart within a
    plan (names are unique across all devices), so they sort by training time.
    """
    catalog = datadir.catalog
    files = catalog.measurement_files(devices)
    taken = catalog.model_version_names()
    active = catalog.active_model_versions()
    start = datetime.now(timezone.utc)
    plans = []
    for i, device in enumerate(files):
        base = "v" + (start + timedelta(microseconds=i)).strftime("%Y%m%d-%H%M%S-%f")
        version, n = base, 1
        while version in taken or (datadir.device_models_dir(device) / version).exists():
            n += 1
            version = f"{base}-{n}"
        taken.add(version)
        plans.append(FitPlan(device, version, tuple(files[device]), active.get(device), reference))
    return plans


def fit_plan(
    datadir: DataDir,
    plan: FitPlan,
    *,
    folds: int = 5,
    time_budget_s: float | None = None,
    progress: Callable[[str, float], None] | None = None,
    activate: bool = True,
    force_activate: bool = False,
    **fit_kw: Any,
) -> FittedVersion:
    """Fit a planned device and write its version's files, touching files only (never the catalog).

    What a Dask worker runs: it reads the plan's Parquet files and writes under
    ``models/``, so many processes, on many hosts sharing the data directory, can run it at
    once while one client registers their results (:func:`register_versions`).  SQLite
    itself stays on the client's host.  Activation is decided here, as in
    :func:`train_device`, against the plan's active version; with the plan's reference, as
    ``train_device(reference=...)`` (its files are read here, its catalog entry was read
    by the planner).  Raises ``NoData``.
    """
    frame = read_measurement_files(datadir.measurements_dir, plan.files)
    # its tables built, as load_reference's are
    ref = read_model(datadir, plan.reference).build_tables() if plan.reference is not None else None
    # raises NoData early, before any work
    _, _, clean = training_rows(frame, MIN_TRANSFER_ROWS) if ref else training_rows(frame)
    model, manifest = _fit(
        frame, clean, plan.device, plan.version, folds, time_budget_s, progress, ref=ref, **fit_kw
    )
    manifest["activation"] = activation_decision(
        plan.active, manifest, activate=activate, force=force_activate
    )
    full = write_model_files(datadir, model, _jsonable(manifest))
    return FittedVersion(plan.device, plan.version, full)


def register_versions(datadir: DataDir, fitted: list[FittedVersion]) -> list[ModelVersion]:
    """Record fitted versions in the catalog in one transaction, each active as its manifest decided."""
    return register_models(datadir, [f.manifest for f in fitted])


def activation_decision(active: ModelVersion | None, manifest: dict[str, Any], *, activate: bool,
                        force: bool) -> dict[str, Any]:
    """Whether a new version may replace the active one, and why (both errors per metric).

    Both versions' ``cv_mre`` are the mean out-of-fold error of the model as served, and
    ``cv_fold_std`` the fold-to-fold spread of those same errors.  A mean over k folds is
    uncertain by its standard error, ``std / sqrt(k)``, so the noise of a difference of two
    is ``sqrt(se_active**2 + se_new**2)``.  A new version whose error is worse than the
    active one's, on any metric both have, by more than ``NOISE_SE`` of those standard
    errors and more than ``ACTIVATION_MARGIN`` of the active error, is registered but not
    activated, unless ``force``.  A version that lacks a metric the active one has is held
    back the same way.  (A worse version cannot excuse itself by its own erratic folds:
    its spread counts divided by ``sqrt(k)``, as any mean's.)
    """
    base: dict[str, Any] = {"activated": False, "forced": force, "previous": None, "worse": {}}
    if not activate:
        return {**base, "reason": "not asked to activate"}
    if active is None:
        return {**base, "activated": True, "reason": "no active version"}
    old_err = active.manifest.get("cv_mre") or {}
    old_std = active.manifest.get("cv_fold_std") or {}
    old_k = max(int(active.manifest.get("folds") or DEFAULT_FOLDS), 1)
    new_err, new_std = manifest["cv_mre"], manifest["cv_fold_std"]
    new_k = max(int(manifest.get("folds") or DEFAULT_FOLDS), 1)
    worse: dict[str, dict[str, float | None]] = {}
    for metric, old in old_err.items():
        if old is None:
            continue
        new = new_err.get(metric)
        if new is None:
            worse[metric] = {"active": float(old), "new": None, "margin": None}
            continue
        noise = math.hypot(float(old_std.get(metric) or 0.0) / math.sqrt(old_k),
                           float(new_std.get(metric) or 0.0) / math.sqrt(new_k))
        margin = max(ACTIVATION_MARGIN * float(old), NOISE_SE * noise)
        if new - float(old) > margin:
            worse[metric] = {"active": float(old), "new": float(new), "margin": margin}
    base = {**base, "previous": active.version, "worse": worse}
    if worse and not force:
        return {**base, "reason": "worse than the active version beyond noise"}
    reason = "forced despite a worse error" if worse else "not worse than the active version beyond noise"
    return {**base, "activated": True, "reason": reason}


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
