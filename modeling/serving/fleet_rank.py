"""Fleet prediction: rank the devices for each workload by one predicted metric.

"Which of my devices gives the lowest p99 for this workload, and at what IOPS?"  Every
device predicts the whole batch with its active model in one vectorised call
(:meth:`~modeling.serving.device_model.DeviceModel.predict_matrix`, the batch path), on
one workload matrix checked once; the ranking is then one ``argsort`` over the
(workloads x devices) matrix of the ranking metric.  10,000 workloads on 50 devices are
50 batch predictions, not 500,000 single ones.

A device that cannot answer (no active model yet, a damaged model, no model of the
ranking metric, no model of the region asked for) is left out of the ranking and listed
in :attr:`FleetRanking.skipped` with the reason: one such device never fails the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import CorruptModel, InvalidInput, NoModel, NotFound
from modeling.serving.batch import read_workload_csv
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import METRICS, SERVED_METRICS
from modeling.workload_matrix import columns_matrix

HIGHER_IS_BETTER = frozenset({"iops", "bandwidth_mib_s"})
"""Metrics where more is better; for the latencies less is."""

Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""One metric's (value, lower, upper, extrapolated, model name) arrays, one entry per workload."""


@dataclass(frozen=True)
class SkippedDevice:
    """A device left out of a ranking, and why (the error's code and message)."""

    device: str
    code: str
    reason: str


@dataclass(frozen=True)
class DeviceForecast:
    """One device's predictions of every workload, per metric, from one model version."""

    device: str
    model_version: str
    predictions: dict[str, Columns]


@dataclass(frozen=True)
class FleetRanking:
    """The devices ranked for each workload by ``rank_by``, best first."""

    rank_by: str
    count: int
    forecasts: list[DeviceForecast]  # the ranked devices, in the order they were named
    order: np.ndarray  # (count, k) indices into ``forecasts``: each workload's best k, best first
    skipped: list[SkippedDevice]

    @property
    def higher_is_better(self) -> bool:
        """Whether the ranking puts the largest value first."""
        return self.rank_by in HIGHER_IS_BETTER

    @property
    def devices(self) -> list[str]:
        """The ranked devices' names, in the order they were named."""
        return [f.device for f in self.forecasts]

    def ranking(self) -> list[list[str]]:
        """Each workload's devices, best first."""
        names = np.array(self.devices, dtype=object)
        return names[self.order].tolist()  # type: ignore[no-any-return]

    def as_json(self) -> dict[str, Any]:
        """The JSON document of the API and of ``predict --json`` (numpy arrays for orjson)."""
        return {
            "rank_by": self.rank_by,
            "higher_is_better": self.higher_is_better,
            "count": self.count,
            "devices": {
                f.device: {
                    "model_version": f.model_version,
                    "predictions": {
                        m: {"value": v, "lower": lo, "upper": hi, "extrapolated": ex, "model": scope.tolist()}
                        for m, (v, lo, hi, ex, scope) in f.predictions.items()
                    },
                }
                for f in self.forecasts
            },
            "ranking": self.ranking(),
            "skipped": [vars(s) for s in self.skipped],
        }

    def frame(self, workloads: pd.DataFrame | None = None) -> pd.DataFrame:
        """One row per workload and ranked device, best first: ``workload`` (1-based), ``rank``,
        ``device``, ``model_version`` and the batch CSV's prediction columns, after the
        workload's own columns when ``workloads`` (the input rows) is given."""
        n, k = self.order.shape
        row = np.repeat(np.arange(n), k)
        pick = self.order.ravel()
        # Names as categoricals: pandas would otherwise turn 500,000 Python strings into a
        # string column one by one, which took most of the time of a 10,000 x 50 ranking.
        versions = [f.model_version for f in self.forecasts]
        distinct = list(dict.fromkeys(versions))  # two devices may have trained the same instant
        version_code = np.array([distinct.index(v) for v in versions])
        cols: dict[str, Any] = {
            "workload": row + 1,
            "rank": np.tile(np.arange(1, k + 1), n),
            "device": pd.Categorical.from_codes(pick, categories=self.devices),
            "model_version": pd.Categorical.from_codes(version_code[pick], categories=distinct),
        }
        for metric in SERVED_METRICS:
            if not any(metric in f.predictions for f in self.forecasts):
                continue
            parts = [_stacked(self.forecasts, metric, j, n) for j in range(5)]
            value, lower, upper, extrapolated, scope = (p[pick, row] for p in parts)
            cols[f"pred_{metric}"] = value
            cols[f"pred_{metric}_lower"] = lower
            cols[f"pred_{metric}_upper"] = upper
            cols[f"{metric}_extrapolated"] = extrapolated
            cols[f"{metric}_model"] = pd.Categorical(scope)
        out = pd.DataFrame(cols)
        if workloads is None:
            return out
        inputs = workloads.iloc[row].reset_index(drop=True)
        return pd.concat([inputs, out], axis=1)


def _stacked(forecasts: list[DeviceForecast], metric: str, part: int, n: int) -> np.ndarray:
    """(devices, workloads) array of one part of a metric's predictions; blank where a device lacks it."""
    if all(metric in f.predictions for f in forecasts):
        return np.stack([f.predictions[metric][part] for f in forecasts])
    blank: Any = np.full(n, None, dtype=object) if part >= 3 else np.full(n, np.nan)
    return np.stack([f.predictions[metric][part] if metric in f.predictions else blank for f in forecasts])


def rank_devices(
    registry: ModelRegistry,
    devices: Sequence[str],
    columns: Mapping[str, Any],
    *,
    rank_by: str = "latency_p99_us",
    metrics: Sequence[str] | None = None,
    model: str = "auto",
    top: int | None = None,
) -> FleetRanking:
    """Rank ``devices`` for every workload (given as columns by field, as the batch path takes).

    ``metrics``: those to predict besides ``rank_by`` (default: every metric a device's
    model has).  ``top`` keeps each workload's best ``top`` devices in the ranking.  Raises
    ``InvalidInput`` for a bad workload, metric or model name, and ``NoModel`` when no
    device at all could be ranked (the reasons in its details).
    """
    if rank_by not in METRICS:
        raise InvalidInput(f"cannot rank by {rank_by!r}; use one of {', '.join(METRICS)}",
                           details={"field": "rank_by"})
    unknown = [m for m in metrics or () if m not in SERVED_METRICS]
    if unknown:
        raise InvalidInput(f"unknown metric(s) {unknown}; known: {', '.join(SERVED_METRICS)}",
                           details={"field": "metrics"})
    if top is not None and top < 1:
        raise InvalidInput("top must be at least 1", details={"field": "top"})
    wanted = [m for m in SERVED_METRICS if metrics is None or m in metrics or m == rank_by]
    w = columns_matrix(columns)  # checked once for every device
    forecasts: list[DeviceForecast] = []
    skipped: list[SkippedDevice] = []
    for device in dict.fromkeys(devices):
        try:
            dm = registry.load(device)
            if rank_by not in dm.metrics:  # a what-if device has metrics, not specs
                raise NotFound(f"its model {dm.version} does not predict {rank_by} (no such data)")
            predictions = dm.predict_matrix(w, [m for m in wanted if m in dm.metrics], model)
        except (NoModel, NotFound, CorruptModel) as exc:
            skipped.append(SkippedDevice(device, exc.code, exc.message))
            continue
        forecasts.append(DeviceForecast(device, dm.version, predictions))
    if not forecasts:
        raise NoModel(
            f"none of the {len(skipped)} devices can rank by {rank_by}: "
            + "; ".join(f"{s.device}: {s.reason}" for s in skipped[:5]),
            details={"skipped": [vars(s) for s in skipped]},
        )
    scores = np.stack([f.predictions[rank_by][0] for f in forecasts], axis=1)
    if rank_by in HIGHER_IS_BETTER:
        scores = -scores
    # stable: equal predictions keep the order the devices were named in
    order = np.argsort(scores, axis=1, kind="stable")[:, :top]
    return FleetRanking(rank_by, len(w), forecasts, order, skipped)


def rank_csv(
    datadir: DataDir, devices: Sequence[str], path: Path, **rank_kw: Any
) -> tuple[pd.DataFrame, FleetRanking]:
    """The rows of a workload CSV and the ranking of ``devices`` for each (see :func:`rank_devices`)."""
    frame = read_workload_csv(Path(path))
    ranking = rank_devices(ModelRegistry(datadir), devices, {c: frame[c] for c in frame.columns}, **rank_kw)
    return frame, ranking
