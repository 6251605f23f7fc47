"""One writer per device, across real processes: sweep, ingest, train, and the API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modeling.errors import DeviceBusy
from modeling.store import DataDir
from tests.conftest import REPO

HOLD = """
import sys, time
from modeling.store import DataDir
with DataDir(sys.argv[1]).device_lock(sys.argv[2], "sweep", detail="test holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _holder(home: Path, device: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(home), device, str(seconds)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _cli(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "service.cli.main", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "SSDPREDICT_HOME": str(home), "PYTHONPATH": str(REPO)})


def test_a_second_writer_is_refused_with_who_holds_it_and_kill_9_frees_it(datadir: DataDir) -> None:
    proc = _holder(datadir.root, "d", 60)
    try:
        with pytest.raises(DeviceBusy, match=rf"device 'd' is busy: sweep by PID {proc.pid} since"):
            with datadir.device_lock("d", "ingest"):
                pass
        assert datadir.lock_holder("d")["pid"] == proc.pid  # type: ignore[index]
        with datadir.device_lock("other", "ingest"):  # other devices are not held
            pass
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert datadir.lock_holder("d") is None
    with datadir.device_lock("d", "ingest"):
        pass


def test_wait_blocks_until_the_holder_is_done(datadir: DataDir) -> None:
    proc = _holder(datadir.root, "d", 1.5)
    said: list[str] = []
    started = time.monotonic()
    with datadir.device_lock("d", "train", wait=True, on_wait=said.append):
        waited = time.monotonic() - started
    proc.wait()
    assert waited > 0.5 and said and "busy" in said[0] and "waiting" in said[0]


@pytest.mark.slow
@pytest.mark.fio
def test_two_identical_sweeps_at_once(home: Path, tmp_path: Path, fio_available: str) -> None:
    """A sweep started while another sweep of the device runs is refused, naming the holder.

    The first "sweep" is a process holding the device's writer lock as a sweep does, so that
    the second really starts while the first runs, however slowly this machine starts Python.
    """
    target = tmp_path / "t.img"
    args = ["sweep", "--device", "d", "--target", str(target), "--size", "16MiB", "--runtime", "1s",
            "--plan", "grid", "--write-ratios", "1", "--queue-depths", "1", "--sizes", "4k",
            "--randomness", "1"]
    holder = _holder(home, "d", 120)
    try:
        second = _cli(home, *args)
        _, err = second.communicate(timeout=120)
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert second.returncode == 2 and f"device 'd' is busy: sweep by PID {holder.pid}" in err, err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1
    assert "Traceback" not in err
    assert not target.exists() and not DataDir(home).catalog.has_device("d")  # nothing touched
    first = _cli(home, *args)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    (sweep,) = DataDir(home).catalog.list_sweeps("d")
    assert sweep.n_points == 1 and target.stat().st_size == 16 << 20


@pytest.mark.slow
def test_parallel_ingests_of_one_folder_store_it_once(home: Path, tmp_path: Path) -> None:
    folder = REPO / "tests/data/fio-plot/HPDL380G8/HBA/INTEL_D3_S4610"
    procs = [_cli(home, "ingest", "--device", "d", "--wait", str(folder)) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    sweeps = DataDir(home).catalog.list_sweeps("d")
    assert len(sweeps) == 1
    # without --wait a concurrent one is refused instead (or finds the data already stored)
    procs = [_cli(home, "ingest", "--device", "d", str(folder)) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0 or "is busy: ingest by PID" in err, err
    assert len(DataDir(home).catalog.list_sweeps("d")) == 1
