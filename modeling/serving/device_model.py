"""A device's trained models, ready to predict: :class:`DeviceModel`.

Per metric a :class:`~modeling.serving.metric_models.MetricSpec` says how it is predicted (its
own estimators, derived from IOPS by physics, or a ratio to the mean latency) with a
global model and, where a region had enough data, one per workload region.

Every prediction carries a split-conformal interval (``value * exp(-+q)``, ``q`` the
quantile of out-of-fold absolute log errors) and an extrapolation flag: set when any
workload field is outside the range the scope's model was trained on, or when the
workload's region had no measurements at all.

:meth:`DeviceModel.predict` is the one entry point of the service (route, batcher, CLI):
it takes one workload, several, a workload matrix or columns, and picks the path, the
single-row path (:mod:`modeling.serving.row_path`) for a few workloads and the matrix
path (:mod:`modeling.serving.matrix_path`) for more.  Both answer the same numbers.
"""

from __future__ import annotations

from functools import cached_property

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import InvalidInput
from modeling.serving.physics.extrapolation import extrapolation, extrapolation_row
from modeling.serving.physics.limits import PhysicsLimits, RowLimits
from modeling.serving.matrix_path import MatrixAnswer, predict_matrix
from modeling.serving.metric_models import MetricSpec
from modeling.serving.row_path import RowAnswer, predict_row
from modeling.workload import REGION_NAMES, SERVED_METRICS, WORKLOAD_FIELDS, Workload
from modeling.workload_matrix import columns_matrix

ROW_PATH_MAX = 2
"""Up to this many workloads take the single-row path, row by row (the same answers): with
the load laws a matrix call costs about three single rows (~450 us against ~150 us of CPU on
INTEL_D3_S4610, whatever the size of a small group)."""
Workloads = Workload | Sequence[Workload] | np.ndarray | Mapping[str, Any]
"""What :meth:`DeviceModel.predict` takes: one workload, several, a workload matrix, or columns."""


@dataclass(frozen=True)
class MetricPrediction:
    """One predicted metric with its interval, extrapolation flag and the model used."""

    value: float
    lower: float | None
    upper: float | None
    extrapolated: bool
    model: str
    extrapolation: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """Predictions of several metrics for one workload on one device."""

    device: str
    model_version: str
    predictions: dict[str, MetricPrediction]
    extrapolation: dict[str, float] = field(default_factory=dict)
    """Per workload field outside the measured range, how many times beyond it."""
    derived: dict[str, Any] | None = None
    """For a what-if device (:mod:`modeling.derived`): base device and the law that produced it."""
    notes: dict[str, str] = field(default_factory=dict)
    """Per metric, what its answer says about itself (:attr:`DeviceModel.tail_notes`)."""


class Answers:
    """The predictions of :meth:`DeviceModel.predict`, per workload (:meth:`row`) or per metric.

    Each path's answers stay in its own form (plain floats per workload, or arrays per
    metric) until asked for in the other.
    """

    def __init__(
        self,
        n: int,
        per_row: list[RowAnswer] | None,
        per_metric: MatrixAnswer | None,
        far: Callable[[], list[dict[str, float]]],
    ) -> None:
        self.n = n
        self._per_row = per_row
        self._per_metric = per_metric
        self._far = far
        self._far_rows: list[dict[str, float]] | None = None

    def __len__(self) -> int:
        return self.n

    def row(self, i: int) -> dict[str, tuple[Any, Any, Any, Any, Any]]:
        """Per metric, (value, lower, upper, extrapolated, scope name) of workload ``i``."""
        if self._per_row is not None:
            return self._per_row[i]
        return {m: tuple(a[i] for a in arrays) for m, arrays in self.columns.items()}  # type: ignore[misc]

    def far(self, i: int) -> dict[str, float]:
        """``{field: factor}`` of workload ``i`` outside the measured range (computed once, when asked)."""
        if self._far_rows is None:
            self._far_rows = self._far()
        return self._far_rows[i]

    @property
    def columns(self) -> MatrixAnswer:
        """Per metric, (value, lower, upper, extrapolated, scope name) arrays over the workloads."""
        if self._per_metric is None:
            rows = self._per_row or []
            metrics = rows[0] if rows else {}
            self._per_metric = {m: _arrays([r[m] for r in rows]) for m in metrics}
        return self._per_metric


def _arrays(
    answers: list[tuple[float, float, float, bool, str]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One metric's answers of a few workloads as the matrix path's arrays."""
    value, lower, upper, extrap, scope = zip(*answers, strict=True)
    return np.array(value), np.array(lower), np.array(upper), np.array(extrap), np.array(scope, dtype=object)


class Predictor:
    """What every device model answers through: :meth:`predict`, and its forms built on it.

    :class:`DeviceModel` (trained) and :class:`~modeling.derived.model.DerivedModel` (a
    what-if, by law) implement :meth:`predict`; the one-workload form (:meth:`predict_one`),
    the frame form (:meth:`predict_frame`) and the request check are the same for both.
    """

    device: str
    version: str
    metrics: tuple[str, ...]

    @property
    def derived(self) -> dict[str, Any] | None:
        """For a what-if device: base device and the law that produced every answer."""
        return None

    def predict(
        self, workloads: Workloads, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Answers:
        raise NotImplementedError

    @property
    def tail_notes(self) -> dict[str, str]:
        """Per metric, what its answers say about themselves (none unless a model sets them)."""
        return {}

    def check_request(self, metrics: Sequence[str] | None, model: str) -> tuple[str, ...]:
        """The metrics asked for (every one when None); ``InvalidInput`` for an unknown one or model."""
        if model not in ("auto", "global") and model not in REGION_NAMES:
            raise InvalidInput(
                f"unknown model {model!r}: use auto, global or one of {', '.join(REGION_NAMES)}"
            )
        if metrics is None:
            return self.metrics
        unknown = [m for m in metrics if m not in self.metrics]
        if unknown:
            what = "the what-if device" if self.derived is not None else "device"
            raise InvalidInput(
                f"{what} {self.device!r} does not predict {', '.join(unknown)}; "
                f"it predicts {', '.join(self.metrics)}",
                details={"field": "metrics"},
            )
        return tuple(metrics)

    def predict_one(
        self, workload: Workload, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Prediction:
        """:meth:`predict` of one workload, as a :class:`Prediction`."""
        answers = self.predict(workload, metrics, model)
        far = answers.far(0)
        preds = {
            metric: MetricPrediction(
                value=value,
                lower=None if math.isnan(lower) else lower,
                upper=None if math.isnan(upper) else upper,
                extrapolated=extrap,
                model=scope,
                extrapolation=far if extrap else {},
            )
            for metric, (value, lower, upper, extrap, scope) in answers.row(0).items()
        }
        notes = {m: note for m, note in self.tail_notes.items() if m in preds}
        return Prediction(self.device, self.version, preds, far, self.derived, notes)

    def predict_arrays(
        self, columns: Mapping[str, Any], metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> MatrixAnswer:
        """:meth:`predict` of workloads given as columns by field (checked), per metric
        (value, lower, upper, extrapolated, scope name) arrays: the frame form without a frame."""
        return self.predict(columns, metrics, model).columns

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame:
        """:meth:`predict` of a frame's rows: pred_<m>, pred_<m>_lower/_upper, <m>_extrapolated, <m>_model."""
        out = self.predict_arrays({c: df[c] for c in df.columns}, metrics, model)
        cols: dict[str, Any] = {}
        for metric, (value, lower, upper, extrap, scope) in out.items():
            cols[f"pred_{metric}"] = value
            cols[f"pred_{metric}_lower"] = lower
            cols[f"pred_{metric}_upper"] = upper
            cols[f"{metric}_extrapolated"] = extrap
            cols[f"{metric}_model"] = scope
        return pd.DataFrame(cols, index=df.index)


class DeviceModel(Predictor):
    """All trained models of one device version; cheap, thread-safe prediction."""

    def __init__(
        self,
        device: str,
        version: str,
        specs: dict[str, MetricSpec],
        data_regions: frozenset[str],
        manifest: dict[str, Any] | None = None,
        limits: PhysicsLimits | None = None,
    ) -> None:
        self.device = device
        self.version = version
        self.specs = specs
        self.metrics = tuple(m for m in SERVED_METRICS if m in specs)
        self.limits = limits  # None for models saved before the physics limits were recorded
        self._row_limits: tuple[PhysicsLimits | None, RowLimits | None] = (None, None)
        self.data_regions = data_regions
        self.manifest = manifest or {}
        self.no_data = np.array([r not in data_regions for r in REGION_NAMES])
        """Per region code, True where the device had no measurement (its answers are extrapolated)."""
        # each scope's lookup tables are built once, on its first prediction (ScopeModel.served)
        for spec in specs.values():
            for sm in spec.scopes.values():
                sm.served = True

    def build_tables(self) -> DeviceModel:
        """Build every scope's lookup tables now instead of on first use (a server, at load: its
        first requests then find them built); returns the model."""
        for spec in self.specs.values():
            for sm in spec.scopes.values():
                sm.prepared()
        return self

    # -- the entry point -----------------------------------------------------------------

    def predict(
        self, workloads: Workloads, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> Answers:
        """Predict the metrics of ``workloads``: one, several, a workload matrix or columns by field.

        Columns are checked against the workload limits (NaN: the field's default); a
        matrix is taken as it is.  Up to :data:`ROW_PATH_MAX` workloads take the
        single-row path, more the matrix path.
        """
        wanted = self.check_request(metrics, model)
        if isinstance(workloads, Workload):
            rows: list[list[float]] | None = [_row(workloads)]
        elif isinstance(workloads, (np.ndarray, Mapping)):
            rows = None
        else:
            rows = [_row(wl) for wl in workloads]
        if rows is not None and 0 < len(rows) <= ROW_PATH_MAX:  # no matrix built for a few
            return self._rows(rows, wanted, model)
        w = workloads_matrix(workloads if rows is None else rows)
        if 0 < len(w) <= ROW_PATH_MAX:
            return self._rows(w.tolist(), wanted, model)
        far = lambda: extrapolation(w, self.limits)  # noqa: E731
        return Answers(len(w), None, predict_matrix(self, w, wanted, model), far)

    def _rows(self, rows: list[list[float]], wanted: tuple[str, ...], model: str) -> Answers:
        lim = self.row_limits
        per_row = [predict_row(self, r, wanted, model) for r in rows]
        return Answers(len(rows), per_row, None, lambda: [extrapolation_row(r, lim) for r in rows])

    # -- the two paths, and what they read -----------------------------------------------

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> MatrixAnswer:
        """The matrix path alone: per metric, (value, lower, upper, extrapolated, scope) arrays."""
        return predict_matrix(self, w, self.check_request(metrics, model), model)

    def predict_row(
        self, row: list[float], metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> RowAnswer:
        """The single-row path alone: :meth:`predict_matrix` of one workload (the 9 fields), in floats."""
        return predict_row(self, row, self.check_request(metrics, model), model)

    @cached_property
    def tail_notes(self) -> dict[str, str]:  # type: ignore[override]
        """Per latency percentile that is bimodal on this device, what its answers say about themselves.

        Set by training (:mod:`modeling.training.tail_guard`): the percentile sits on a slow
        mode on a share of the measured workloads, and its interval was widened to cover both.
        """
        notes = {}
        for metric, spec in self.specs.items():
            cv = spec.scopes["global"].cv if "global" in spec.scopes else {}
            if "bimodal_share" in cv:
                label = {"latency_p99_us": "p99", "latency_p99_9_us": "p99.9"}.get(metric, metric)
                notes[metric] = (
                    f"{label} is bimodal on this device: on {cv['bimodal_share']:.0%} of the measured"
                    f" workloads it sits on a slow mode over {cv.get('bimodal_knee', 5):g}x the p90, and"
                    " which side a workload lands on cannot be predicted; the interval is widened to"
                    " cover both"
                )
        return notes

    @property
    def row_limits(self) -> RowLimits | None:
        """:attr:`limits` in plain floats, for the single-row path (rebuilt when they change)."""
        src, row = self._row_limits
        if src is not self.limits:
            row = None if self.limits is None else self.limits.row_limits()
            self._row_limits = (self.limits, row)
        return row

    def extrapolation(self, w: np.ndarray) -> list[dict[str, float]]:
        """Per workload, ``{field: factor}`` for each field outside the measured range.

        See :func:`modeling.serving.physics.extrapolation.extrapolation`.
        """
        return extrapolation(w, self.limits)


def workloads_matrix(workloads: Workloads | list[list[float]]) -> np.ndarray:
    """The workload matrix of any form :meth:`DeviceModel.predict` takes (columns are checked)."""
    if isinstance(workloads, np.ndarray):
        return workloads
    if isinstance(workloads, Mapping):
        return columns_matrix(workloads)
    if isinstance(workloads, Workload):
        workloads = [workloads]
    rows = [r if isinstance(r, list) else _row(r) for r in workloads]
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(WORKLOAD_FIELDS))


def _row(workload: Workload) -> list[float]:
    """A workload as the list of its fields."""
    return [float(getattr(workload, f)) for f in WORKLOAD_FIELDS]
