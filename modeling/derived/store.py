"""Derived devices in the catalog: registered with their JSON spec, loaded as :class:`DerivedModel`.

A derived device is an ordinary catalog device (class ``raid`` or ``nvmeof``) whose
metadata holds ``"derived"``: the checked spec of :mod:`modeling.derived.spec`.  Its
model version names the spec and the base device's version it was computed from
(``whatif-<spec hash>@<base version>``), so a retrained base or a new calibration is a
new version and no cache serves a stale one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from modeling.derived.calibrate import CALIBRATED_METRICS, apply_calibration, fit_calibration
from modeling.derived.curve import Member
from modeling.derived.model import DerivedModel
from modeling.derived.spec import DEVICE_CLASS, parse_spec
from modeling.errors import InvalidInput, NoData
from modeling.store import Catalog, DataDir
from modeling.store.records import Device
from modeling.workload import WORKLOAD_FIELDS
from modeling.workload_matrix import workload_matrix

VERSION_PREFIX = "whatif-"


def derived_spec(device: Device) -> dict[str, Any] | None:
    """The checked spec of a derived device, None for a measured one."""
    raw = device.metadata.get("derived")
    return None if raw is None else parse_spec(raw)


def derived_devices(catalog: Catalog) -> dict[str, Device]:
    """Every derived device of the catalog, by name."""
    return {d.name: d for d in catalog.list_devices() if "derived" in d.metadata}


def spec_version(spec: dict[str, Any], base_version: str) -> str:
    """The model version of a derived device over ``base_version`` of its base."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{VERSION_PREFIX}{digest}@{base_version}"


def register_derived(datadir: DataDir, name: str, spec: dict[str, Any]) -> Device:
    """Add (or redefine) the derived device ``name``; its base must exist, and not lead back to it."""
    spec = parse_spec(spec)
    catalog = datadir.catalog
    base = catalog.get_device(spec["base"])  # UnknownDevice
    seen, cur = {name}, base
    while True:  # a chain of what-ifs (a fabric over an array) must end at a measured device
        if cur.name in seen:
            raise InvalidInput(
                f"derived device {name!r} cannot be built on itself", details={"field": "base"}
            )
        below = derived_spec(cur)
        if below is None:
            break
        seen.add(cur.name)
        cur = catalog.get_device(below["base"])
    if catalog.has_device(name):
        existing = catalog.get_device(name)
        if derived_spec(existing) is None:
            raise InvalidInput(
                f"device {name!r} is a measured device; choose another name for the what-if",
                details={"field": "name"},
            )
    return catalog.ensure_device(name, DEVICE_CLASS[spec["kind"]], {"derived": spec})


def set_calibration(datadir: DataDir, name: str, calibration: dict[str, Any]) -> Device:
    """Store a calibration in the derived device's spec."""
    spec = derived_spec(datadir.catalog.get_device(name))
    if spec is None:
        raise InvalidInput(f"device {name!r} is not a what-if device")
    return register_derived(datadir, name, {**spec, "calibration": calibration})


def derived_parts(device: Device, load_base: Callable[[str], Member]) -> tuple[dict[str, Any], Member, str]:
    """Derived ``device``'s checked spec, its base device's active model and its own version."""
    spec = derived_spec(device)
    if spec is None:
        raise InvalidInput(f"device {device.name!r} is not a what-if device")
    base = load_base(spec["base"])
    return spec, base, spec_version(spec, getattr(base, "version", "?"))


def load_derived(device: Device, load_base: Callable[[str], Member]) -> DerivedModel:
    """The model of derived ``device``, over its base device's active model."""
    spec, base, version = derived_parts(device, load_base)
    return DerivedModel(device.name, version, spec, base)


def calibrate_derived(
    datadir: DataDir, measured: str, whatif: str, load_base: Callable[[str], Member]
) -> dict[str, Any]:
    """Calibrate what-if ``whatif`` on the points of ``measured`` (the real device); stored in its spec.

    Returns the stored calibration with the what-if's mean relative error on those points
    before and after it (in sample: with K points, the leave-one-out log error of each
    correction is in ``metrics``).
    """
    catalog = datadir.catalog
    dev = catalog.get_device(whatif)
    spec = derived_spec(dev)
    if spec is None:
        raise InvalidInput(f"device {whatif!r} is not a what-if device", details={"field": "reference"})
    if derived_spec(catalog.get_device(measured)) is not None:
        raise InvalidInput(f"device {measured!r} is a what-if too; calibrate on a measured device's points")
    frame = catalog.measurements(measured)
    if frame.empty:
        raise NoData(f"device {measured!r} has no measurements to calibrate {whatif!r} with")
    per_workload = (
        frame.groupby(list(WORKLOAD_FIELDS), dropna=False)[
            [m for m in CALIBRATED_METRICS if m in frame.columns]
        ]
        .median()
        .reset_index()
    )
    w = workload_matrix(per_workload)
    plain = {k: v for k, v in spec.items() if k != "calibration"}
    model = DerivedModel(whatif, "uncalibrated", plain, load_base(spec["base"]))
    metrics = [m for m in CALIBRATED_METRICS if m in model.metrics and m in per_workload.columns]
    raw = {m: v[0] for m, v in model.predict_matrix(w, metrics=metrics).items()}
    measured_values = {m: per_workload[m].to_numpy(float) for m in metrics}
    calib = fit_calibration(w, raw, measured_values, measured)
    set_calibration(datadir, whatif, calib)
    fixed = dict(raw)
    apply_calibration(calib, w, fixed)
    calib["mre_before"] = {m: _mre(raw[m], measured_values[m]) for m in metrics}
    calib["mre_after"] = {m: _mre(fixed[m], measured_values[m]) for m in metrics}
    return calib


def _mre(pred: Any, y: Any) -> float:
    ok = y > 0
    return float((abs(pred[ok] - y[ok]) / y[ok]).mean()) if ok.any() else float("nan")
