"""A derived device's model: the law over its base device's model, optionally calibrated.

:class:`DerivedModel` answers like a :class:`~modeling.serving.device_model.DeviceModel`
(``predict``, ``predict_matrix``, ``predict_columns``, ``predict_frame``, ``predict_one``,
``predict_row``), by asking the base device's model through its public batch
``predict_matrix`` and applying the RAID or fabric law.  Every answer names the law
(the ``model`` of each metric is ``whatif``; :attr:`law` and :attr:`derived` say which
law and from what), and a calibrated one says on how many measured points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from modeling.derived.calibrate import apply_calibration
from modeling.derived.curve import CurveCache, Member
from modeling.derived.fabric import FabricLink, predict_fabric
from modeling.derived.raid import RaidLayout, predict_raid
from modeling.derived.spec import law_of
from modeling.errors import InvalidInput
from modeling.serving.device_model import Answers, MetricPrediction, Prediction, Workloads
from modeling.serving.device_model import workloads_matrix
from modeling.workload import REGION_NAMES, SERVED_METRICS, WORKLOAD_FIELDS, Workload
from modeling.workload_matrix import columns_matrix

SCOPE = "whatif"
LAW_METRICS = ("latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops")


class DerivedModel:
    """Predictions of a device that does not exist yet, from the model of one that does."""

    def __init__(self, device: str, version: str, spec: dict[str, Any], base: Member) -> None:
        self.device = device
        self.version = version
        self.spec = spec
        self.base = base
        self.law_params: RaidLayout | FabricLink = law_of(spec)
        self.metrics = tuple(
            m
            for m in SERVED_METRICS
            if m in LAW_METRICS
            and m in base.metrics
            or m in ("bandwidth_mib_s", "latency_mean_us")
            and "iops" in base.metrics
        )
        self.limits = getattr(base, "limits", None)
        self.manifest = {"derived": self.derived}
        self._curves = CurveCache()  # this base version's curves: the model object lives as long as they hold

    @property
    def law(self) -> str:
        """The law that produces every prediction, in words."""
        calib = self.spec.get("calibration")
        note = f"; calibrated on {calib['points']} measured points of {calib['device']}" if calib else ""
        return self.law_params.law() + note

    @property
    def derived(self) -> dict[str, Any]:
        """What every response carries: a what-if, its kind, base device and law."""
        calib = self.spec.get("calibration")
        return {
            "whatif": True,
            "kind": self.spec["kind"],
            "base": self.spec["base"],
            "base_version": getattr(self.base, "version", None),
            "law": self.law,
            "calibrated_points": calib["points"] if calib else 0,
        }

    def _check(self, metrics: Sequence[str] | None, model: str) -> tuple[str, ...]:
        if model not in ("auto", "global") and model not in REGION_NAMES:
            raise InvalidInput(
                f"unknown model {model!r}: use auto, global or one of {', '.join(REGION_NAMES)}"
            )
        if metrics is None:
            return self.metrics
        unknown = [m for m in metrics if m not in self.metrics]
        if unknown:
            raise InvalidInput(
                f"the what-if device {self.device!r} does not predict {', '.join(unknown)}; "
                f"it predicts {', '.join(self.metrics)}",
                details={"field": "metrics"},
            )
        return tuple(metrics)

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per metric: (value, lower, upper, extrapolated, scope) arrays; no interval (NaN)."""
        wanted = self._check(metrics, model)
        if isinstance(self.law_params, RaidLayout):
            out = predict_raid(self.base, self.law_params, w, model, self._curves)
        else:
            out = predict_fabric(self.base, self.law_params, w, model, self._curves)
        values = out["values"]
        apply_calibration(self.spec.get("calibration"), w, values)
        nan = np.full(len(w), np.nan)
        scope = np.empty(len(w), dtype=object)
        scope.fill(SCOPE)
        return {m: (values[m], nan, nan, out["extrapolated"], scope) for m in wanted}

    def predict(
        self, workloads: Workloads, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Answers:
        """As ``DeviceModel.predict`` (one workload, several, a matrix or columns), by the law."""
        w = workloads_matrix(workloads)
        return Answers(len(w), None, self.predict_matrix(w, metrics, model), lambda: self.extrapolation(w))

    def predict_columns(
        self, columns: Mapping[str, Any], metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`predict_matrix` of workloads given as columns by field name."""
        return self.predict_matrix(columns_matrix(columns), metrics, model)

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame:
        """Batch prediction in the columns of ``DeviceModel.predict_frame``."""
        cols: dict[str, Any] = {}
        for metric, (value, lower, upper, extrap, scope) in self.predict_columns(
            {c: df[c] for c in df.columns}, metrics, model
        ).items():
            cols.update(
                {
                    f"pred_{metric}": value,
                    f"pred_{metric}_lower": lower,
                    f"pred_{metric}_upper": upper,
                    f"{metric}_extrapolated": extrap,
                    f"{metric}_model": scope,
                }
            )
        return pd.DataFrame(cols, index=df.index)

    def predict_row(
        self, row: list[float], metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[float, float, float, bool, str]]:
        """One workload (the 9 fields as a list), in plain floats."""
        out = self.predict_matrix(np.array([row], dtype=np.float64), metrics, model)
        return {m: (float(v[0]), math.nan, math.nan, bool(e[0]), SCOPE) for m, (v, _, _, e, _) in out.items()}

    def predict_one(
        self, workload: Workload, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Prediction:
        """Predict the metrics of one workload."""
        row = [float(getattr(workload, f)) for f in WORKLOAD_FIELDS]
        preds = {
            m: MetricPrediction(value=v, lower=None, upper=None, extrapolated=e, model=s)
            for m, (v, _, _, e, s) in self.predict_row(row, metrics, model).items()
        }
        return Prediction(self.device, self.version, preds, {}, self.derived)

    @property
    def row_limits(self) -> None:
        """No measured range of its own: the base model's extrapolation shows in each metric's flag."""
        return None

    def extrapolation(self, w: np.ndarray) -> list[dict[str, float]]:
        """Like :attr:`row_limits`: no per-field range of its own (the flags come from the base)."""
        return [{} for _ in range(len(w))]
