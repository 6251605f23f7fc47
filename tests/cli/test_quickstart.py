"""`ssdpredict quickstart` (what `make run` runs): real sweep, train, stored accuracy; reuse on rerun."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app

# 12 points: enough distinct workloads to train (8) with a 2-fold cross-validation
PLAN = """
name = "tiny"
seed = 7
[values]
write_ratios = [0.0, 0.5, 1.0]
queue_depths = [1, 8]
sizes = ["4k", "64k"]
randomness = [1.0]
"""


def _accuracy_table(output: str) -> dict[str, str]:
    """metric -> the mean relative error printed in quickstart's accuracy table (percent)."""
    return dict(re.findall(r"(latency_mean_us|latency_p99_us|bandwidth_mib_s|iops)\W+([\d.]+)%", output))


@pytest.mark.fio
@pytest.mark.slow
def test_quickstart_sweeps_trains_reports_and_reuses(
    tmp_path: Path, home: Path, fio_available: str
) -> None:
    plan = tmp_path / "tiny.toml"
    plan.write_text(PLAN)
    args = ["quickstart", "--no-serve", "--plan", str(plan), "--runtime", "300ms",
            "--size", "16MiB", "--folds", "2", "--time-budget", "1"]
    runner = CliRunner()
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "12 points stored" in first.output
    assert "trained and activated model" in first.output
    catalog = DataDir(home).catalog
    (device,) = catalog.list_devices()
    assert (home / "scratch" / f"{device.name}.img").exists()
    version = catalog.active_model_version(device.name)
    assert version is not None
    # the table is the evaluation stored with the version, so `models list` (and the API,
    # which reads the same catalog entry) show the very numbers quickstart printed
    printed = _accuracy_table(first.output)
    assert set(printed) == {"latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"}, first.output
    assert "out-of-fold" in first.output and "nested cross-validation" in first.output
    listed = json.loads(runner.invoke(app, ["models", "list", "--device", device.name, "--json"]).stdout)
    (row,) = listed["versions"]
    assert {m: f"{100 * v:.1f}" for m, v in row["cv_mre"].items()} == printed

    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "reusing the finished sweep: 12 of 12 points stored" in second.output
    assert "reusing it" in second.output
    assert _accuracy_table(second.output) == printed
    assert len(catalog.list_sweeps(device.name)) == 1
    assert catalog.active_model_version(device.name) == version  # nothing trained again
