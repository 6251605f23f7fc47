"""The model registry: versioned, validated, pickle-free model storage per device.

A model version is a folder ``models/<device>/<version>/`` holding

* ``models.json`` -- every metric's scopes (global and region models): feature set,
  interval half-width, trained ranges, and the estimator as exported by
  :mod:`modeling.estimators.serialize` (scikit-learn trees as node arrays);
* ``xgb-<metric>-<scope>.ubj`` -- XGBoost boosters in XGBoost's own UBJSON format;
* ``manifest.json`` -- format tag, device, version, creation time, the training data's
  hash, sweep ids and fio versions, per-metric estimator, parameters and CV errors, and
  the SHA-256 of every other file.

The folder is written under a temporary name and renamed into place, and only then is
the version recorded in the catalog (with a copy of the manifest), so a failed or
interrupted training never leaves a half-written model nor touches the active one.
Loading checks the manifest against the catalog's copy, every file against its
checksum and ``models.json`` against its schema; anything else raises ``CorruptModel``.
Loaded models are cached per ``(device, version)``; the active version of a device is
looked up at most every ``active_ttl_s`` seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from modeling.serving.device_model import DeviceModel
from modeling.serving.metric_models import MetricSpec, ScopeModel
from modeling.errors import CorruptModel, NoModel, NotFound
from modeling.features import FEATURE_SETS
from modeling.estimators.serialize import export_estimator, import_estimator
from modeling.store import DataDir, ModelVersion
from modeling.store.names import validate_name
from modeling.workload import METRICS, REGION_NAMES, WORKLOAD_FIELDS

FORMAT = "ssdpredict-model"
FORMAT_VERSION = 1
_SCOPES = ("global",) + REGION_NAMES


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dump(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, allow_nan=False).encode()


def encode_model(model: DeviceModel) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``models.json`` content and the XGBoost blobs of a device model."""
    blobs: dict[str, bytes] = {}
    metrics: dict[str, Any] = {}
    for metric, spec in model.specs.items():
        scopes = {}
        for scope, sm in spec.scopes.items():
            members = []
            for i, (feature_set, est) in enumerate(sm.members):
                est_spec, est_blobs = export_estimator(est, f"xgb-{metric}-{scope}-{i}")
                blobs.update(est_blobs)
                members.append({"feature_set": feature_set, "estimator": est_spec})
            scopes[scope] = {
                "members": members,
                "q": None if not np.isfinite(sm.q) else float(sm.q),
                "scale": float(sm.scale),
                "lo": sm.lo.tolist(),
                "hi": sm.hi.tolist(),
                "cv": sm.cv,
                "weights": sm.weights,
            }
        metrics[metric] = {"mode": spec.mode, "auto_regions": sorted(spec.auto_regions), "scopes": scopes}
    return {"metrics": metrics, "data_regions": sorted(model.data_regions)}, blobs


def decode_model(
    device: str, version: str, doc: Any, blobs: dict[str, bytes], manifest: dict[str, Any]
) -> DeviceModel:
    """Rebuild a :class:`DeviceModel` from ``models.json``; raises ``CorruptModel``."""
    try:
        specs: dict[str, MetricSpec] = {}
        for metric, m in doc["metrics"].items():
            if metric not in METRICS or m["mode"] not in ("direct", "derived", "ratio"):
                raise CorruptModel(f"unknown metric or mode in model file: {metric!r}")
            scopes = {}
            for scope, s in m["scopes"].items():
                if scope not in _SCOPES:
                    raise CorruptModel(f"unknown scope in model file: {scope!r}")
                members = []
                for member in s["members"]:
                    if member["feature_set"] not in FEATURE_SETS:
                        raise CorruptModel(f"unknown feature set in model file: {member['feature_set']!r}")
                    members.append((member["feature_set"], import_estimator(member["estimator"], blobs)))
                if m["mode"] != "derived" and not members:
                    raise CorruptModel(f"direct model of {metric} without an estimator")
                scale = float(s["scale"])
                if not (np.isfinite(scale) and scale > 0):
                    raise CorruptModel("bad scale in model file")
                lo = np.asarray(s["lo"], dtype=np.float64)
                hi = np.asarray(s["hi"], dtype=np.float64)
                if lo.shape != (len(WORKLOAD_FIELDS),) or hi.shape != lo.shape:
                    raise CorruptModel("bad trained ranges in model file")
                q = float("nan") if s["q"] is None else float(s["q"])
                weights = _blend_weights(s.get("weights"), len(members))
                scopes[scope] = ScopeModel(scope, members, q, lo, hi, dict(s["cv"]), scale, weights)
            auto = frozenset(m["auto_regions"])
            if "global" not in scopes or not auto <= set(scopes):
                raise CorruptModel(f"model file lacks the global model of {metric}")
            specs[metric] = MetricSpec(metric, m["mode"], scopes, auto)
        if any(s.mode == "derived" for s in specs.values()) and specs.get("iops", None) is None:
            raise CorruptModel("derived metrics without an IOPS model")
        if any(s.mode == "ratio" for s in specs.values()) and specs.get("latency_mean_us", None) is None:
            raise CorruptModel("a latency ratio model without a mean latency model")
        regions = frozenset(doc["data_regions"])
        if not regions <= set(REGION_NAMES):
            raise CorruptModel("unknown region in model file")
    except CorruptModel:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptModel(f"model file does not match the schema: {exc!r}") from exc
    return DeviceModel(device, version, specs, regions, manifest)


def _blend_weights(raw: Any, n: int) -> list[float] | None:
    """Validated blend weights of ``n`` members (None: equal weights)."""
    if raw is None:
        return None
    weights = [float(x) for x in raw]
    if len(weights) != n or not all(np.isfinite(x) and x > 0 for x in weights):
        raise CorruptModel("bad blend weights in model file")
    if abs(sum(weights) - 1.0) > 1e-6:
        raise CorruptModel("blend weights in model file do not sum to 1")
    return weights


def save_model(
    datadir: DataDir, model: DeviceModel, manifest: dict[str, Any], *, activate: bool,
    job_id: str | None = None,
) -> ModelVersion:
    """Write a model version atomically, then record it in the catalog (ending ``job_id``'s job)."""
    device = validate_name(model.device)
    version = validate_name(model.version, "model version")
    doc, blobs = encode_model(model)
    files = {"models.json": _dump(doc), **blobs}
    full_manifest = {
        **manifest,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "device": device,
        "version": version,
        "files": {name: _sha256(data) for name, data in files.items()},
    }
    parent = datadir.device_models_dir(device)
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / version
    if final.exists():
        raise CorruptModel(f"model folder {final} already exists")
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=parent))
    try:
        for name, data in {**files, "manifest.json": _dump(full_manifest)}.items():
            with open(tmp / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        return datadir.catalog.add_model_version(
            device, version, f"{device}/{version}", full_manifest, activate=activate, job_id=job_id
        )
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        raise


def read_model(datadir: DataDir, mv: ModelVersion) -> DeviceModel:
    """Load and validate a stored model version; raises ``CorruptModel``."""
    folder = datadir.models_dir / mv.path
    if not folder.resolve().is_relative_to(datadir.models_dir.resolve()):
        raise CorruptModel(f"model path {mv.path!r} leaves the models folder")
    try:
        raw_manifest = (folder / "manifest.json").read_bytes()
        manifest = json.loads(raw_manifest)
    except (OSError, ValueError) as exc:
        raise CorruptModel(f"model {mv.device}/{mv.version}: unreadable manifest: {exc}") from exc
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or manifest.get("format_version") != FORMAT_VERSION
    ):
        raise CorruptModel(f"model {mv.device}/{mv.version}: not an ssdpredict model (format tag missing)")
    if (
        manifest != mv.manifest
        or manifest.get("device") != mv.device
        or manifest.get("version") != mv.version
    ):
        raise CorruptModel(f"model {mv.device}/{mv.version}: manifest differs from the catalog's copy")
    files = manifest.get("files")
    if not isinstance(files, dict) or "models.json" not in files:
        raise CorruptModel(f"model {mv.device}/{mv.version}: manifest lists no model file")
    data: dict[str, bytes] = {}
    for name, digest in files.items():
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise CorruptModel(f"model {mv.device}/{mv.version}: bad file name {name!r}")
        try:
            content = (folder / name).read_bytes()
        except OSError as exc:
            raise CorruptModel(f"model {mv.device}/{mv.version}: missing file {name}") from exc
        if _sha256(content) != digest:
            raise CorruptModel(
                f"model {mv.device}/{mv.version}: checksum mismatch in {name} (tampered or damaged)"
            )
        data[name] = content
    try:
        doc = json.loads(data.pop("models.json"))
    except ValueError as exc:
        raise CorruptModel(f"model {mv.device}/{mv.version}: models.json is not JSON") from exc
    return decode_model(mv.device, mv.version, doc, data, manifest)


class ModelRegistry:
    """Loads, caches and activates model versions of the devices in a data directory."""

    def __init__(self, datadir: DataDir, *, active_ttl_s: float = 1.0) -> None:
        self.datadir = datadir
        self.active_ttl_s = active_ttl_s
        self._lock = threading.Lock()
        self._models: dict[tuple[str, str], DeviceModel] = {}
        self._active: dict[str, tuple[float, str]] = {}

    def load(self, device: str, version: str | None = None) -> DeviceModel:
        """The device's model (active version when ``version`` is None), cached."""
        if version is None:
            version = self._active_version(device)
        key = (device, version)
        model = self._models.get(key)
        if model is not None:
            return model
        with self._lock:
            model = self._models.get(key)
            if model is None:
                mv = self.datadir.catalog.get_model_version(device, version)
                model = read_model(self.datadir, mv)
                self._models[key] = model
        return model

    def versions(self, device: str) -> list[ModelVersion]:
        """All model versions of a device, oldest first."""
        return self.datadir.catalog.list_model_versions(device)

    def activate(self, device: str, version: str) -> ModelVersion:
        """Make ``version`` active (after checking it loads); rollback and roll forward."""
        self.load(device, version)
        mv = self.datadir.catalog.activate_model(device, version)
        with self._lock:
            self._active.pop(device, None)
        return mv

    def invalidate(self, device: str | None = None) -> None:
        """Forget cached active-version lookups (all devices, or one)."""
        with self._lock:
            if device is None:
                self._active.clear()
            else:
                self._active.pop(device, None)

    def forget(self, device: str) -> None:
        """Drop every cached model and active-version lookup of ``device`` (it was deleted)."""
        with self._lock:
            self._active.pop(device, None)
            for key in [k for k in self._models if k[0] == device]:
                del self._models[key]

    def _active_version(self, device: str) -> str:
        now = time.monotonic()
        hit = self._active.get(device)
        if hit is not None and now - hit[0] < self.active_ttl_s:
            return hit[1]
        mv = self.datadir.catalog.active_model_version(device)  # raises UnknownDevice
        if mv is None:
            raise NoModel(
                f"device {device!r} has no trained model yet; run `ssdpredict train --device {device}`"
            )
        with self._lock:
            self._active[device] = (now, mv.version)
        return mv.version


__all__ = ["ModelRegistry", "NotFound", "read_model", "save_model"]
