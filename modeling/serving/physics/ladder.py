"""The load laws along queue depth: the ladder of measured depths and the envelope read off it.

IOPS and bandwidth per I/O in flight never rise with depth, and the mean latency never
falls (:data:`LOAD_LAWS`): a workload's value of these metrics is read off the monotone
envelope of the model at the measured depths up to its own (:func:`settle`).  The matrix
path works on a whole :class:`Ladder`; the single-row path (``*_row``: plain floats, one
workload) reads the same envelope with :func:`ladder_position`, :func:`settle_row` and
:func:`needed_rungs_row`, and ``tests/modeling/test_fast_paths.py`` holds the answers equal.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from modeling.serving.physics.limits import PhysicsLimits, RowLimits
from modeling.serving.metric_models import DERIVABLE
from modeling.workload_matrix import FIELD_INDEX as _F

LOAD_LAWS = ("iops", "bandwidth_mib_s", "latency_mean_us")
"""The metrics bound by the load laws along queue depth: read off the monotone envelope."""
_QD, _NJ = _F["queue_depth"], _F["numjobs"]


@dataclass
class Ladder:
    """Where each workload sits among the measured queue depths, and the rungs it needs.

    :func:`settle` reads a workload's load-bound metrics off the monotone envelope of the
    measured depths up to its own (and the next one, to interpolate between the two):
    only those rungs are evaluated, and only by the models of the load-bound metrics that
    have their own estimators; every other metric is evaluated once, at the workload.  A
    rung at the workload's own depth is the workload itself and is not evaluated again.
    Serving got 18x slower on batches when every metric was evaluated at every measured
    depth (k = depths + 1 rows per workload); this way a batch costs one row per
    workload per model plus the rungs of the IOPS model (issue 13).
    """

    depths: np.ndarray  # the measured depths, ascending
    low: np.ndarray  # per workload, the rung at or below its depth
    high: np.ndarray  # per workload, the rung above it (``low`` at or beyond the ends)
    frac: np.ndarray  # per workload, where between the two (0 at ``low``)
    own: np.ndarray  # per workload, the rung at its own depth, -1 if none
    owner: np.ndarray  # per rung row, the workload it belongs to
    rung: np.ndarray  # per rung row, its index among the depths

    @property
    def empty(self) -> bool:
        """No rung to evaluate (every workload at the smallest measured depth, or none)."""
        return len(self.owner) == 0


def ladder(w: np.ndarray, limits: PhysicsLimits | None) -> Ladder | None:
    """The :class:`Ladder` of workload matrix ``w``; None without at least two measured depths."""
    if limits is None or len(limits.depths) < 2:
        return None
    depths = np.asarray(limits.depths, dtype=np.float64)
    n_steps = len(depths)
    depth = w[:, _QD]
    pos = np.interp(np.log2(depth), np.log2(depths), np.arange(n_steps, dtype=np.float64))
    low = np.minimum(np.floor(pos).astype(np.intp), n_steps - 1)
    high = np.minimum(low + 1, n_steps - 1)
    frac = pos - low
    # the rungs read: up to ``high`` when between two depths, up to ``low`` at one
    top = np.where(frac > 0.0, high, low)
    at = depths[low] == depth
    own = np.where(at, low, -1)
    need = (np.arange(n_steps)[None, :] <= top[:, None]) & (np.arange(n_steps)[None, :] != own[:, None])
    owner, rung = np.nonzero(need)
    return Ladder(depths, low, high, frac, own, owner, rung)


def ladder_position(logs: Sequence[float], depth: float) -> tuple[int, int, float]:
    """One workload's place on the ladder: (low, high, frac) of :class:`Ladder`.

    ``np.interp`` of log2 ``depth`` over the measured depths' log2 (``logs``), clamped
    at both ends, as :func:`ladder` computes it.
    """
    n = len(logs)
    x = math.log2(depth)
    if x <= logs[0]:
        pos = 0.0
    elif x >= logs[-1]:
        pos = float(n - 1)
    else:
        j = bisect_right(logs, x) - 1
        pos = j + (x - logs[j]) * (1.0 / (logs[j + 1] - logs[j]))
    low = min(math.floor(pos), n - 1)
    return low, min(low + 1, n - 1), pos - low


def ladder_rows(at: tuple[int, int, float]) -> int:
    """How many measured depths, from the smallest, :func:`settle_row` reads at position ``at``.

    At a measured depth the envelope is read there (the next one weighs nothing).
    """
    low, high, frac = at
    return (high if frac > 0.0 else low) + 1


def needed_rungs(
    metric: str, lad: Ladder, w: np.ndarray, own: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """The rung rows that can set their workload's envelope, of bounds on every rung's value.

    ``own`` is ``metric`` at the workloads ``w``, ``lo`` and ``hi`` bounds on it at the
    rung rows (``ScopeModel.bounds``).  :func:`settle` reads a running minimum of IOPS per
    I/O in flight (a running maximum of the mean latency) up to the workload's own depth
    ``low``, and the next rung when between two.  Its value at ``low`` is at most ``M``,
    the smallest upper bound there (or the workload's own value at a measured depth); a
    rung whose lower bound is above ``M`` cannot be that minimum, nor lower it at the next
    rung, and is not evaluated: the envelope, and the answer, are the same.  On a device
    whose IOPS per I/O already falls with depth almost no rung is left (issue 13: rungs
    made a 10,000-workload batch several times slower).
    """
    if metric == "latency_mean_us":  # a running maximum: the running minimum of its negative
        lo_key, hi_key, own_key = -hi, -lo, -own
    else:
        load = lad.depths[lad.rung] * w[lad.owner, _NJ]
        lo_key, hi_key = lo / load, hi / load
        own_key = own / (w[:, _QD] * w[:, _NJ])
    bound = np.where(lad.own >= 0, own_key, np.inf)
    below = lad.rung <= lad.low[lad.owner]
    np.minimum.at(bound, lad.owner[below], hi_key[below])
    return ~(lo_key > bound[lad.owner])


def needed_rungs_row(
    metric: str, lo: Sequence[float], hi: Sequence[float], own: float, row: Sequence[float], lad: Any
) -> list[int]:
    """:func:`needed_rungs` of one workload: the ladder rows worth evaluating.

    ``lo`` and ``hi`` bound the metric at the ladder's measured depths ``lad.depths``
    (the first ``lad.rungs``), ``own`` is its value at the workload ``row``, ``lad.at``
    the row's :func:`ladder_position`.  The workload's own rung (at a measured depth)
    is never listed: its value is ``own``.
    """
    low, _, frac = lad.at
    nj = row[_NJ]
    own_rung = low if lad.own_included and frac == 0.0 else -1
    if metric == "latency_mean_us":  # a running maximum: the running minimum of its negative
        lo_key = [-v for v in hi[: lad.rungs]]
        hi_key = [-v for v in lo[: lad.rungs]]
        own_key = -own
    else:
        lo_key = [v / (d * nj) for v, d in zip(lo, lad.depths[: lad.rungs], strict=False)]
        hi_key = [v / (d * nj) for v, d in zip(hi, lad.depths[: lad.rungs], strict=False)]
        own_key = own / (row[_QD] * nj)
    bound = min([own_key if own_rung >= 0 else math.inf, *hi_key[: low + 1]])
    return [j for j in range(lad.rungs) if j != own_rung and not lo_key[j] > bound]


def settle(
    values: dict[str, np.ndarray],
    rungs: dict[str, np.ndarray],
    lad: Ladder | None,
    w: np.ndarray,
) -> dict[str, np.ndarray]:
    """Per workload, the values that respect the load laws along queue depth.

    ``values`` are every metric at the workloads ``w`` themselves, ``rungs`` each
    load-bound metric with its own estimators at :attr:`Ladder.owner`'s rung rows
    (infinite, towards the side that cannot set the envelope, where a rung was not
    evaluated: :func:`needed_rungs`).  Along
    the measured depths, IOPS and bandwidth per I/O in flight are made non-increasing
    (running minimum) and the mean latency non-decreasing (running maximum); a workload's
    own value is read off that envelope, geometrically interpolated between the two
    measured depths around its depth.  A load-bound metric derived from IOPS (bandwidth,
    and the mean latency by Little's law) moves by IOPS's own factor, which is its
    envelope exactly.  The percentiles are the workload's own (the tail is noisy along
    depth, issue 13), ordered later.
    """
    if lad is None:
        return values
    n, n_steps = len(w), len(lad.depths)
    rows = np.arange(n)
    nj = w[:, _NJ]
    at = lad.own >= 0
    out = dict(values)
    for metric, steps_v in rungs.items():
        steps = np.ones((n, n_steps))  # rungs above a workload's are never read
        steps[lad.owner, lad.rung] = steps_v
        steps[rows[at], lad.own[at]] = values[metric][at]
        if metric == "latency_mean_us":
            env = np.maximum.accumulate(steps, axis=1)
            scale: Any = 1.0
        else:  # IOPS and bandwidth per I/O in flight
            env = np.minimum.accumulate(steps / (lad.depths[None, :] * nj[:, None]), axis=1)
            scale = w[:, _QD] * nj
        logs = np.log(np.maximum(env, 1e-300))
        out[metric] = np.exp(logs[rows, lad.low] * (1.0 - lad.frac) + logs[rows, lad.high] * lad.frac) * scale
    if "iops" in rungs:
        factor = out["iops"] / np.maximum(values["iops"], 1e-300)
        for metric in (m for m in DERIVABLE if m in values and m not in rungs):
            # bandwidth is proportional to IOPS, the mean latency (Little's law) inversely
            out[metric] = values[metric] * factor if metric == "bandwidth_mib_s" else values[metric] / factor
    return out


def settle_row(
    metric: str, steps: Sequence[float], row: Sequence[float], lim: RowLimits, at: tuple[int, int, float]
) -> float:
    """:func:`settle` of one load-law metric of one workload.

    ``steps`` are the metric at the first :func:`ladder_rows` measured depths (the
    workload ``row`` evaluated at each), ``at`` the row's :func:`ladder_position`.  A
    metric derived from IOPS is settled as it is evaluated along the ladder (its
    derivation at each depth), which lands on the same envelope.
    """
    low, high, frac = at
    nj = row[_NJ]
    if metric == "latency_mean_us":
        env = list(itertools.accumulate(steps, max))
        scale = 1.0
    else:  # IOPS and bandwidth per I/O in flight
        env = list(itertools.accumulate((v / (d * nj) for v, d in zip(steps, lim.depths, strict=False)), min))
        scale = row[_QD] * nj
    a = math.log(max(env[low], 1e-300))
    b = math.log(max(env[high], 1e-300)) if frac > 0.0 else a
    return math.exp(a * (1.0 - frac) + b * frac) * scale
