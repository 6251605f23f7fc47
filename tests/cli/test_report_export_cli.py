"""`ssdpredict report` and `ssdpredict export` through the real Typer app, on real fio-plot data."""

from __future__ import annotations

import pytest

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from collectors.ingest import KNOWN_COLUMNS
from modeling.store import DataDir
from service.cli.main import app
from tests.conftest import FIO_PLOT, data_path
from tests.service.utils import quick_train

runner = CliRunner()
P420 = FIO_PLOT / "HPDL380G8" / "RAID" / "NEW" / "P420i_SAMSUNG860_RW"


def _ingest(name: str, folder: Path) -> None:
    result = runner.invoke(app, ["ingest", "--device", name, str(data_path(folder))])
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_cli_report_writes_one_html_file(datadir: DataDir, tmp_path: Path) -> None:
    _ingest("p420", P420)
    quick_train(datadir, "p420")
    out = tmp_path / "out" / "report.html"
    result = runner.invoke(app, ["report", "--device", "p420", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {out} (")
    html = out.read_text()
    # five plots and the capacity section's
    assert "ssdpredict report: p420" in html and html.count('src="data:image/png;base64,') == 6


@pytest.mark.slow
def test_cli_report_errors_are_one_line(datadir: DataDir, tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "--device", "nope", "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: unknown device 'nope'; see `ssdpredict devices` for the known ones"
    ]
    _ingest("p420", P420)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    result = runner.invoke(app, ["report", "-d", "p420", "-o", str(folder)])
    assert result.exit_code == 2 and result.output.startswith(f"error: cannot write {folder}")
    assert not (tmp_path / "r.html").exists()


def test_cli_export_then_ingest_round_trips(datadir: DataDir, tmp_path: Path) -> None:
    _ingest("p420", P420)
    result = runner.invoke(app, ["export", "--device", "p420"])
    assert result.exit_code == 0, result.output
    csv = tmp_path / "p420.csv"
    csv.write_text(result.output)  # CSV on stdout
    _ingest("copy", csv)
    original, copy = datadir.catalog.measurements("p420"), datadir.catalog.measurements("copy")
    columns = [c for c in original.columns if c in KNOWN_COLUMNS and original[c].notna().any()]
    pd.testing.assert_frame_equal(original[columns], copy[columns], check_exact=True)

    parquet = tmp_path / "p420.parquet"
    result = runner.invoke(app, ["export", "-d", "p420", "--format", "parquet", "-o", str(parquet)])
    assert result.exit_code == 0 and result.output.startswith(f"wrote {parquet} (parquet")
    assert sorted(pd.read_parquet(parquet).columns) == sorted(columns)


def test_cli_export_refuses_parquet_on_stdout_and_unknown_formats(datadir: DataDir) -> None:
    _ingest("p420", P420)
    result = runner.invoke(app, ["export", "-d", "p420", "--format", "parquet"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: parquet is binary: name a file with -o/--output"
    result = runner.invoke(app, ["export", "-d", "p420", "--format", "xlsx"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: unknown export format 'xlsx': use csv or parquet"
