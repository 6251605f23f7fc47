"""The replay path's own capacity, stored by ``sweep --for-trace``, caps the prediction's (and says so)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from modeling.errors import InvalidInput
from modeling.store import DataDir
from tests.traces.fake_devices import FakeMMcDevice, window_table
from traces.predict.ceiling import replay_ceilings
from traces.predict.openloop import predict_open_loop
from traces.predict.windows import device_source

MIB = 1 << 20
LOADS = [(1, n) for n in (1, 2, 4, 8, 16)]


def _rows(size: int, capacity: float) -> list[dict[str, float]]:
    """A mix's closed-loop ladder (psync jobs) up to ``capacity`` and two fio open-loop points."""
    base = {
        "write_ratio": 0.0,
        "queue_depth": 1,
        "request_size": size,
        "randomness": 1.0,
        "read_size": size,
        "write_size": size,
        "engine": "psync",
    }
    closed = [
        {
            **base,
            "numjobs": n,
            "iops": capacity * min(n, 2) / 2,
            "latency_mean_us": 100.0,
            "latency_p99_us": 300.0,
        }
        for n in (1, 2, 4, 8, 16)
    ]
    fio = [
        {
            **base,
            "numjobs": 16,
            "offered_iops": r,
            "iops": r,
            "latency_mean_us": 120.0,
            "latency_p99_us": 400.0,
        }
        for r in (0.2 * capacity, 0.5 * capacity)
    ]
    return closed + fio


def _replayed(size: int, offered: float, served: float) -> dict[str, object]:
    return {
        "write_ratio": 0.0,
        "queue_depth": 1,
        "request_size": size,
        "randomness": 1.0,
        "numjobs": 16,
        "read_size": size,
        "write_size": size,
        "engine": "psync",
        "offered_iops": offered,
        "iops": served,
        "latency_mean_us": 2000.0,
        "latency_p99_us": 9000.0,
        "open_loop_method": "replay",
    }


def _home(tmp_path: Path, with_replay: bool) -> DataDir:
    d = DataDir(tmp_path / "home")
    d.catalog.ensure_device("dev")
    rows = _rows(MIB, 10_000.0) + _rows(4096, 400_000.0)
    d.catalog.add_measurements("dev", rows)  # one sweep: the open-loop rows as one phase
    if with_replay:
        # an open-loop phase of both mixes, with the replay path's capacity of the 1 MiB one only
        again = [r for r in rows if "offered_iops" in r] + [_replayed(MIB, 30_000.0, 7_000.0)]
        d.catalog.add_measurements("dev", again)
    return d


def test_the_stored_replay_capacity_caps_its_mix_only_and_says_so(tmp_path: Path) -> None:
    src = device_source(_home(tmp_path, True), "dev", FakeMMcDevice(5_000.0, 2))
    assert src.replay is not None
    notes = [n for n in src.notes if "replay path's own" in n]
    assert notes == [
        "capacity capped at 70% of the closed-loop capacity for 1 MiB reads: the replay path's "
        "own, measured by sweep --for-trace (7,000 of 10,000 IO/s)"
    ]
    windows = pd.concat(
        [
            window_table([1000.0]).assign(request_size=MIB, read_size=MIB, write_size=MIB),
            window_table([1000.0]),
        ],
        ignore_index=True,
    )
    assert src.ceilings(windows).tolist() == pytest.approx([0.7, 1.0])
    # an explicit ceiling (the reference bench's) overrides the stored one
    src.ceiling = 0.5
    assert src.ceilings(windows) == 0.5
    # the replay row is saturated: the open-loop correction leaves it out (it was fitted on the fio points)
    assert src.correction is not None


def test_a_window_of_the_replayed_mix_gets_the_capacity_the_replay_path_served(tmp_path: Path) -> None:
    # the model's curve peaks at 8,000 IO/s where the sweep's highest stored point says 10,000: the
    # share is of the model's capacity, so the window's capacity is the 7,000 IO/s the replay served
    # (of the stored maximum it would be 70 % of 8,000: 5,600, and a window at 6,000 IO/s saturated)
    model = FakeMMcDevice(4_000.0, 2)
    src = device_source(_home(tmp_path, True), "dev", model)
    windows = window_table([6_000.0]).assign(request_size=MIB, read_size=MIB, write_size=MIB)
    assert src.ceilings(windows).tolist() == pytest.approx([0.875])
    pred = predict_open_loop(model, windows, src.loads, ceiling=src.ceilings(windows))
    assert pred["capacity_iops"].tolist() == pytest.approx([7_000.0])
    assert not pred["saturated"].any()
    assert "(7,000 of 8,000 IO/s)" in " ".join(src.notes)


def test_without_a_replay_capacity_nothing_is_capped(tmp_path: Path) -> None:
    src = device_source(_home(tmp_path, False), "dev", FakeMMcDevice(5_000.0, 2))
    assert src.replay is None and src.ceilings(window_table([1.0])) == 1.0
    assert not any("replay path" in n for n in src.notes)
    assert replay_ceilings(pd.DataFrame(), pd.DataFrame()) is None


def test_per_window_ceilings_cap_each_window_as_one_number_would() -> None:
    dev = FakeMMcDevice(10_000.0, 2)
    win = window_table([10_000.0, 15_000.0, 15_000.0])
    both = predict_open_loop(dev, win, LOADS, ceiling=np.array([1.0, 1.0, 0.6]))
    free = predict_open_loop(dev, win, LOADS)
    capped = predict_open_loop(dev, win, LOADS, ceiling=0.6)
    assert both["capacity_iops"].tolist() == pytest.approx(
        [*free["capacity_iops"][:2], capped["capacity_iops"][2]]
    )
    assert both["saturated"].tolist() == [False, False, True]
    with pytest.raises(InvalidInput, match="ceiling"):
        predict_open_loop(dev, win, LOADS, ceiling=np.array([1.0, 0.0, 1.0]))


def test_a_capacity_point_served_in_full_caps_nothing_and_corrects_nothing(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "home")
    d.catalog.ensure_device("dev")
    rows = _rows(MIB, 10_000.0)
    d.catalog.add_measurements("dev", rows)
    fio = [r for r in rows if "offered_iops" in r]
    d.catalog.add_measurements("dev", [*fio, _replayed(MIB, 10_000.0, 9_900.0)])
    model = FakeMMcDevice(5_000.0, 2)
    src = device_source(d, "dev", model)
    assert src.replay is not None and src.ceilings(window_table([1.0])).tolist() == pytest.approx([0.99])
    # the correction is the fio points' alone: the same as without the replay row
    d2 = DataDir(tmp_path / "home2")
    d2.catalog.ensure_device("dev")
    d2.catalog.add_measurements("dev", rows)
    d2.catalog.add_measurements("dev", fio)
    win = window_table([3000.0]).assign(request_size=MIB, read_size=MIB, write_size=MIB)
    pred = predict_open_loop(model, win, LOADS)
    without = device_source(d2, "dev", model).correction
    assert src.correction is not None and without is not None
    assert src.correction.factors(win, pred, None)[0].tolist() == pytest.approx(
        without.factors(win, pred, None)[0].tolist()
    )
