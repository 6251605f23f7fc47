"""How far a device's tail latency can be predicted from the workload, from the data alone.

A model of the workload is a smooth function of it.  Where a measured percentile jumps
several-fold between neighbouring workloads of a sweep while the mean latency barely
moves, no such function can place the jump from the other points: a slow mode (a cache
flush, a garbage-collection stall) holds about 1 % of the I/Os there, and a slightly larger
share moves the p99 from the fast mode to the slow one.  This module finds those jumps on
the measured grid and scores the local interpolations an oracle could make, so a study
can say which part of a p99 error is the model's and which the data's.

Neighbours on a fio sweep's grid (``queue_depth`` x ``numjobs`` at each mix, size and
randomness): one power-of-two step of queue depth or numjobs with all else equal, and the
*same-load peers*, the other splits of the same outstanding I/O (1 x 4, 2 x 2, 4 x 1).
"""

from __future__ import annotations

import numpy as np

from modeling.workload_matrix import FIELD_INDEX

JUMP_FACTOR = 4.0
"""A p99 this many times a neighbour's (either way) is a jump, when the means are close."""
MEAN_FACTOR = 2.0
"""...and the two mean latencies are within this factor (the load barely differs)."""

_QD, _NJ = FIELD_INDEX["queue_depth"], FIELD_INDEX["numjobs"]


def _grid(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per workload: its group (every field but queue depth and numjobs), log2 depth, log2 jobs."""
    rest = np.round(np.delete(w, [_QD, _NJ], axis=1), 9)
    _, group = np.unique(rest, axis=0, return_inverse=True)
    return np.asarray(group).ravel(), np.round(np.log2(w[:, _QD]), 6), np.round(np.log2(w[:, _NJ]), 6)


def grid_neighbours(w: np.ndarray) -> list[np.ndarray]:
    """Per workload, the measured workloads one step of queue depth or numjobs away, all else equal.

    A step is to the next measured value of that field (the sweep's grid need not be
    powers of two), at the same value of the other.
    """
    group, qd, nj = _grid(w)
    levels = {0: np.unique(qd), 1: np.unique(nj)}
    out = []
    for i in range(len(w)):
        near: list[int] = []
        for axis, (mine, other) in enumerate(((qd, nj), (nj, qd))):
            rank = int(np.searchsorted(levels[axis], mine[i]))
            for r in (rank - 1, rank + 1):
                if 0 <= r < len(levels[axis]):
                    hit = (group == group[i]) & (mine == levels[axis][r]) & (other == other[i])
                    near += np.flatnonzero(hit).tolist()
        out.append(np.array(sorted(near), dtype=int))
    return out


def same_load_peers(w: np.ndarray) -> list[np.ndarray]:
    """Per workload, the other measured splits of its outstanding I/O (depth x jobs), all else equal."""
    group, qd, nj = _grid(w)
    load = qd + nj
    index = np.arange(len(w))
    return [np.flatnonzero((group == group[i]) & (load == load[i]) & (index != i)) for i in range(len(w))]


def tail_jumps(
    w: np.ndarray,
    tail: np.ndarray,
    mean: np.ndarray,
    factor: float = JUMP_FACTOR,
    mean_factor: float = MEAN_FACTOR,
    grid: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Workloads whose ``tail`` is over ``factor`` times a neighbour's, or under 1/``factor``,
    while their mean latencies are within ``mean_factor``.

    The neighbours are the grid's (:func:`grid_neighbours`) and the same-load peers
    (:func:`same_load_peers`).  Both ends of a jump are marked: from either side the other
    is what a model would have to interpolate across.  ``grid``: :func:`grid_neighbours`
    of ``w``, when the caller has them already.
    """
    jump = np.zeros(len(w), dtype=bool)
    grid = grid_neighbours(w) if grid is None else grid
    for i, (steps, peers) in enumerate(zip(grid, same_load_peers(w), strict=True)):
        near = np.union1d(steps, peers)
        if len(near) == 0:
            continue
        tail_step = np.abs(np.log(tail[near] / tail[i]))
        mean_step = np.abs(np.log(mean[near] / mean[i]))
        jump[i] = bool(np.any((tail_step > np.log(factor)) & (mean_step < np.log(mean_factor))))
    return jump


def loo_geometric_mean(values: np.ndarray, neighbours: list[np.ndarray]) -> np.ndarray:
    """Each workload's value read off the geometric mean of its neighbours' (NaN where it has none).

    The workload itself is never among them: this is a leave-one-out interpolation.
    """
    guess = np.full(len(values), np.nan)
    for i, near in enumerate(neighbours):
        near = near[near != i]
        if len(near):
            guess[i] = float(np.exp(np.mean(np.log(values[near]))))
    return guess


CONSISTENT_JUMPS = 0.2
"""A tail with jumps at fewer than this share of its workloads follows the workload.

On the fio-plot devices the arrays have 0-6 % (RAID0's write cache knee), the SATA SSDs,
whose p99 sits between a fast mode and a slow one of about 1 % of the I/Os, 40-52 %."""
MIN_GRID_SHARE = 0.5
"""Jumps are only counted when at least this share of the workloads has a grid neighbour."""


def consistent_tail(w: np.ndarray, tail: np.ndarray, mean: np.ndarray) -> bool:
    """Whether a measured tail follows the workload: few jumps (:func:`tail_jumps`) on a grid.

    False when too few workloads have a grid neighbour to tell (a sweep that is not a grid
    of queue depth x numjobs): the robust default then stays.
    """
    grid = grid_neighbours(w)
    has_neighbour = np.array([len(n) > 0 for n in grid], dtype=bool)
    if len(w) == 0 or has_neighbour.mean() < MIN_GRID_SHARE:
        return False
    return bool(tail_jumps(w, tail, mean, grid=grid)[has_neighbour].mean() < CONSISTENT_JUMPS)
