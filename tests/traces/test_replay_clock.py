"""Keeping a replay on the trace's clock: gap compensation, slip measurement, lead-out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modeling.errors import InvalidInput
from tests.traces.helpers import write_generic
from traces.chunks import TraceChunk
from traces.replay.iolog import write_iolog
from traces.replay.run import replay
from traces.replay.clock import (
    CALIBRATION_PER_LANE,
    MAX_SLIP_US,
    MIN_CALIBRATION_PER_LANE,
    calibration_prefix,
    lane_slip,
    shorten_gaps,
)


def _chunk(t: np.ndarray) -> TraceChunk:
    n = len(t)
    return TraceChunk(np.asarray(t, np.float64), np.zeros(n, bool), np.zeros(n, np.int64),
                      np.full(n, 4096, np.int64), np.full(n, np.nan))


def test_every_positive_gap_is_shortened_by_the_slip_never_below_zero() -> None:
    t = np.array([1000, 1000, 1300, 1305, 2000])
    # gaps from the lead-in at 1 us: 999, 0, 300, 5, 695 -> 989, 0, 290, 0 (not -5), 685
    assert shorten_gaps(t, 10, start_us=1).tolist() == [990, 990, 1280, 1280, 1965]
    # without a lead-in the first timestamp stays where it is
    assert shorten_gaps(t, 10).tolist() == [1000, 1000, 1290, 1290, 1975]
    assert shorten_gaps(t, 0, start_us=1).tolist() == t.tolist()


def test_fractional_slips_do_not_accumulate_rounding() -> None:
    t = 1000 + 100 * np.arange(1001)
    out = shorten_gaps(t, 0.4)
    # 1000 gaps of 99.6 us: 99,600 us in all, not 1000 x round(99.6) = 100,000
    assert out[-1] - out[0] == 99_600
    assert (np.diff(out) >= 0).all()


def test_iolog_takes_the_slip_off_and_ends_every_lane_with_the_lead_out(tmp_path: Path) -> None:
    c = _chunk(np.array([0.0, 0.0005, 0.0005, 0.002]))
    write_iolog(c, "/x/t", tmp_path / "log", lead_in=4096, slip_us=20, lead_out_us=60_000)
    lines = (tmp_path / "log").read_text().splitlines()
    assert lines[3] == "1 /x/t read 0 4096"
    # trace at 1000, 1500, 1500, 3000 us; gaps 999, 500, 0, 1500 shortened by 20
    assert [int(ln.split()[0]) for ln in lines[4:8]] == [980, 1460, 1460, 2940]
    assert lines[8:] == ["60000 /x/t read 0 4096", "60000 /x/t close"]


def test_lane_slip_is_the_lateness_per_sleeping_entry_whatever_the_lanes_offsets() -> None:
    rng = np.random.default_rng(1)
    lanes, n, speed, slip = 4, 400, 2.0, 12e-6
    t = np.sort(rng.uniform(0, 1.0, n))
    t[20:25], t[100:106] = t[20], t[100]  # simultaneous arrivals (same lane too): fio does not sleep
    lane = np.arange(n) % lanes
    issue = np.empty(n)
    for k in range(lanes):
        idx = np.flatnonzero(lane == k)
        sleeps = np.cumsum(np.diff(t[idx], prepend=-1.0) > 0)
        issue[idx] = t[idx] / speed + 0.003 * k + slip * sleeps  # each lane's clock starts apart
    assert lane_slip(issue, t, lane, speed) == pytest.approx(12.0)
    assert lane_slip(t / speed, t, lane, speed) == pytest.approx(0.0, abs=1e-9)
    assert np.isnan(lane_slip(issue[:8], t[:8], lane[:8], speed))  # too few entries a lane


def test_calibration_replays_the_start_of_a_dense_trace_and_skips_a_sparse_one() -> None:
    dense = _chunk(np.arange(10_000) / 1000.0)  # 1000 IO/s for 10 s
    assert calibration_prefix(dense, 4, 1.0) == CALIBRATION_PER_LANE * 4
    assert calibration_prefix(dense, 32, 1.0) == 2001  # the first 2 s
    short = _chunk(np.arange(300) / 1000.0)
    assert calibration_prefix(short, 4, 1.0) == 150  # half the trace
    sparse = _chunk(np.arange(100) / 5.0)  # 5 IO/s: 11 requests in the first 2 s
    assert calibration_prefix(sparse, 1, 1.0) == 0
    assert MIN_CALIBRATION_PER_LANE > 11


def _dense(tmp_path: Path, n: int) -> Path:
    t = np.arange(n) / 1000.0  # 1000 IO/s
    return write_generic(tmp_path / "d.csv", t, np.zeros(n, bool), np.arange(n) * 4096, np.full(n, 4096))


def test_a_real_replay_calibrates_its_slip_and_reports_what_is_left(tmp_path: Path, fio_available: str
                                                                     ) -> None:
    n = 600  # 0.6 s: 150 requests a lane on 4 lanes, the first 300 replayed first to calibrate
    res = replay(str(_dense(tmp_path, n)), str(tmp_path / "t.img"), window_s=0.3, size=16 << 20, lanes=4)
    assert res.requests == n and int(res.windows["replay_requests"].sum()) == n  # no lead-in/out rows
    assert 0 <= res.slip_us <= MAX_SLIP_US and np.isfinite(res.residual_slip_us)
    d = res.to_dict()
    assert d["slip_compensation_us"] == res.slip_us and d["residual_slip_us"] == res.residual_slip_us


def test_a_given_slip_skips_the_calibration_and_keeps_every_request(tmp_path: Path, fio_available: str
                                                                    ) -> None:
    n = 200
    res = replay(str(_dense(tmp_path, n)), str(tmp_path / "t.img"), window_s=0.1, size=16 << 20, lanes=4,
                 slip_us=7.5)
    assert res.slip_us == 7.5
    # every request once, after the lead-in read and before the lead-out read of each lane
    assert sorted(res.log["index"].tolist()) == list(range(n))
    with pytest.raises(InvalidInput):
        replay(str(_dense(tmp_path, n)), str(tmp_path / "t.img"), slip_us=-1.0)
