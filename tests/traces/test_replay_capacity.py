"""The replay path's own capacity on a reference device (real fio on zram)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modeling.errors import InvalidInput
from modeling.store import DataDir
from modeling.workload import MIB
from tests.device_fixtures import reference_or_skip
from traces.replay.capacity import OVERLOAD, capacity_ceiling, measure_replay_capacity


def test_ceiling_is_the_served_fraction_at_most_one() -> None:
    assert capacity_ceiling(7_000, 10_000) == pytest.approx(0.7)
    assert capacity_ceiling(12_000, 10_000) == 1.0
    with pytest.raises(InvalidInput):
        capacity_ceiling(0, 10_000)


@pytest.mark.slow
def test_an_overloaded_replay_serves_what_the_path_delivers(tmp_path: Path, fio_available: str) -> None:
    with reference_or_skip(DataDir(tmp_path / "home"), "zram", 64 * MIB) as ref:
        # 1 MiB reads on zram take tens of microseconds of CPU each: no replay on two cores
        # serves 150,000 IO/s, so the lanes run back to back and their rate is the path's
        cap = measure_replay_capacity(ref.path, 50_000, size=1 * MIB, duration_s=0.1, destroy_data=True)
    assert cap.offered_iops == OVERLOAD * 50_000 and cap.requests == pytest.approx(15_000, rel=0.05)
    assert 500 < cap.iops < 50_000
    assert cap.ceiling(50_000) == pytest.approx(cap.iops / 50_000)
    assert cap.ceiling(100.0) == 1.0
