"""The tail's predictability floor: grid neighbours, same-load peers, and the p99's jumps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from modeling.training.tail_floor import (
    consistent_tail,
    grid_neighbours,
    loo_geometric_mean,
    same_load_peers,
    tail_jumps,
)
from modeling.training.fit import fit_device_model
from modeling.workload_matrix import FIELD_INDEX, workload_matrix
from tests.modeling.conftest import fast_candidates, synthetic_rows

DEPTHS = (1, 2, 4, 8, 16)


def sweep() -> pd.DataFrame:
    """fio-plot's grid: queue depth x numjobs at random read and random write, 4 KiB."""
    rows = [
        {"write_ratio": wr, "queue_depth": qd, "numjobs": nj, "request_size": 4096, "randomness": 1.0}
        for wr in (0.0, 1.0)
        for nj in DEPTHS
        for qd in DEPTHS
    ]
    return pd.DataFrame(rows)


def at(frame: pd.DataFrame, wr: float, qd: int, nj: int) -> int:
    hit = frame.index[(frame.write_ratio == wr) & (frame.queue_depth == qd) & (frame.numjobs == nj)]
    return int(hit[0])


def test_grid_neighbours_are_one_step_of_depth_or_jobs_at_the_same_mix() -> None:
    frame = sweep()
    near = grid_neighbours(workload_matrix(frame))
    corner, middle = at(frame, 0.0, 1, 1), at(frame, 1.0, 2, 4)
    assert set(near[corner].tolist()) == {at(frame, 0.0, 2, 1), at(frame, 0.0, 1, 2)}
    assert set(near[middle].tolist()) == {
        at(frame, 1.0, 1, 4), at(frame, 1.0, 4, 4), at(frame, 1.0, 2, 2), at(frame, 1.0, 2, 8)
    }


def test_same_load_peers_are_the_other_splits_of_the_outstanding_io() -> None:
    frame = sweep()
    peers = same_load_peers(workload_matrix(frame))
    assert set(peers[at(frame, 1.0, 2, 2)].tolist()) == {at(frame, 1.0, 4, 1), at(frame, 1.0, 1, 4)}
    assert len(peers[at(frame, 0.0, 1, 1)]) == 0  # one way to have one I/O in flight
    assert len(peers[at(frame, 0.0, 16, 16)]) == 0


def test_loo_guess_leaves_the_workload_out_and_is_nan_without_neighbours() -> None:
    values = np.array([1.0, 4.0, 16.0, 5.0])
    near = [np.array([0, 1, 2]), np.array([0, 2]), np.array([], int), np.array([3])]
    guess = loo_geometric_mean(values, near)
    assert guess[0] == pytest.approx(8.0)  # sqrt(4 x 16): itself left out
    assert guess[1] == pytest.approx(4.0)
    assert np.isnan(guess[2]) and np.isnan(guess[3])


def test_a_jump_is_a_step_of_the_p99_where_the_mean_barely_moves() -> None:
    frame = sweep()
    w = workload_matrix(frame)
    load = (frame.queue_depth * frame.numjobs).to_numpy(float)
    mean = 100.0 * load**0.6  # queueing: the mean grows with the load, 1.5x per step
    p99 = 3.0 * mean
    # the write cache's slow mode crosses 1 % at one split of 4 in flight only: 7x, same mean
    knee = at(frame, 1.0, 2, 2)
    p99[knee] *= 7.0
    jumps = tail_jumps(w, p99, mean)
    # the knee and every neighbour it towers over (its peers, and one step either way)
    around = [(4, 1), (1, 4), (1, 2), (2, 1), (4, 2), (2, 4)]
    assert set(np.flatnonzero(jumps).tolist()) == {knee, *(at(frame, 1.0, qd, nj) for qd, nj in around)}
    # the same 7x step where the mean also rises 4x is load, not a jump
    mean_steep = mean.copy()
    mean_steep[knee] *= 4.0
    assert knee not in np.flatnonzero(tail_jumps(w, p99, mean_steep)).tolist()
    # a smooth tail has none
    assert not tail_jumps(w, 3.0 * mean, mean).any()


def test_a_tail_is_consistent_with_few_jumps_on_a_grid_and_unjudged_off_one() -> None:
    frame = sweep()
    w = workload_matrix(frame)
    load = (frame.queue_depth * frame.numjobs).to_numpy(float)
    mean = 100.0 * load**0.6
    p99 = 3.0 * mean
    assert consistent_tail(w, p99, mean)
    # one knee (7 of 50 workloads at a jump: the knee and its six neighbours) still is
    p99[at(frame, 1.0, 2, 2)] *= 7.0
    assert consistent_tail(w, p99, mean)
    # a bimodal tail: every other workload's p99 in the slow mode
    bimodal = 3.0 * mean * np.where(np.arange(len(w)) % 2 == 0, 1.0, 20.0)
    assert not consistent_tail(w, bimodal, mean)
    # workloads with no grid neighbours (every depth differs) cannot tell: not consistent
    lone = w[::5].copy()
    lone[:, FIELD_INDEX["queue_depth"]] = 2.0 ** np.arange(len(lone))  # no two share a depth
    lone[:, FIELD_INDEX["numjobs"]] = 2.0 ** np.arange(len(lone))[::-1]  # nor a job count
    assert not any(len(n) for n in grid_neighbours(lone))
    assert not consistent_tail(lone, 3.0 * mean[::5], mean[::5])


def test_training_reports_whether_the_p99_follows_the_workload() -> None:
    """The p99's ratio is chosen by the lower CV error only on a consistent tail (the report says which)."""
    grid = {
        "write_ratio": (0.0, 1.0),
        "queue_depth": (1, 4, 16, 64),
        "request_size": (4096,),
        "randomness": (1.0,),
        "numjobs": (1, 2, 4),
    }
    rows = synthetic_rows(noise=0.02, seed=3, grid=grid)
    _, report = fit_device_model(rows, folds=3, candidates=fast_candidates(), regions=False)
    assert report["metrics"]["latency_p99_us"]["physics"]["consistent_tail"] is True
    # every other workload's p99 in a slow mode 20x up: the tail jumps everywhere
    slow = np.where(np.arange(len(rows)) % 2 == 0, 1.0, 20.0)
    bimodal = rows.assign(latency_p99_us=rows["latency_p99_us"] * slow)
    _, report = fit_device_model(bimodal, folds=3, candidates=fast_candidates(), regions=False)
    assert report["metrics"]["latency_p99_us"]["physics"]["consistent_tail"] is False
