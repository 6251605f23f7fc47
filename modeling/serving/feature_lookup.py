"""Feature matrices by feature-set name, computed once each, when a model first asks.

A scope model (:class:`~modeling.serving.metric_models.ScopeModel`) reads its members'
feature sets off a :class:`FeatureLookup`.  The matrix path looks them up for a workload
matrix (:class:`WorkloadFeatures`), for a ladder's rung rows (:class:`RungFeatures`) and for
some rows of either (:class:`RowsOf`); the single-row path for one workload
(:class:`RowFeatures`) and its few ladder rows (:class:`LadderFeatures`).  A rung differs
from its workload only in the queue depth, so its features are the workload's with the
load columns replaced, never computed again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from modeling.features import LOG_OUTSTANDING_COLUMN, LOG_QD_COLUMN, compute_features, features_row
from modeling.workload_matrix import FIELD_INDEX

_QD, _NJ = FIELD_INDEX["queue_depth"], FIELD_INDEX["numjobs"]


class FeatureLookup(Protocol):
    """Feature matrices by feature set name (a dict, or features computed on demand)."""

    def __getitem__(self, feature_set: str, /) -> np.ndarray: ...


class WorkloadFeatures:
    """The feature matrices of a workload matrix."""

    def __init__(self, w: np.ndarray) -> None:
        self.w = w
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        matrix = self.sets.get(feature_set)
        if matrix is None:
            matrix = self.sets[feature_set] = compute_features(self.w, feature_set)
        return matrix


class RungFeatures:
    """The feature matrices of a ladder's rung rows (``owner`` and ``depth`` per rung row)."""

    def __init__(self, own: WorkloadFeatures, owner: np.ndarray, depth: np.ndarray) -> None:
        self.own = own
        self.owner = owner
        self.depth = depth
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        matrix = self.sets.get(feature_set)
        if matrix is None:
            matrix = self.own[feature_set][self.owner]
            matrix[:, LOG_QD_COLUMN] = np.log2(self.depth)
            if feature_set == "extended":
                matrix[:, LOG_OUTSTANDING_COLUMN] = np.log2(self.depth * self.own.w[self.owner, _NJ])
            self.sets[feature_set] = matrix
        return matrix


class RowsOf:
    """Some rows of another feature lookup's matrices (a ladder's rungs left to evaluate, a scope's rows).

    Each set is sliced once.
    """

    def __init__(self, source: FeatureLookup, rows: Any) -> None:
        self.source = source
        self.rows = rows
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        matrix = self.sets.get(feature_set)
        if matrix is None:
            matrix = self.sets[feature_set] = self.source[feature_set][self.rows]
        return matrix


class RowFeatures:
    """The feature rows (``(1, d)`` matrices) of one workload, a list of its fields."""

    def __init__(self, row: list[float]) -> None:
        self.row = row
        self.sets: dict[str, np.ndarray] = {}

    def __getitem__(self, feature_set: str) -> np.ndarray:
        x = self.sets.get(feature_set)
        if x is None:
            x = self.sets[feature_set] = features_row(self.row, feature_set)
        return x


class LadderFeatures:
    """Feature rows of one workload at the measured ``depths``, then of the workload itself.

    When the workload sits at the last of the depths, that row is its own and is not
    repeated (``own_included``).  ``at`` is the workload's
    :func:`~modeling.serving.physics.ladder.ladder_position`.
    """

    def __init__(self, own: RowFeatures, depths: Sequence[float], at: tuple[int, int, float]) -> None:
        self.own = own
        self.at = at
        self.rungs = len(depths)  # the measured depths among the rows
        self.own_included = depths[-1] == own.row[_QD]
        self.depths = list(depths) if self.own_included else [*depths, own.row[_QD]]
        self.sets: dict[str, np.ndarray] = {}

    def steps(self, values: np.ndarray) -> list[float]:
        """The values at the measured depths, of values at every ladder row."""
        return values.tolist() if self.own_included else values[:-1].tolist()

    def __getitem__(self, feature_set: str) -> np.ndarray:
        x = self.sets.get(feature_set)
        if x is None:
            x = np.repeat(self.own[feature_set], len(self.depths), axis=0)
            x[:, LOG_QD_COLUMN] = [math.log2(d) for d in self.depths]
            if feature_set == "extended":
                nj = self.own.row[_NJ]
                x[:, LOG_OUTSTANDING_COLUMN] = [math.log2(d * nj) for d in self.depths]
            self.sets[feature_set] = x
        return x
