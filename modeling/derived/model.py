"""A derived device's model: the law over its base device's model, optionally calibrated.

:class:`DerivedModel` answers like a :class:`~modeling.serving.device_model.DeviceModel`
(its own ``predict`` and ``predict_matrix``; ``predict_one``, ``predict_frame`` and the
request check are :class:`~modeling.serving.device_model.Predictor`'s), by asking the base
device's model through its public batch
``predict_matrix`` and applying the RAID or fabric law.  Every answer names the law
(the ``model`` of each metric is ``whatif``; :attr:`law` and :attr:`derived` say which
law and from what), and a calibrated one says on how many measured points.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from modeling.derived.calibrate import apply_calibration
from modeling.derived.curve import CurveCache, Member
from modeling.derived.fabric import FabricLink, predict_fabric
from modeling.derived.raid import RaidLayout, predict_raid
from modeling.derived.spec import law_of
from modeling.serving.device_model import Answers, Predictor, Workloads, workloads_matrix
from modeling.workload import SERVED_METRICS

SCOPE = "whatif"
LAW_METRICS = ("latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops")


class DerivedModel(Predictor):
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

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per metric: (value, lower, upper, extrapolated, scope) arrays; no interval (NaN)."""
        wanted = self.check_request(metrics, model)
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

    @property
    def row_limits(self) -> None:
        """No measured range of its own: the base model's extrapolation shows in each metric's flag."""
        return None

    def extrapolation(self, w: np.ndarray) -> list[dict[str, float]]:
        """Like :attr:`row_limits`: no per-field range of its own (the flags come from the base)."""
        return [{} for _ in range(len(w))]
