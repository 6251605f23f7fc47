"""Feature sets: the workload fields a model sees, as a scikit-learn transformer.

* ``basic`` -- the four published characteristics (write ratio, queue depth, request
  size, randomness), sizes and depths on a log2 scale.
* ``extended`` -- every workload field plus derived ones: total outstanding I/O
  (queue_depth x numjobs), log2 scales, per-direction sizes and randomness and the mean
  request size of the mix.

Everything works on a plain ``(n, 9)`` float matrix of :data:`WORKLOAD_FIELDS` so that
batch prediction stays vectorised; :func:`workload_matrix` builds it from a DataFrame and
fills the extended fields' defaults where they are missing.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from modeling.errors import InvalidInput
from modeling.workload import WORKLOAD_FIELDS

FEATURE_SETS: Final[tuple[str, ...]] = ("basic", "extended")
FEATURE_CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "extended": ("extended",),
    "basic": ("basic",),
    "both": ("extended", "basic"),
}
"""What a user may ask training to use: one set, or both with cross-validation choosing."""

FEATURE_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "basic": ("write_ratio", "log2_queue_depth", "log2_request_size", "randomness"),
    "extended": (
        "write_ratio",
        "log2_queue_depth",
        "log2_request_size",
        "randomness",
        "log2_numjobs",
        "log2_outstanding_io",
        "log2_read_size",
        "log2_write_size",
        "read_randomness",
        "write_randomness",
        "log2_mean_size",
    ),
}

_IDX = {name: i for i, name in enumerate(WORKLOAD_FIELDS)}


def feature_choice(name: str) -> tuple[str, ...]:
    """The feature sets of a ``--features`` choice; raises ``InvalidInput`` naming the choices."""
    try:
        return FEATURE_CHOICES[name]
    except KeyError:
        raise InvalidInput(
            f"unknown feature choice {name!r}; use one of {', '.join(FEATURE_CHOICES)}",
            details={"field": "features"},
        ) from None


def workload_matrix(frame: pd.DataFrame) -> np.ndarray:
    """The ``(n, 9)`` float64 matrix of workload fields, extended defaults filled in."""
    n = len(frame)
    out = np.empty((n, len(WORKLOAD_FIELDS)), dtype=np.float64)
    for name, i in _IDX.items():
        if name in frame.columns:
            out[:, i] = pd.to_numeric(frame[name], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            out[:, i] = np.nan
    fill_defaults(out)
    return out


def fill_defaults(w: np.ndarray) -> np.ndarray:
    """Fill NaN extended fields in place: numjobs 1, per-direction values from the basic ones."""
    nj = w[:, _IDX["numjobs"]]
    nj[np.isnan(nj)] = 1.0
    for field, source in (
        ("read_size", "request_size"),
        ("write_size", "request_size"),
        ("read_randomness", "randomness"),
        ("write_randomness", "randomness"),
    ):
        col = w[:, _IDX[field]]
        gap = np.isnan(col)
        col[gap] = w[gap, _IDX[source]]
    return w


def mean_request_size(w: np.ndarray) -> np.ndarray:
    """Mean bytes per request of the read/write mix."""
    wr = w[:, _IDX["write_ratio"]]
    return (1.0 - wr) * w[:, _IDX["read_size"]] + wr * w[:, _IDX["write_size"]]


def outstanding_io(w: np.ndarray) -> np.ndarray:
    """Total I/Os in flight: queue_depth x numjobs."""
    return w[:, _IDX["queue_depth"]] * w[:, _IDX["numjobs"]]


def compute_features(w: np.ndarray, feature_set: str) -> np.ndarray:
    """Feature matrix (float32, as the tree libraries want it) of a workload matrix."""
    if feature_set not in FEATURE_NAMES:
        raise ValueError(f"unknown feature set {feature_set!r}; use one of {FEATURE_SETS}")
    c = _IDX
    cols = [
        w[:, c["write_ratio"]],
        np.log2(w[:, c["queue_depth"]]),
        np.log2(w[:, c["request_size"]]),
        w[:, c["randomness"]],
    ]
    if feature_set == "extended":
        cols += [
            np.log2(w[:, c["numjobs"]]),
            np.log2(outstanding_io(w)),
            np.log2(w[:, c["read_size"]]),
            np.log2(w[:, c["write_size"]]),
            w[:, c["read_randomness"]],
            w[:, c["write_randomness"]],
            np.log2(mean_request_size(w)),
        ]
    return np.ascontiguousarray(np.column_stack(cols), dtype=np.float32)


class WorkloadFeatures(TransformerMixin, BaseEstimator):
    """Turn a DataFrame of workload fields into the ``basic`` or ``extended`` feature matrix."""

    def __init__(self, feature_set: str = "extended") -> None:
        self.feature_set = feature_set

    def fit(self, X: Any, y: Any = None) -> WorkloadFeatures:
        """Check the feature set and the input columns."""
        if self.feature_set not in FEATURE_NAMES:
            raise ValueError(f"unknown feature set {self.feature_set!r}; use one of {FEATURE_SETS}")
        frame = _as_frame(X)
        missing = [f for f in ("write_ratio", "queue_depth", "request_size", "randomness") if f not in frame]
        if missing:
            raise ValueError(f"missing workload columns: {missing}")
        self.feature_names_out_ = np.array(FEATURE_NAMES[self.feature_set], dtype=object)
        self.n_features_in_ = frame.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """The feature matrix."""
        check_is_fitted(self, "feature_names_out_")
        return compute_features(workload_matrix(_as_frame(X)), self.feature_set)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the produced features."""
        check_is_fitted(self, "feature_names_out_")
        return self.feature_names_out_


def _as_frame(X: Any) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        return X
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] not in (4, len(WORKLOAD_FIELDS)):
        raise ValueError("expected a DataFrame of workload fields or an (n, 4) / (n, 9) array")
    return pd.DataFrame(arr, columns=list(WORKLOAD_FIELDS[: arr.shape[1]]))
