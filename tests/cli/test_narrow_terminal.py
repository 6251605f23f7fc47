"""At 80 columns the CLI's tables wrap; identifiers (model versions, devices) are never cut."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TEST_DATA


def _cli_at_80_columns(home: Path, *args: str, columns: int = 80) -> str:
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "COLUMNS": str(columns), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "service.cli.main", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_model_versions_and_devices_are_printed_whole_at_80_columns(home: Path, trained: str) -> None:
    listing = _cli_at_80_columns(home, "models", "list", "--device", "synth")
    devices = _cli_at_80_columns(home, "devices")
    for text in (listing, devices):
        assert max(len(line) for line in text.splitlines()) <= 80
        assert trained in text, text  # the whole version, on one line: it can be copied
        assert "…" not in text  # nothing ends in an ellipsis
    assert "synth" in devices


def test_devices_never_folds_a_metadata_item(home: Path) -> None:
    """At 80 columns the metadata column was 15 characters wide and broke every item inside
    itself; each item now stays whole, in its own column where there is room, else below.
    One ingest, the table at both widths."""
    items = ["controller=P420i", "model=SAMSUNG_MZ7LH960HAJR", "raid_disks=3"]
    meta = [arg for item in items for arg in ("--meta", item)]
    _cli_at_80_columns(home, "ingest", "-d", "samsung-pm883-array", "--class", "raid", *meta,
                       str(TEST_DATA / "fio" / "INTEL_D3_S4610"))
    for columns in (80, 160):
        table = _cli_at_80_columns(home, "devices", columns=columns)
        assert max(len(line) for line in table.splitlines()) <= columns
        for item in items:
            assert item in table, (columns, item, table)
        assert ("metadata" in table.splitlines()[1]) == (columns == 160), (columns, table)
