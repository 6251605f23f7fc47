"""An analytic member device for the what-if laws: linear-then-flat IOPS against in-flight I/O.

``IOPS(L) = min(L / t, X)``, with ``X = min(iops_max, mib_s x MiB / size)``: one request
takes ``t`` until the device saturates.  Arrays and fabrics of such members have answers
in closed form, so each law is checked against arithmetic, not against itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modeling.workload_matrix import FIELD_INDEX

_I = FIELD_INDEX
MIB = 1024 * 1024


class AnalyticMember:
    """A device whose closed-loop curve is known exactly (the narrowest stand-in for a trained model)."""

    metrics = ("latency_mean_us", "bandwidth_mib_s", "iops")
    version = "analytic"

    def __init__(self, t_us: float = 100.0, iops_max: float = 40_000.0, mib_s: float = 2_000.0) -> None:
        self.device = "analytic"
        self.t_us, self.iops_max, self.mib_s = t_us, iops_max, mib_s

    def iops(self, in_flight: np.ndarray, size: np.ndarray) -> np.ndarray:
        cap = np.minimum(self.iops_max, self.mib_s * MIB / size)
        return np.minimum(in_flight * 1e6 / self.t_us, cap)

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict:
        wr = w[:, _I["write_ratio"]]
        size = (1 - wr) * w[:, _I["read_size"]] + wr * w[:, _I["write_size"]]
        in_flight = w[:, _I["queue_depth"]] * w[:, _I["numjobs"]]
        iops = self.iops(in_flight, size)
        values = {
            "iops": iops,
            "latency_mean_us": 1e6 * in_flight / iops,
            "bandwidth_mib_s": iops * size / MIB,
        }
        n = len(w)
        return {
            m: (values[m], np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, bool), np.full(n, "global"))
            for m in (metrics or self.metrics)
        }


def workloads(
    in_flight: Sequence[int], *, write_ratio: float = 0.0, size: int = 4096, randomness: float = 1.0
) -> np.ndarray:
    """Workload rows at each in-flight count (numjobs 1, queue depth L)."""
    rows = [[write_ratio, L, size, randomness, 1, size, size, randomness, randomness] for L in in_flight]
    return np.array(rows, dtype=np.float64)
