"""What a report says about one device, read from the data directory and the model registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from modeling.serving.device_model import DeviceModel
from modeling.errors import NoData, NoModel
from modeling.training.evaluate import noise_floor
from modeling.serving.registry import ModelRegistry
from modeling.reporting.out_of_fold import REPORT_FOLDS, OutOfFold, out_of_fold
from modeling.reporting.summary import SummaryCell, summary_table
from modeling.store import DataDir, Device, ModelVersion, Sweep
from modeling.workload import WORKLOAD_FIELDS


@dataclass
class DeviceReport:
    """One device's measurements, active model, out-of-fold accuracy and summary table."""

    device: Device
    sweeps: list[Sweep]
    measurements: pd.DataFrame
    model: DeviceModel | None
    model_version: ModelVersion | None
    oof: OutOfFold | None
    summary: list[SummaryCell]
    noise: dict[str, Any] | None

    @property
    def name(self) -> str:
        """The device's name."""
        return self.device.name

    @property
    def derived(self) -> dict[str, Any] | None:
        """A what-if device's base and law (``modeling.derived``); None for a measured device."""
        return getattr(self.model, "derived", None) if "derived" in self.device.metadata else None

    @property
    def swept(self) -> dict[str, list[float]]:
        """The distinct values of every workload field the sweep varied (more than one value)."""
        out = {}
        for f in WORKLOAD_FIELDS:
            if f in self.measurements:
                values = sorted(float(v) for v in self.measurements[f].dropna().unique())
                if len(values) > 1:
                    out[f] = values
        return out


def gather(
    datadir: DataDir, device: str, *, registry: ModelRegistry | None = None, folds: int = REPORT_FOLDS
) -> DeviceReport:
    """Everything the report shows about ``device``.

    Raises ``UnknownDevice``, or ``NoData`` when the device has no measurements.  A device
    without a trained model is reported from its measurements alone.
    """
    catalog = datadir.catalog
    dev = catalog.get_device(device)
    measurements = catalog.measurements(device)
    registry = registry or ModelRegistry(datadir)
    model: DeviceModel | None
    if "derived" in dev.metadata:  # a what-if: never measured, every value from its law
        model = registry.load(device)
        return DeviceReport(device=dev, sweeps=[], measurements=measurements, model=model, model_version=None,
                            oof=None, summary=summary_table(measurements, model), noise=None)
    if measurements.empty:
        raise NoData(f"device {device!r} has no measurements yet: sweep or ingest it first")
    try:
        model = registry.load(device)
    except NoModel:
        model = None
    mv = catalog.get_model_version(device, model.version) if model is not None else None
    oof = out_of_fold(measurements, model, folds) if model is not None else None
    return DeviceReport(
        device=dev,
        sweeps=[s for s in catalog.list_sweeps(device) if s.status == "complete"],
        measurements=measurements,
        model=model,
        model_version=mv,
        oof=oof,
        summary=summary_table(measurements, model),
        noise=noise_floor(measurements),
    )
