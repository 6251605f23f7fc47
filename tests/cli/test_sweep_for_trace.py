"""``ssdpredict sweep --for-trace``: real fio on a small file, both phases stored, a rerun measures none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from service.config import get_settings
from tests.conftest import TEST_DATA, data_path

TRACE = str(TEST_DATA / "traces" / "tpcc-small.trace")


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["sweep", "--device", "t", "--target", str(tmp_path / "t.img"), "--size", "16MiB",
            "--runtime", "500ms", "--open-loop-requests", "50", *extra]


@pytest.mark.slow
@pytest.mark.fio
def test_for_trace_measures_closed_and_open_loop_with_psync(home: Path, tmp_path: Path,
                                                            fio_available: str) -> None:
    data_path(Path(TRACE))
    res = CliRunner().invoke(app, _args(tmp_path, "--budget", "5", "--for-trace", TRACE))
    assert res.exit_code == 0, res.output
    assert "plan for-trace: 5 closed-loop points (1 mixes x 5 loads, psync)" in res.output
    # 5 fio points and the replay path's capacity (the trace's 51,280 IO/s is near the file's)
    assert "open-loop points 6/6" in res.output  # plain progress: CliRunner's stderr is no terminal
    catalog = DataDir(home).catalog
    frame = catalog.measurements("t")
    replayed = (frame["open_loop_method"] == "replay").to_numpy()
    capacity_row = frame[replayed]
    frame = frame[~replayed]
    ol = np.isfinite(frame["offered_iops"])
    assert (frame["engine"] == "psync").all()
    assert sorted(frame.loc[~ol, "numjobs"]) == [1, 2, 4, 8, 16]
    assert ol.sum() == 5 and (frame.loc[ol, "numjobs"] == 16).all()
    # each fio point's figures are its steady part, after the warm-up
    warmup_s = get_settings().open_loop_warmup_ms / 1000  # the suite's (tests/conftest.py)
    assert (frame.loc[ol, "warmup_s"] == warmup_s).all() and (frame.loc[ol, "steady_requests"] > 0).all()
    assert len(capacity_row) == 1 and int(capacity_row["numjobs"].iloc[0]) == 16
    offered_cap = float(capacity_row["offered_iops"].iloc[0])
    assert offered_cap == pytest.approx(3 * frame.loc[~ol, "iops"].max(), rel=0.05)
    assert 0 < capacity_row["iops"].iloc[0] < offered_cap
    # the fractions' rates come from the capacity measured at 16 jobs
    capacity = frame.loc[~ol, "iops"].max()
    offered = frame.loc[ol, "requested_iops"].to_numpy()  # asked (fio may offer a few % more)
    for fraction in (0.2, 0.5, 0.8, 0.95):
        assert np.min(np.abs(offered / (fraction * capacity) - 1)) < 0.05
    assert np.min(np.abs(offered / 51_280 - 1)) < 0.01  # the trace's own rate (its one window)
    n_sweeps = len(catalog.list_sweeps("t"))
    again = CliRunner().invoke(app, _args(tmp_path, "--budget", "5", "--for-trace", TRACE))
    assert again.exit_code == 0, again.output
    assert "reusing the finished sweep" in again.output
    assert len(catalog.list_sweeps("t")) == n_sweeps and len(catalog.measurements("t")) == len(frame) + 1


@pytest.mark.parametrize("extra, message", [
    (["--for-trace"], "needs trace files"),
    (["--plan", "quick", "--for-trace", TRACE], "leave out --plan"),
    (["--engine", "io_uring", "--for-trace", TRACE], "replay's engine (psync)"),
    ([TRACE], "go after --for-trace"),
    (["--budget", "2", "--for-trace", TRACE], "under one mix's ladder"),
])
def test_for_trace_bad_use_is_one_line_exit_2(tmp_path: Path, extra: list[str], message: str) -> None:
    res = CliRunner().invoke(app, _args(tmp_path, *extra))
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "t.img").exists()
