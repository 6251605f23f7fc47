"""Counting a model's physically impossible answers over a dense grid of workloads.

The laws (see :mod:`modeling.serving.physics`): the latency percentiles are ordered and
p99 >= mean; no bandwidth beyond what the device showed for its mix (with the serving
tolerance); along queue depth, IOPS per outstanding I/O does not rise and the mean
latency does not fall.  Used by the bench's extrapolation study and by the tests.
"""

from __future__ import annotations

import itertools

import numpy as np

from modeling.serving.device_model import DeviceModel
from modeling.serving.physics.limits import BANDWIDTH_TOLERANCE, MIXES, mix_codes
from modeling.workload import PERCENTILE_ORDER, WORKLOAD_FIELDS
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import outstanding_io

DENSE_QUEUE_DEPTHS = tuple(2**i for i in range(11))  # 1 .. 1024
DENSE_NUMJOBS = (1, 2, 4, 8, 16, 32, 64)
DENSE_SIZES = tuple(512 * 2**i for i in range(14))  # 512 B .. 4 MiB
DENSE_MIXES = (0.0, 0.3, 0.7, 1.0)
DENSE_RANDOMNESS = (0.0, 1.0)
_RELATIVE_SLACK = 1e-9  # float rounding, not physics


def dense_grid(
    queue_depths: tuple[int, ...] = DENSE_QUEUE_DEPTHS,
    numjobs: tuple[int, ...] = DENSE_NUMJOBS,
    sizes: tuple[int, ...] = DENSE_SIZES,
    mixes: tuple[float, ...] = DENSE_MIXES,
    randomness: tuple[float, ...] = DENSE_RANDOMNESS,
) -> np.ndarray:
    """A workload matrix over every combination; queue depth varies fastest."""
    rows = [
        (wr, qd, size, rnd, nj, size, size, rnd, rnd)
        for wr, rnd, size, nj, qd in itertools.product(mixes, randomness, sizes, numjobs, queue_depths)
    ]
    w = np.array(rows, dtype=np.float64)
    assert w.shape[1] == len(WORKLOAD_FIELDS)
    return w


def law_violations(
    model: DeviceModel, w: np.ndarray, n_depths: int = len(DENSE_QUEUE_DEPTHS)
) -> dict[str, int]:
    """Per law, how many predictions over ``w`` (a :func:`dense_grid`) break it."""
    out = model.predict_matrix(w)
    v = {m: out[m][0] for m in out}
    slack = 1.0 + _RELATIVE_SLACK
    found: dict[str, int] = {}
    order = [m for m in PERCENTILE_ORDER if m in v]
    found["percentile_order"] = sum(
        int(np.sum(v[a] > v[b] * slack)) for a, b in zip(order, order[1:], strict=False)
    )
    if "latency_p99_us" in v:
        found["p99_below_mean"] = int(np.sum(v["latency_mean_us"] > v["latency_p99_us"] * slack))
    if model.limits is not None and "bandwidth_mib_s" in v:
        peaks = np.array([model.limits.bandwidth_max.get(m, np.inf) for m in MIXES])[mix_codes(w)]
        found["bandwidth_above_measured"] = int(
            np.sum(v["bandwidth_mib_s"] > peaks * BANDWIDTH_TOLERANCE * slack)
        )
    # along queue depth (the fastest axis of the grid): one series per other combination
    per_io = (v["iops"] / outstanding_io(w)).reshape(-1, n_depths)
    found["iops_per_io_rises"] = int(np.sum(per_io[:, 1:] > per_io[:, :-1] * slack))
    lat = v["latency_mean_us"].reshape(-1, n_depths)
    found["latency_falls_with_depth"] = int(np.sum(lat[:, 1:] * slack < lat[:, :-1]))
    assert np.all(np.diff(w[:, _F["queue_depth"]].reshape(-1, n_depths), axis=1) > 0)
    return found
