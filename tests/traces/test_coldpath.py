"""The cold-path correction by each request's idle gap (traces.predict.coldpath) and the gap histogram."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.traces.helpers import write_generic
from traces.characterize import characterize
from traces.predict.coldpath import ColdPath, fit_cold_path
from traces.stats import GAP_EDGES, gap_histogram


def _hist(gaps: np.ndarray) -> np.ndarray:
    return gap_histogram(np.concatenate([[0.0], np.cumsum(gaps)]), np.zeros(len(gaps) + 1, np.int64), 1)


def test_fit_recovers_a_known_cold_path() -> None:
    truth = ColdPath(1.2, 5.0, 1e-3)
    rate = np.array([100.0, 300.0, 1000.0, 3000.0, 10_000.0])
    fit = fit_cold_path(rate, np.log(truth.poisson(rate)))
    assert fit is not None
    assert fit.b == pytest.approx(1.2, rel=0.05) and fit.c == pytest.approx(5.0, rel=0.05)
    assert fit.tau == pytest.approx(1e-3, rel=0.1)
    # two points are too few for a curve: the flat ratio through them (their geometric mean)
    two = fit_cold_path(rate[:2], np.log([2.0, 8.0]))
    assert two == ColdPath(pytest.approx(4.0), 0.0, 1.0)
    assert fit_cold_path(rate[:2], np.array([np.nan, np.nan])) is None


def test_poisson_gaps_keep_the_rate_correction_and_bursts_run_hot() -> None:
    cold = ColdPath(1.0, 4.0, 1e-3)
    rng = np.random.default_rng(0)
    rate = np.array([1000.0])
    poisson = _hist(rng.exponential(1 / rate[0], 20_000))
    assert cold.adjustment(rate, poisson)[0] == pytest.approx(1.0, abs=0.03)
    # the same mean rate as runs of 50 requests 20 us apart with idle time between runs:
    # most requests follow the previous one closely and see the hot path
    gaps = np.tile(np.r_[np.full(49, 20e-6), 50e-3 - 49 * 20e-6], 400)
    adj = cold.adjustment(rate, _hist(gaps))[0]
    expected = cold.gaps(_hist(gaps))[0] / cold.poisson(rate)[0]
    assert adj == pytest.approx(expected) and adj < 0.5
    # no gaps in a window, or no cold path: the rate-only correction stays
    assert cold.adjustment(rate, np.zeros_like(poisson))[0] == 1.0
    assert ColdPath(2.0, 0.0, 1.0).adjustment(rate, _hist(gaps))[0] == 1.0


def test_characterisation_keeps_each_windows_gaps(tmp_path: Path) -> None:
    t = np.r_[np.arange(10) * 1e-3, 1.0 + np.arange(5) * 0.1]
    n = len(t)
    path = write_generic(tmp_path / "g.csv", t, np.zeros(n, bool), np.arange(n) * 4096, np.full(n, 4096))
    char = characterize(str(path), window_s=1.0)
    assert char.gap_hist is not None and char.gap_hist.shape[0] == len(char.windows) == 2
    assert char.gap_hist.sum(axis=1).tolist() == [9, 4]  # gaps within each window
    ms = int(np.searchsorted(GAP_EDGES, 1e-3 * 1.0001))
    assert char.gap_hist[0, ms - 1 : ms + 1].sum() == 9
