"""A mix's capacity as its closed-loop points measured it: what the targeted plans
(:mod:`.for_trace`, :mod:`.for_capacity`) set their open-loop rates from."""

from __future__ import annotations

import numpy as np
import pandas as pd

from modeling.errors import NoData
from modeling.store.open_loop_rows import closed_loop_rows
from modeling.workload import Workload


def closed_rows(measured: pd.DataFrame) -> pd.DataFrame:
    """The closed-loop rows of ``measured``; ``NoData`` when there are none."""
    closed = closed_loop_rows(measured)
    if closed.empty:
        raise NoData("the device has no closed-loop measurements to take capacities from")
    return closed


def mix_capacity(closed: pd.DataFrame, w: Workload) -> float:
    """The most IO/s the closed-loop rows of ``w``'s mix (write ratio, randomness, sizes) measured."""
    same = closed
    for f in ("write_ratio", "randomness"):
        same = same[np.isclose(same[f].astype(float), getattr(w, f), atol=1e-6)]
    for f in ("read_size", "write_size"):
        col = same[f].fillna(same["request_size"]) if f in same else same["request_size"]
        same = same[col.astype(float) == getattr(w, f)]
    if same.empty:
        raise NoData(f"no closed-loop point of the mix {w.write_ratio:g} writes, "
                     f"{w.read_size}/{w.write_size} B: run the closed-loop phase first")
    return float(same["iops"].max())
