"""At 80 columns the CLI's tables wrap; identifiers (model versions, devices) are never cut."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _cli_at_80_columns(home: Path, *args: str) -> str:
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "COLUMNS": "80", "PYTHONPATH": str(REPO)}
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
