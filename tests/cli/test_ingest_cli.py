"""`ssdpredict ingest` and `ssdpredict devices` through the real Typer app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.conftest import FIO_PLOT, TEST_DATA

runner = CliRunner()
FIO_SUBSET = TEST_DATA / "fio"


def test_cli_ingest_prints_points_per_file_and_stores_them(datadir: DataDir) -> None:
    result = runner.invoke(app, ["ingest", "--device", "p420", str(FIO_SUBSET / "P420i_SAMSUNG860_RW")])
    assert result.exit_code == 0, result.output
    assert "P420i_SAMSUNG860_RW/randrw-1-1.json: 1 points (fio)" in result.output
    assert "stored 5 points from 5 files as sweep 1 of p420" in result.output
    assert len(datadir.catalog.measurements("p420")) == 5


def test_cli_ingest_summarises_large_imports_per_folder(datadir: DataDir) -> None:
    folder = FIO_PLOT / "SERVER" / "IBM_M1015" / "SAMSUNG_PM883"
    result = runner.invoke(app, ["ingest", "-d", "pm883", str(folder)])
    assert result.exit_code == 0, result.output
    assert "SAMSUNG_PM883/: 98 points from 98 files" in result.output
    again = runner.invoke(app, ["ingest", "-d", "pm883", str(folder)])
    assert again.exit_code == 0 and "already ingested" in again.output
    assert len(datadir.catalog.measurements("pm883")) == 98


def test_cli_ingest_bad_csv_is_one_line_error_and_stores_nothing(datadir: DataDir, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,10\n0,1,4096,1,oops\n")
    result = runner.invoke(app, ["ingest", "--device", "d", str(bad)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["error: bad.csv, line 3: iops: not a number: 'oops'; nothing was stored"]
    assert datadir.catalog.list_devices() == []


def test_cli_ingest_class_and_metadata_show_in_devices(datadir: DataDir) -> None:
    result = runner.invoke(
        app,
        ["ingest", "-d", "arr", "--class", "raid", "--meta", "raid_level=raid0", "--meta", "raid_disks=3",
         str(FIO_SUBSET / "INTEL_D3_S4610")],
    )
    assert result.exit_code == 0, result.output
    listing = runner.invoke(app, ["devices", "--json"])
    assert listing.exit_code == 0, listing.output
    (dev,) = json.loads(listing.output)["devices"]
    assert dev["class"] == "raid" and dev["metadata"] == {"raid_level": "raid0", "raid_disks": 3}
    assert dev["sweeps"] == 1 and dev["points"] == 5
    table = runner.invoke(app, ["devices"])
    assert table.exit_code == 0 and "arr" in table.output and "raid_level=raid0" in table.output


def test_cli_devices_show_lists_sweeps(datadir: DataDir) -> None:
    runner.invoke(app, ["ingest", "-d", "intel", str(FIO_SUBSET / "INTEL_D3_S4610")])
    runner.invoke(app, ["ingest", "-d", "intel", str(FIO_SUBSET / "P420i_SAMSUNG860_RW")])
    result = runner.invoke(app, ["devices", "show", "intel", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert [s["points"] for s in info["sweep_list"]] == [5, 5] and info["points"] == 10
    missing = runner.invoke(app, ["devices", "show", "nope"])
    assert missing.exit_code == 2 and "unknown device 'nope'" in missing.output


def test_cli_ingest_rejects_bad_meta(datadir: DataDir) -> None:
    result = runner.invoke(app, ["ingest", "-d", "x", "--meta", "novalue", str(FIO_SUBSET)])
    assert result.exit_code == 2 and "use KEY=VALUE" in result.output

