"""Feature sets: the workload fields a model sees, computed from the workload matrix.

* ``basic`` -- the four published characteristics (write ratio, queue depth, request
  size, randomness), sizes and depths on a log2 scale.
* ``extended`` -- every workload field plus derived ones: total outstanding I/O
  (queue_depth x numjobs), log2 scales, per-direction sizes and randomness and the mean
  request size of the mix.

Everything works on the plain ``(n, 9)`` workload matrix of
:mod:`modeling.workload_matrix`, so that batch prediction stays vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import numpy as np

from modeling.errors import InvalidInput
from modeling.workload_matrix import FIELD_INDEX as _IDX
from modeling.workload_matrix import mean_request_size, outstanding_io

FEATURE_SETS: Final[tuple[str, ...]] = ("basic", "extended")
FEATURE_CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "extended": ("extended",),
    "basic": ("basic",),
    "both": ("extended", "basic"),
}
"""What a user may ask training to use: one set, or both with cross-validation choosing."""

LOG_QD_COLUMN: Final = 1
"""Column of log2 queue depth in every feature set."""
LOG_OUTSTANDING_COLUMN: Final = 5
"""Column of log2 (queue depth x numjobs) in the extended feature set."""

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



def feature_choice(name: str) -> tuple[str, ...]:
    """The feature sets of a ``--features`` choice; raises ``InvalidInput`` naming the choices."""
    try:
        return FEATURE_CHOICES[name]
    except KeyError:
        raise InvalidInput(
            f"unknown feature choice {name!r}; use one of {', '.join(FEATURE_CHOICES)}",
            details={"field": "features"},
        ) from None


def compute_features(w: np.ndarray, feature_set: str) -> np.ndarray:
    """Feature matrix (float32, as the tree libraries want it) of a workload matrix."""
    if feature_set not in FEATURE_NAMES:
        raise ValueError(f"unknown feature set {feature_set!r}; use one of {FEATURE_SETS}")
    if w.shape[0] == 1:
        return features_row(w[0].tolist(), feature_set)
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


def features_row(row: Sequence[float], feature_set: str) -> np.ndarray:
    """:func:`compute_features` of one workload (a list of the fields): a 1 x k matrix.

    The single-row fast path: plain floats instead of a dozen numpy calls on length-1
    arrays (tests/modeling/test_fast_paths.py holds the two equal).
    """
    wr, qd, size = row[_IDX["write_ratio"]], row[_IDX["queue_depth"]], row[_IDX["request_size"]]
    out = [wr, math.log2(qd), math.log2(size), row[_IDX["randomness"]]]
    if feature_set == "extended":
        nj, rs, ws = row[_IDX["numjobs"]], row[_IDX["read_size"]], row[_IDX["write_size"]]
        out += [
            math.log2(nj),
            math.log2(qd * nj),
            math.log2(rs),
            math.log2(ws),
            row[_IDX["read_randomness"]],
            row[_IDX["write_randomness"]],
            math.log2((1.0 - wr) * rs + wr * ws),
        ]
    return np.array([out], dtype=np.float32)
