"""A member device's closed-loop curve, read through its public model: IOPS against in-flight I/O.

The what-if laws (:mod:`modeling.derived.raid`, :mod:`modeling.derived.fabric`) ask a
member what it does with ``x`` requests in flight, for ``x`` that need not be a whole
queue depth (an array of 3 spreads 4 requests as 1.33 per member).  The member's model
is asked once per workload at the in-flight counts of a fixed grid (powers of two, 1 to
4096), and the curve is interpolated between them in log-log space; below one request
the latency is that of one lone request, beyond the grid the member stays saturated.
Mean latency always follows from Little's law (``W = x / X(x)``), as in a closed-loop
fio run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from modeling.serving.metric_models import derive_from_iops
from modeling.workload_matrix import FIELD_INDEX

_QD, _NJ = FIELD_INDEX["queue_depth"], FIELD_INDEX["numjobs"]
GRID = 2.0 ** np.arange(0, 13)
"""In-flight counts the member is asked at (1 .. 4096)."""
KNEE_FRACTION = 0.8
"""A member is below its knee while its IOPS are under this share of its saturated IOPS."""


class Member(Protocol):
    """What a derived device needs of the device it is made from: the public batch predict."""

    device: str
    metrics: tuple[str, ...]

    def predict_matrix(
        self, w: np.ndarray, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]: ...


class Curves:
    """Per workload row, the member's IOPS at every :data:`GRID` in-flight count (and its tails)."""

    def __init__(
        self, member: Member, w: np.ndarray, model: str = "auto", cache: CurveCache | None = None
    ) -> None:
        n, g = len(w), len(GRID)
        self.log_iops = np.empty((n, g))
        self.extrapolated_grid = np.empty((n, g), dtype=bool)
        self.tail_ratio: np.ndarray | None = np.empty((n, g))
        shape = w.copy()
        shape[:, _QD] = 0.0  # the curve does not depend on the queue depth asked about
        keys = [(model, r.tobytes()) for r in shape]
        known = cache.get_many(keys) if cache is not None else [None] * n
        todo = [i for i, k in enumerate(known) if k is None]
        if todo:
            fresh = _ask(member, w[todo], model)
            for j, i in enumerate(todo):
                known[i] = tuple(None if a is None else a[j] for a in fresh)
            if cache is not None:
                cache.put_many([keys[i] for i in todo], [known[i] for i in todo])
        for i, (log_iops, extrap, tail) in enumerate(known):  # type: ignore[misc]
            self.log_iops[i], self.extrapolated_grid[i] = log_iops, extrap
            if tail is None:
                self.tail_ratio = None
            elif self.tail_ratio is not None:
                self.tail_ratio[i] = tail

    def iops(self, x: np.ndarray) -> np.ndarray:
        """The member's IOPS with ``x`` requests in flight (one value per row)."""
        lx = np.log2(np.clip(x, 1.0, GRID[-1]))
        lo = np.clip(np.floor(lx).astype(int), 0, len(GRID) - 2)
        f = lx - lo
        r = np.arange(len(x))
        value = np.exp((1 - f) * self.log_iops[r, lo] + f * self.log_iops[r, lo + 1])
        # below one request in flight, a fraction of the time busy at the one-request rate
        return value * np.minimum(x, 1.0)

    def latency_us(self, x: np.ndarray) -> np.ndarray:
        """Mean latency (us) with ``x`` in flight, by Little's law; one lone request below 1."""
        x1 = np.maximum(x, 1.0)
        return 1e6 * x1 / self.iops(x1)

    def knee(self) -> np.ndarray:
        """Per row, the largest grid in-flight count still below :data:`KNEE_FRACTION` of saturation."""
        top = self.log_iops.max(axis=1, keepdims=True)
        below = self.log_iops < top + np.log(KNEE_FRACTION)
        # the last grid point of the leading run below the knee (1 when even one request saturates it)
        run = np.cumprod(below, axis=1).sum(axis=1)
        return GRID[np.maximum(run - 1, 0)]

    def extrapolated(self, *xs: np.ndarray) -> np.ndarray:
        """Per row, whether the member's model extrapolates at the grid points around any ``x``."""
        r = np.arange(len(self.log_iops))
        flag = np.zeros(len(r), dtype=bool)
        for x in xs:
            lx = np.log2(np.clip(x, 1.0, GRID[-1]))
            flag |= (
                self.extrapolated_grid[r, np.floor(lx).astype(int)]
                | self.extrapolated_grid[r, np.ceil(lx).astype(int)]
            )
        return flag

    def tail(self, x: np.ndarray) -> np.ndarray | None:
        """The member's p99 / mean ratio at ``x`` in flight (nearest grid point), if it has one."""
        if self.tail_ratio is None:
            return None
        i = np.clip(np.rint(np.log2(np.maximum(x, 1.0))).astype(int), 0, len(GRID) - 1)
        return self.tail_ratio[np.arange(len(x)), i]


def _ask(member: Member, w: np.ndarray, model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The member's log IOPS, extrapolation flags and p99/mean ratios at every grid point of each row."""
    n, g = len(w), len(GRID)
    rows = np.repeat(w, g, axis=0)
    x = np.tile(GRID, n)
    # the member's requests come from the same jobs: as many jobs as requests, up to numjobs
    jobs = np.minimum(rows[:, _NJ], x)
    rows[:, _NJ] = jobs
    rows[:, _QD] = x / jobs
    wanted = [m for m in ("iops", "latency_mean_us", "latency_p99_us") if m in member.metrics]
    out = member.predict_matrix(rows, metrics=wanted, model=model)
    tail = None
    if "latency_p99_us" in out and "latency_mean_us" in out:
        ratio = out["latency_p99_us"][0] / np.maximum(out["latency_mean_us"][0], 1e-9)
        tail = np.maximum(ratio, 1.0).reshape(n, g)
    return np.log(np.maximum(out["iops"][0], 1e-9)).reshape(n, g), out["iops"][3].reshape(n, g), tail


class CurveCache:
    """Member curves by workload shape (everything but the queue depth), bounded, least recent out.

    A derived device asks its member 13 workloads per answer; a service answering the same
    shapes at other depths (a load sweep, a capacity search) reads them from here instead,
    so a what-if costs about what an ordinary prediction does.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[Any]) -> list[Any]:
        with self._lock:
            out = []
            for k in keys:
                v = self._data.get(k)
                if v is not None:
                    self._data.move_to_end(k)
                out.append(v)
            return out

    def put_many(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        with self._lock:
            for k, v in zip(keys, values, strict=True):
                self._data[k] = v
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


def as_result(values: dict[str, np.ndarray], extrapolated: np.ndarray, law: str) -> dict[str, Any]:
    """The laws' common output: metric arrays, the member's extrapolation flag and the law's name."""
    return {"values": values, "extrapolated": extrapolated, "law": law}


def rate_values(iops: np.ndarray, size: np.ndarray, in_flight: np.ndarray) -> dict[str, np.ndarray]:
    """IOPS with the bandwidth and mean latency it implies (Little's law), as trained models derive them."""
    return {
        "iops": iops,
        "bandwidth_mib_s": derive_from_iops("bandwidth_mib_s", iops, size, in_flight),
        "latency_mean_us": derive_from_iops("latency_mean_us", iops, size, in_flight),
    }
