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

from typing import Final

import numpy as np

from modeling.errors import InvalidInput
from modeling.one_row import features_row
from modeling.workload_matrix import FIELD_INDEX as _IDX
from modeling.workload_matrix import mean_request_size, outstanding_io

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
