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
Loaded models are cached per ``(device, version)`` in a memory-bounded LRU; the active
versions are re-read when the catalog changed, checked at most every ``refresh_s``.
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

from modeling.derived.model import DerivedModel
from modeling.derived.store import VERSION_PREFIX, derived_devices, derived_parts
from modeling.serving.device_model import DeviceModel
from modeling.serving.metric_models import MEAN_MODES, MetricSpec, ScopeModel
from modeling.serving.physics.limits import PhysicsLimits
from modeling.serving.model_cache import ModelCache
from modeling.errors import CorruptModel, NoModel, NotFound
from modeling.features import FEATURE_SETS
from modeling.estimators.serialize import export_estimator, import_estimator
from modeling.store import DataDir, Device, ModelVersion
from modeling.store.names import validate_name
from modeling.store.watch import CatalogWatch
from modeling.workload import REGION_NAMES, SERVED_METRICS, WORKLOAD_FIELDS

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
        if spec.mode == "blend":
            metrics[metric]["mean_power"] = float(spec.mean_power)
            metrics[metric]["ratio_members"] = spec.ratio_members
    doc: dict[str, Any] = {"metrics": metrics, "data_regions": sorted(model.data_regions)}
    if model.limits is not None:
        doc["physics"] = model.limits.to_json()
    return doc, blobs


def decode_model(
    device: str, version: str, doc: Any, blobs: dict[str, bytes], manifest: dict[str, Any]
) -> DeviceModel:
    """Rebuild a :class:`DeviceModel` from ``models.json``; raises ``CorruptModel``."""
    try:
        specs: dict[str, MetricSpec] = {}
        for metric, m in doc["metrics"].items():
            if metric not in SERVED_METRICS or m["mode"] not in ("direct", "derived", *MEAN_MODES):
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
            specs[metric] = MetricSpec(metric, m["mode"], scopes, auto, *_blend_of(m, scopes["global"]))
        if any(s.mode == "derived" for s in specs.values()) and specs.get("iops", None) is None:
            raise CorruptModel("derived metrics without an IOPS model")
        if any(s.mode in MEAN_MODES for s in specs.values()) and specs.get("latency_mean_us", None) is None:
            raise CorruptModel("a latency ratio model without a mean latency model")
        regions = frozenset(doc["data_regions"])
        if not regions <= set(REGION_NAMES):
            raise CorruptModel("unknown region in model file")
        # model files written before the limits were recorded have none: no physics caps
        limits = PhysicsLimits.from_json(doc["physics"]) if "physics" in doc else None
    except CorruptModel:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptModel(f"model file does not match the schema: {exc!r}") from exc
    return DeviceModel(device, version, specs, regions, manifest, limits)


def _blend_of(m: Any, sm: ScopeModel) -> tuple[float, int | None]:
    """A blend's power of the mean latency (in (0, 1)) and its ratio members; a ratio's 1 and None."""
    if m["mode"] != "blend":
        return 1.0, None
    power = float(m["mean_power"])
    if not 0.0 < power < 1.0:
        raise CorruptModel("bad mean latency power of a blend in model file")
    k = m.get("ratio_members")
    if k is not None and not (isinstance(k, int) and 0 < k < len(sm.members)):
        raise CorruptModel("bad ratio members of a blend in model file")
    return power, k


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
    manifest = write_model_files(datadir, model, manifest)
    return register_model(datadir, manifest, activate=activate, job_id=job_id)


def write_model_files(datadir: DataDir, model: DeviceModel, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write a version's folder atomically, without touching the catalog; returns its full manifest.

    This half runs wherever the model was fitted (a Dask worker, say): only files under the
    data directory's ``models/`` are written, so many processes may run it at once.
    """
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
    return full_manifest


def register_model(
    datadir: DataDir, manifest: dict[str, Any], *, activate: bool, job_id: str | None = None
) -> ModelVersion:
    """Record a version written by :func:`write_model_files` in the catalog (the one catalog write).

    ``job_id``: the retrain job ends as succeeded in the same transaction.  If recording
    fails the version's folder is removed, so no unregistered model is left.
    """
    device = validate_name(str(manifest["device"]))
    version = validate_name(str(manifest["version"]), "model version")
    try:
        return datadir.catalog.add_model_version(
            device, version, f"{device}/{version}", manifest, activate=activate, job_id=job_id
        )
    except BaseException:
        shutil.rmtree(datadir.device_models_dir(device) / version, ignore_errors=True)
        raise


def register_models(datadir: DataDir, manifests: list[dict[str, Any]]) -> list[ModelVersion]:
    """Record several written versions in one catalog transaction, all or none; each becomes
    active if its manifest's ``activation`` decided so.

    If recording fails their folders are removed, so no unregistered model is left.
    """
    entries = []
    for manifest in manifests:
        device = validate_name(str(manifest["device"]))
        version = validate_name(str(manifest["version"]), "model version")
        activate = bool((manifest.get("activation") or {}).get("activated"))
        entries.append((device, version, f"{device}/{version}", manifest, activate))
    try:
        return datadir.catalog.add_model_versions(entries)
    except BaseException:
        for device, version, *_ in entries:
            shutil.rmtree(datadir.device_models_dir(device) / version, ignore_errors=True)
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
    """Loads, caches and activates model versions of the devices in a data directory.

    Several serving processes (or machines, over a shared filesystem) may share one data
    directory.  Each notices a newly activated version within ``refresh_s`` of the
    activation, whoever made it: at most every ``refresh_s`` a request asks the catalog
    whether anything was committed (``PRAGMA data_version``, a few microseconds) and only
    then re-reads the active versions, in one query.  A version no longer active is dropped
    from memory then, and the cache keeps at most ``cache_bytes`` of models (estimated),
    least recently used first out.
    """

    def __init__(
        self, datadir: DataDir, *, refresh_s: float = 0.5, cache_bytes: int | None = None,
        build_tables: bool = False,
    ) -> None:
        """``build_tables``: build a model's every lookup table when it is loaded (a server: its
        first requests find them, and the cache's estimate counts them), not on first use."""
        self.datadir = datadir
        self.build_tables = build_tables
        self.refresh_s = refresh_s
        self.cache = ModelCache(cache_bytes)
        self._watch = CatalogWatch(datadir.catalog_path)
        self._active: dict[str, str] = {}
        self._derived: dict[str, Device] = {}
        self._next_check = 0.0
        self._refresh_lock = threading.Lock()
        self._load_lock = threading.Lock()

    def load(self, device: str, version: str | None = None) -> DeviceModel:
        """The device's model (active version when ``version`` is None), cached.

        A derived (what-if) device's model is its law over its base device's active model
        (:mod:`modeling.derived`), cached under a version naming both.
        """
        if version is None or version.startswith(VERSION_PREFIX):
            derived = self._derived_device(device)
            if derived is not None:
                return self._load_derived(derived)
        if version is None:
            version = self._active_version(device)
        key = (device, version)
        model = self.cache.get(key)
        if model is not None:
            return model
        with self._load_lock:  # one load at a time: the same model is never read twice at once
            model = self.cache.get(key)
            if model is None:
                mv = self.datadir.catalog.get_model_version(device, version)
                model = read_model(self.datadir, mv)
                if self.build_tables:
                    model.build_tables()
                self.cache.put(key, model)
        return model

    def _derived_device(self, device: str) -> Device | None:
        self.refresh()
        found = self._derived.get(device)
        if found is None and device not in self._active:
            # registered since the last check (or not derived: then the active version decides)
            dev = self.datadir.catalog.get_device(device)
            found = dev if "derived" in dev.metadata else None
        return found

    def _load_derived(self, dev: Device) -> Any:
        # the version first (the base model comes from the cache): a new DerivedModel, with
        # an empty member-curve cache, only when that version is not cached yet
        spec, base, version = derived_parts(dev, self.load)
        key = (dev.name, version)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        model = DerivedModel(dev.name, version, spec, base)
        self.cache.put(key, model)  # type: ignore[arg-type]  # answers like a DeviceModel
        return model

    def versions(self, device: str) -> list[ModelVersion]:
        """All model versions of a device, oldest first."""
        return self.datadir.catalog.list_model_versions(device)

    def activate(self, device: str, version: str) -> ModelVersion:
        """Make ``version`` active (after checking it loads); rollback and roll forward."""
        self.load(device, version)
        mv = self.datadir.catalog.activate_model(device, version)
        self.refresh(force=True)
        return mv

    def invalidate(self, device: str | None = None) -> None:
        """Re-read the active versions now, after this process changed them (all devices: one query)."""
        self.refresh(force=True)

    def refresh(self, *, force: bool = False) -> None:
        """Pick up versions activated elsewhere and drop the ones no longer active.

        Unforced, it does nothing until ``refresh_s`` has passed since the last check, and
        a request that finds another thread checking goes on with what it has.
        """
        now = time.monotonic()
        if not force and now < self._next_check:
            return
        if not self._refresh_lock.acquire(blocking=force):
            return
        try:
            self._next_check = now + self.refresh_s
            if not self._watch.changed() and not force:
                return
            before, after = self._active, self._watch.active_versions()
            self._active = after
            exists = self.datadir.catalog_path.exists()
            self._derived = derived_devices(self.datadir.catalog) if exists else {}
            # a version that was active here and is not any more is one this replica no longer serves
            retired = {(d, v) for d, v in before.items() if after.get(d) != v}
            self.cache.evict(lambda key: key in retired)
        finally:
            self._refresh_lock.release()

    def forget(self, device: str) -> None:
        """Drop every cached model and active-version lookup of ``device`` (it was deleted)."""
        self._active = {d: v for d, v in self._active.items() if d != device}
        self.cache.evict(lambda key: isinstance(key, tuple) and key[0] == device)

    def _active_version(self, device: str) -> str:
        self.refresh()
        version = self._active.get(device)
        if version is not None:
            return version
        # not active as of the last check: activated since, or no model, or no such device
        mv = self.datadir.catalog.active_model_version(device)  # raises UnknownDevice
        if mv is None:
            raise NoModel(
                f"device {device!r} has no trained model yet; run `ssdpredict train --device {device}`"
            )
        return mv.version


__all__ = [
    "ModelRegistry",
    "NotFound",
    "read_model",
    "register_model",
    "register_models",
    "save_model",
    "write_model_files",
]
