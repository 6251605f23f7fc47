"""Every setting is checked once, before any lock, data directory or target file.

Before, ``--runtime 0`` passed the sweep's settings and was refused by the fio job's, after
the device lock was taken and the target file created (and, for NVMe-oF, attached); a bad
``--open-loop`` list was read after the whole sweep had run.  Now each bad value gives one
line and exit status 2 and leaves no trace.  The runs are real: no fio job starts because
none may.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli.main import app

SWEEP = ["sweep", "--device", "d", "--plan", "grid", "--write-ratios", "0", "--queue-depths", "1",
         "--sizes", "4k", "--randomness", "1", "--size", "1MiB"]

BAD = [
    (["--runtime", "0"], "runtime must be positive"),
    (["--runtime", "fast"], "not a duration"),
    (["--runtime", "1.0005s"], "whole number of milliseconds"),
    (["--ramp", "-1s"], "not a duration"),
    (["--precondition", "--precondition-passes", "0"], "precondition passes must be between 1 and 100"),
    (["--precondition", "--precondition-passes", "101"], "precondition passes must be between 1 and 100"),
    (["--size", "4x"], "not a size"),
    (["--size", "1k"], "at least 4 KiB"),
    (["--sizes", "4k,4x"], "invalid --sizes"),
    (["--open-loop", "0.1,lots"], "invalid --open-loop"),
    (["--repeats", "0"], "--repeats must be between 1 and 100"),
]


def _traces(home: Path) -> list[Path]:
    """What a run left in the data directory (locks, catalog, scratch files)."""
    return sorted(home.rglob("*")) if home.exists() else []


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_sweep_setting_is_one_line_and_exit_2_before_any_side_effect(
    args: list[str], message: str, home: Path, tmp_path: Path
) -> None:
    target = tmp_path / "t.img"
    result = CliRunner().invoke(app, [*SWEEP, "--target", str(target), *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert not target.exists()
    assert _traces(home) == []  # no lock, no catalog, not even the data directory


@pytest.mark.fio
def test_the_same_sweep_with_good_settings_measures(home: Path, tmp_path: Path, fio_available: str) -> None:
    # the control: the same options with good values go on to the lock, the target and fio
    target = tmp_path / "t.img"
    result = CliRunner().invoke(app, [*SWEEP, "--target", str(target), "--runtime", "500ms", "--json"])
    assert result.exit_code == 0, result.output
    assert target.exists() and (home / "locks").is_dir()
    assert json.loads(result.stdout)["points"] == 1


def test_a_bad_ingest_limit_is_refused_before_the_lock(home: Path, tmp_path: Path) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text("write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,1000\n")
    result = CliRunner().invoke(app, ["ingest", "--device", "d", "--max-bytes", "lots", str(csv)])
    assert result.exit_code == 2 and "invalid --max-bytes" in result.output
    assert _traces(home) == []


@pytest.mark.parametrize(("window", "message"), [("0s", "must be positive"), ("soon", "not a duration")])
def test_a_trace_window_uses_the_one_duration_grammar(window: str, message: str, home: Path,
                                                      tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,offset,size,op\n0,0,4096,R\n")
    result = CliRunner().invoke(app, ["trace", "characterize", str(trace), "--window", window])
    assert result.exit_code == 2 and message in result.output, result.output
