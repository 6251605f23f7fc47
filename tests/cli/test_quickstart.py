"""`ssdpredict quickstart` (what `make run` runs): real sweep, train, accuracy; reuse on rerun."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app

PLAN = """
name = "tiny"
seed = 7
[values]
write_ratios = [0.0, 1.0]
queue_depths = [1, 8]
sizes = ["4k", "64k"]
randomness = [0.0, 1.0]
"""


@pytest.mark.fio
@pytest.mark.slow
def test_quickstart_sweeps_trains_reports_and_reuses(
    tmp_path: Path, home: Path, fio_available: str
) -> None:
    plan = tmp_path / "tiny.toml"
    plan.write_text(PLAN)
    args = ["quickstart", "--no-serve", "--plan", str(plan), "--runtime", "500ms",
            "--size", "16MiB", "--folds", "2", "--time-budget", "2"]
    runner = CliRunner()
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "16 points stored" in first.output
    assert "trained and activated model" in first.output
    for metric in ("latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"):
        assert metric in first.output
    catalog = DataDir(home).catalog
    (device,) = catalog.list_devices()
    assert (home / "scratch" / f"{device.name}.img").exists()
    version = catalog.active_model_version(device.name)
    assert version is not None

    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "reusing" in second.output
    assert len(catalog.list_sweeps(device.name)) == 1
    assert catalog.active_model_version(device.name) == version
