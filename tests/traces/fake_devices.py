"""Analytic devices for the open-loop tests: ``c`` exponential servers of rate ``mu`` each.

Closed loop at ``L = qd x numjobs`` in flight such a device completes ``min(L, c) x mu``
IO/s, so its curve is known exactly, and open loop it is an M/M/c queue whose mean
response time has a closed form (Erlang C).  It stands in for a trained model: it has
the same ``predict_frame`` interface, and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from modeling.workload import MIB

SPREAD = 0.1  # half-width of the fake's prediction interval, relative


class FakeMMcDevice:
    """A fake device model: ``servers`` exponential servers of ``mu`` IO/s each."""

    def __init__(self, mu: float, servers: int = 1) -> None:
        self.mu = mu
        self.servers = servers

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame:
        """Closed-loop metrics of each workload row, with a +-10 % interval."""
        jobs = df["numjobs"].to_numpy(np.float64) if "numjobs" in df else 1.0
        load = df["queue_depth"].to_numpy(np.float64) * jobs
        iops = np.minimum(load, self.servers) * self.mu
        mean_us = load / iops * 1e6
        values = {
            "iops": iops,
            "latency_mean_us": mean_us,
            "latency_p99_us": mean_us * math.log(100),
            "bandwidth_mib_s": iops * df["request_size"].to_numpy(np.float64) / MIB,
        }
        cols: dict[str, np.ndarray] = {}
        for m in metrics or values:
            cols[f"pred_{m}"] = values[m]
            cols[f"pred_{m}_lower"] = values[m] * (1 - SPREAD)
            cols[f"pred_{m}_upper"] = values[m] * (1 + SPREAD)
            cols[f"{m}_extrapolated"] = np.zeros(len(df), dtype=bool)
        return pd.DataFrame(cols, index=df.index)

    def erlang_c_response_s(self, lam: float) -> float:
        """Exact mean response time of Poisson arrivals at ``lam`` (M/M/c)."""
        c, a = self.servers, lam / self.mu
        rho = a / c
        head = sum(a**k / math.factorial(k) for k in range(c))
        tail = a**c / math.factorial(c) / (1 - rho)
        wait_prob = tail / (head + tail)
        return 1 / self.mu + wait_prob / (c * self.mu - lam)


def window_table(lam: Sequence[float], *, duration: float = 1.0, ca2: float = 1.0) -> pd.DataFrame:
    """Consecutive windows of 4 KiB random reads offered at the given rates."""
    k = len(lam)
    start = np.arange(k) * duration
    return pd.DataFrame(
        {
            "window_start_s": start,
            "window_end_s": start + duration,
            "requests": (np.asarray(lam) * duration).astype(np.int64),
            "write_ratio": 0.0,
            "queue_depth": 1,
            "request_size": 4096,
            "randomness": 1.0,
            "numjobs": 1,
            "read_size": 4096,
            "write_size": 4096,
            "read_randomness": 1.0,
            "write_randomness": 1.0,
            "iops": np.asarray(lam, dtype=np.float64),
            "arrival_cv2": ca2,
        }
    )
