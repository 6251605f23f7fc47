"""Prediction: the result types and a one-call :func:`predict` over the registry.

Long-running callers (the service) keep one :class:`~modeling.serving.registry.ModelRegistry`
and call ``registry.load(device).predict_one(...)``; :func:`predict` is the convenience
form for the CLI and notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence

from modeling.serving.device_model import DeviceModel, MetricPrediction, Prediction
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import Workload

__all__ = ["DeviceModel", "MetricPrediction", "Prediction", "predict"]


def predict(
    datadir: DataDir,
    device: str,
    workload: Workload,
    *,
    metrics: Sequence[str] | None = None,
    model: str = "auto",
    version: str | None = None,
) -> Prediction:
    """Predict the metrics of ``workload`` on ``device`` with its active (or given) model version."""
    return ModelRegistry(datadir).load(device, version).predict_one(workload, metrics=metrics, model=model)
