"""``ssdpredict sweep --for-capacity``: real fio on a small file, both phases stored, a rerun measures
none, and ``capacity`` then answers from the points (and suggested the command before)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app

MIX = "write_ratio=0,request_size=16k,randomness=1"


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["sweep", "--device", "t", "--target", str(tmp_path / "t.img"), "--size", "16MiB",
            "--runtime", "500ms", "--open-loop-requests", "50", *extra]


@pytest.mark.slow
@pytest.mark.fio
def test_for_capacity_measures_closed_and_open_loop_and_capacity_uses_them(
    home: Path, tmp_path: Path, fio_available: str
) -> None:
    res = CliRunner().invoke(app, _args(tmp_path, "--numjobs", "1,4,16", "--for-capacity", "--workload", MIX))
    assert res.exit_code == 0, res.output
    # the plan's size and time first, then the capacities and the open-loop phase's time, then progress
    assert "plan for-capacity: 9 closed-loop points + up to 9 open-loop points" in res.output
    assert "closed-loop capacities: 0% writes 16k" in res.output and "open-loop points 9/9" in res.output
    catalog = DataDir(home).catalog
    frame = catalog.measurements("t")
    ol = np.isfinite(frame["offered_iops"]).to_numpy()
    assert (frame["engine"] == "psync").all() and (frame["queue_depth"] == 1).all()
    # 16k, then 32k and 8k (one mix)
    assert sorted(frame.loc[~ol, "numjobs"]) == [1, 1, 1, 4, 4, 4, 16, 16, 16]
    # the fractions' rates from the 16 KiB mix's capacity, exactly as asked (lanes differ by 1 IO/s)
    capacity = frame.loc[~ol & (frame["request_size"] == 16384), "iops"].max()
    asked = np.sort(frame.loc[ol, "requested_iops"].to_numpy())
    fractions = (0.1, 0.3, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.2)
    assert asked == pytest.approx([round(f * capacity) for f in fractions])
    n_sweeps = len(catalog.list_sweeps("t"))
    again = CliRunner().invoke(app, _args(tmp_path, "--numjobs", "1,4,16", "--for-capacity", "-w", MIX))
    assert again.exit_code == 0, again.output
    assert len(catalog.list_sweeps("t")) == n_sweeps and len(catalog.measurements("t")) == len(frame)
    train = CliRunner().invoke(app, ["train", "--device", "t", "--candidates", "cart", "--folds", "2"])
    assert train.exit_code == 0, train.output
    answer = CliRunner().invoke(app, ["capacity", "--device", "t", "--workload", MIX, "--slo", "p99<=10ms"])
    assert answer.exit_code == 0, answer.output
    # measured by --for-capacity: no suggestion to sweep again
    assert "no open-loop points" not in answer.output and "--for-capacity --workload" not in answer.output


@pytest.mark.parametrize("extra, message", [
    (["--for-capacity", "--plan", "quick"], "leave out --plan"),
    (["--for-capacity", "--open-loop", "0.5"], "leave out --open-loop"),
    (["--for-capacity", "--engine", "io_uring"], "open-loop points' engine (psync)"),
    (["--for-capacity", "--workload", MIX, "--sizes", "4k"], "not both"),
    (["--for-capacity", "--workload", "queue_depth=4"], "set by the offered load"),
    (["--workload", MIX], "add --for-capacity"),
])
def test_for_capacity_bad_use_is_one_line_exit_2(home: Path, tmp_path: Path, extra: list[str],
                                                 message: str) -> None:
    res = CliRunner().invoke(app, _args(tmp_path, *extra))
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split()) and "Traceback" not in res.output
    assert not (tmp_path / "t.img").exists()
