"""One engine story: a prediction whose closed-loop curve is not psync (the replay's engine) says so,
with the device's own numbers for one mix measured both ways, and what to run."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.traces.fake_devices import FakeMMcDevice
from traces.predict.engines import engine_notes
from traces.predict.windows import device_source


def _rows(engine: str) -> list[dict[str, object]]:
    return [dict(write_ratio=0.0, queue_depth=qd, numjobs=1, request_size=4096, randomness=1.0,
                 latency_mean_us=10.0 * qd, latency_p99_us=30.0 * qd, iops=1e5 * qd, engine=engine)
            for qd in (1, 4)]


def test_a_psync_curve_needs_no_note_and_a_mixed_one_names_both_engines() -> None:
    assert engine_notes(pd.DataFrame(_rows("psync")), "d") == []
    both = pd.DataFrame(_rows("psync") + _rows("libaio"))
    (note,) = engine_notes(both, "d")
    assert "2 psync, 2 libaio" in note or "2 libaio, 2 psync" in note
    assert "4 KiB QD1 reads 10 us libaio vs 10 us psync (closed loop QD1)" in note
    assert "sweep --device d --target TARGET --for-trace TRACE" in note


@pytest.mark.fio
def test_io_uring_sweep_then_psync_open_loop_warns_with_measured_numbers(
    home: Path, tmp_path: Path, fio_available: str
) -> None:
    args = ["sweep", "--device", "u", "--target", str(tmp_path / "t.img"), "--size", "16MiB",
            "--engine", "io_uring", "--plan", "grid", "--write-ratios", "0", "--queue-depths", "1",
            "--sizes", "4k", "--randomness", "1", "--runtime", "500ms", "--open-loop", "0.001",
            "--open-loop-requests", "50"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    d = DataDir(home)
    frame = d.catalog.measurements("u")
    assert set(frame["engine"]) == {"io_uring", "psync"}
    source = device_source(d, "u", FakeMMcDevice(1e5))
    (note,) = [n for n in source.notes if "replay's engine" in n]
    found = re.search(r"4 KiB QD1 reads ([\d.]+) us io_uring vs ([\d.]+) us psync "
                      r"\(open loop at (\d+) IO/s\)",
                      note)
    assert found, note
    closed = frame[frame["engine"] == "io_uring"]["latency_mean_us"].iloc[0]
    assert float(found.group(1)) == pytest.approx(closed, rel=0.01)
    lightest = frame[frame["engine"] == "psync"].sort_values("offered_iops").iloc[0]
    assert float(found.group(2)) == pytest.approx(lightest["latency_mean_us"], rel=0.01)
    assert int(found.group(3)) == round(lightest["offered_iops"])
