"""``ssdpredict sweep`` as a user runs it: SIGKILL mid-way and resume, error paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.device_fixtures import mkfs_ext4, sha256_of

SWEEP = ["sweep", "--device", "d", "--runtime", "500ms", "--size", "16MiB", "--plan", "grid",
         "--write-ratios", "0,1", "--queue-depths", "1,4", "--sizes", "4k", "--randomness", "1"]


def _cli(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "service.cli.main", *args]


@pytest.mark.slow
@pytest.mark.fio
def test_sigkill_mid_sweep_then_resume_to_exactly_the_plan(home: Path, tmp_path: Path,
                                                           fio_available: str) -> None:
    target = str(tmp_path / "t.img")
    cmd = _cli(home, *SWEEP, "--target", target)
    env = {**os.environ, "SSDPREDICT_HOME": str(home)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[2])
    catalog = DataDir(home).catalog
    deadline = time.monotonic() + 90
    stored = 0
    while time.monotonic() < deadline and proc.poll() is None:
        sweeps = catalog.list_sweeps("d") if any(d.name == "d" for d in catalog.list_devices()) else []
        stored = sweeps[0].n_points if sweeps else 0
        if stored >= 1:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read()!r}"  # type: ignore[union-attr]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    (killed,) = catalog.list_sweeps("d")
    assert killed.status == "running" and 1 <= killed.n_points < 4

    done = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert f"resuming: {killed.n_points} of 4 points already stored" in done.stderr
    (sweep,) = catalog.list_sweeps("d")
    assert sweep.id == killed.id and sweep.status == "complete" and sweep.n_points == 4
    frame = catalog.measurements("d")
    assert len(frame) == 4 and not frame.duplicated(["seq", "repeat"]).any()
    assert sorted(frame["queue_depth"].tolist()) == [1, 1, 4, 4]


def test_missing_fio_gives_install_advice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSDPREDICT_FIO", str(tmp_path / "no-fio"))
    result = CliRunner().invoke(app, [*SWEEP, "--target", str(tmp_path / "t.img")])
    assert result.exit_code == 2
    assert "apt-get install fio" in result.output


def test_missing_fio_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSDPREDICT_FIO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(app, [*SWEEP, "--target", str(tmp_path / "t.img")])
    assert result.exit_code == 2 and "apt-get install fio" in result.output


@pytest.mark.fio
def test_cli_refuses_device_with_filesystem(make_loop, tmp_path: Path, fio_available: str) -> None:
    dev = make_loop(mkfs_ext4)
    before = sha256_of(dev)
    result = CliRunner().invoke(app, [*SWEEP, "--target", dev])
    assert result.exit_code == 2
    assert "--destroy-data" in result.output and "ext4" in result.output
    assert sha256_of(dev) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--repeats", "0"], "repeats"),
        (["--runtime", "soon"], "duration"),
        (["--sizes", "4x"], "sizes"),
        (["--plan", "everything"], "unknown plan"),
        (["--engine", "windowsaio"], "engine"),
        (["--csd-path", "sideways", "--class", "csd"], "csd-path"),
        (["--remote", "a b:1"], "remote"),
        (["--device", "../etc"], "device name"),
        (["--raid-level", "5"], "--raid-* options need --class raid"),
        (["--class", "raid", "--raid-level", "7"], "unknown RAID level"),
        (["--class", "nvmeof", "--nvmeof-nqn", "nqn.2014-08.org.example:d1"], "--nvmeof-address"),
        (["--class", "nvmeof", "--nvmeof-address", "10.0.0.2", "--nvmeof-nqn", "disk1"], "invalid NVMe-oF"),
        (["--class", "floppy"], "unknown device class"),
    ],
)
def test_bad_arguments_give_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, [*SWEEP, "--target", str(tmp_path / "t.img"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "t.img").exists()  # refused before anything was created


def test_target_or_nvmeof_is_required() -> None:
    result = CliRunner().invoke(app, SWEEP)
    assert result.exit_code == 2 and "--target is required" in result.output


@pytest.mark.fio
def test_cli_sweep_with_repeats_prints_the_noise(tmp_path: Path, fio_available: str) -> None:
    result = CliRunner().invoke(app, ["sweep", "--device", "r", "--target", str(tmp_path / "t.img"),
                                      "--size", "16MiB", "--runtime", "200ms", "--points", "1",
                                      "--repeats", "2", "--sizes", "4k"])
    assert result.exit_code == 0, result.output
    assert "2/2 points stored" in result.output and "repeat CV iops" in result.output


@pytest.mark.fio
def test_adaptive_plan_adds_points_where_the_model_is_unsure(tmp_path: Path, home: Path,
                                                             fio_available: str) -> None:
    base = ["sweep", "--device", "a", "--target", str(tmp_path / "t.img"), "--size", "16MiB",
            "--runtime", "200ms", "--json"]
    first = CliRunner().invoke(app, [*base, "--plan", "lhs", "--budget", "3"])
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(app, [*base, "--plan", "adaptive", "--budget", "2"])
    assert second.exit_code == 0, second.output
    catalog = DataDir(home).catalog
    sweeps = catalog.list_sweeps("a")
    assert [s.n_points for s in sweeps] == [3, 2]
    assert sweeps[1].plan["name"] == "adaptive"
    frame = catalog.measurements("a")
    assert len(frame) == 5 and (frame["iops"] > 0).all()
