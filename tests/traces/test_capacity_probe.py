"""``trace validate`` probes the replay path's capacity beside its replay, predicts with the probes'
median and says which capacity it used (the sweep's, the probes')."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modeling.store import DataDir
from tests.traces.fake_devices import FakeMMcDevice, window_table
from tests.traces.test_replay_ceiling import _home, _replayed, _rows
from traces.predict.ceiling import replay_ceilings
from traces.predict.windows import device_source, newest_open_loop
from traces.validate.capacity_probe import CapacityProbe, CapacityProber

MIB = 1 << 20


def test_probed_ceilings_replace_the_sweeps_served_rate_and_say_both(tmp_path: Path) -> None:
    d = _home(tmp_path, True)
    frame = d.catalog.measurements("dev")
    swept = replay_ceilings(newest_open_loop(frame), frame)
    assert swept is not None
    i = int(np.flatnonzero(np.isfinite(swept.served))[0])
    now = swept.probed({i: 8_500.0})
    assert now.served[i] == 8_500.0 and now.shares[i] == pytest.approx(0.85)
    assert swept.served[i] == 7_000.0  # the sweep's ceilings are not changed
    assert now.notes() == [
        "capacity capped at 85% of the closed-loop capacity for 1 MiB reads: the replay path's own, probed "
        "by trace validate just now (sweep --for-trace measured 7,000) (8,500 of 10,000 IO/s)"
    ]
    # a probe over the closed-loop capacity raises it (issue 22: no longer clipped at 1), and says so;
    # probing twice keeps the sweep's value
    assert now.probed({i: 12_000.0}).shares[i] == pytest.approx(1.2)
    assert now.probed({i: 12_000.0}).notes() == [
        "capacity raised to 120% of the closed-loop capacity for 1 MiB reads: the replay path's own, probed "
        "by trace validate just now (sweep --for-trace measured 7,000) (12,000 of 10,000 IO/s)"
    ]
    assert now.probed({i: 12_000.0}).swept is not None
    assert now.probed({i: 12_000.0}).swept[i] == 7_000.0  # type: ignore[index]


def test_a_probes_note_gives_the_sweeps_capacity_the_probes_and_their_spread() -> None:
    p = CapacityProbe("1 MiB reads", 8_268.0, 11_976.0, [9_100.0, 8_600.0, 9_500.0])
    assert p.iops == 9_100.0 and p.spread == pytest.approx(900 / 9_100)
    assert p.note == ("replay path's capacity for 1 MiB reads: sweep --for-trace measured 8,268 IO/s, probed "
                      "now 9,100 (+10%; median of 9,100, 8,600, 9,500, spread 10%); the prediction uses the "
                      "probe")
    assert p.to_dict()["used"] == "probe" and p.to_dict()["swept_iops"] == 8_268.0


@pytest.mark.slow
def test_the_prober_replays_only_the_mixes_a_trace_comes_near(tmp_path: Path, fio_available: str) -> None:
    # a 4 KiB mix whose closed loop served 200 IO/s and whose replay path, in the sweep, 150: a
    # file target serves its 3x (600 IO/s) in full, so the probe lifts the cap over the closed loop's,
    # to what the probe served (issue 22: no longer clipped at the closed-loop capacity)
    d = DataDir(tmp_path / "home")
    d.catalog.ensure_device("dev")
    rows = _rows(4096, 200.0)
    d.catalog.add_measurements("dev", rows)
    fio = [r for r in rows if "offered_iops" in r]
    d.catalog.add_measurements("dev", [*fio, _replayed(4096, 600.0, 150.0)])
    target = str(tmp_path / "target.img")
    model = FakeMMcDevice(100.0, 2)  # its curve peaks at the ladder's 200 IO/s
    far = CapacityProber(target, True, d.catalog, repeats=2)
    src = device_source(d, "dev", model, adjust=lambda c, ol: far(c, ol, window_table([20.0, 30.0])))
    assert far.found == [] and src.replay is not None and src.replay.served.tolist() == [150.0]
    near = CapacityProber(target, True, d.catalog, repeats=2)
    src = device_source(d, "dev", model, adjust=lambda c, ol: near(c, ol, window_table([20.0, 120.0])))
    assert len(near.found) == 1 and len(near.found[0].probes) == 2
    assert all(p > 300 for p in near.found[0].probes)
    assert src.replay is not None
    assert src.replay.shares[0] == pytest.approx(np.median(near.found[0].probes) / 200.0)
    assert src.replay.shares[0] > 1.5
    assert any("capacity raised to" in n and "replay path's own" in n for n in src.notes)
