"""Remote, CSD internal and CSD concurrent sweeps against a real ``fio --server`` on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.sweep.run import run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.errors import UnsafeTarget
from modeling.store import DataDir
from tests.device_fixtures import tiny_plan

pytestmark = pytest.mark.fio


def test_remote_sweep_through_fio_server(fio_server: str, datadir: DataDir, tmp_path: Path) -> None:
    target = tmp_path / "remote.img"
    settings = SweepSettings(target=str(target), runtime="200ms", size="16MiB", remote=fio_server)
    sweep = run_sweep(datadir, "far", tiny_plan(2), settings)
    assert sweep.status == "complete" and sweep.n_points == 2
    assert target.exists()  # the server laid the file out, not us
    frame = datadir.catalog.measurements("far")
    assert (frame["iops"] > 0).all() and (frame["remote"] == fio_server).all()
    raw = json.loads(datadir.catalog.raw_result(sweep.id, 0) or "{}")
    assert "client_stats" in raw
    assert datadir.catalog.get_device("far").metadata["remote"] == fio_server


def test_remote_block_device_needs_destroy_data(fio_server: str, datadir: DataDir) -> None:
    settings = SweepSettings(target="/dev/nvme9n9", remote=fio_server)
    with pytest.raises(UnsafeTarget, match="--destroy-data"):
        run_sweep(datadir, "farblock", tiny_plan(1), settings)


def test_csd_internal_path(fio_server: str, datadir: DataDir, tmp_path: Path) -> None:
    settings = SweepSettings(target="/dev/csd-host-side", internal_target=str(tmp_path / "in-drive.img"),
                             runtime="200ms", size="16MiB", remote=fio_server, csd_path="internal",
                             device_class="csd")
    sweep = run_sweep(datadir, "csd0", tiny_plan(1), settings)
    assert sweep.n_points == 1 and (tmp_path / "in-drive.img").exists()
    row = datadir.catalog.measurements("csd0").iloc[0]
    assert row["csd_path"] == "internal" and row["iops"] > 0
    assert datadir.catalog.get_device("csd0").device_class == "csd"


def test_csd_concurrent_path_stores_both_sides_and_sum(fio_server: str, datadir: DataDir,
                                                       tmp_path: Path) -> None:
    settings = SweepSettings(target=str(tmp_path / "host.img"), internal_target=str(tmp_path / "isp.img"),
                             runtime="1s", size="16MiB", remote=fio_server, csd_path="concurrent",
                             device_class="csd")
    sweep = run_sweep(datadir, "csd1", tiny_plan(1), settings)
    row = datadir.catalog.measurements("csd1").iloc[0]
    assert row["csd_path"] == "concurrent"
    assert row["external_iops"] > 0 and row["internal_iops"] > 0
    assert row["iops"] == pytest.approx(row["external_iops"] + row["internal_iops"])
    raw = json.loads(datadir.catalog.raw_result(sweep.id, 0) or "{}")
    assert set(raw) == {"external", "internal"} and "client_stats" in raw["internal"]
