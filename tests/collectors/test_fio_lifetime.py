"""A killed sweep takes its fio with it: real fio, real ``kill -9`` of a real ``ssdpredict sweep``."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from collectors.fio.runner import run_guarded

ROOT = Path(__file__).resolve().parents[2]


def _fio_descendants(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "fio"]
    except psutil.NoSuchProcess:
        return []


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
@pytest.mark.fio
def test_kill_9_of_sweep_kills_fio_and_its_job_processes(home: Path, tmp_path: Path,
                                                         fio_available: str) -> None:
    before = set(glob.glob("/tmp/ssdpredict-fio-*"))
    cmd = [sys.executable, "-m", "service.cli.main", "sweep", "--device", "d",
           "--target", str(tmp_path / "t.img"), "--size", "16MiB", "--runtime", "60s",
           "--plan", "grid", "--write-ratios", "1", "--queue-depths", "1", "--sizes", "4k",
           "--randomness", "1", "--numjobs", "2"]
    proc = subprocess.Popen(cmd, env={**os.environ, "SSDPREDICT_HOME": str(home)}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        fios: list[psutil.Process] = []
        # fio's main process plus one process per job (numjobs=2)
        while time.monotonic() < deadline and len(fios) < 3:
            assert proc.poll() is None, "the sweep ended before fio ran"
            fios = _fio_descendants(proc.pid)
            time.sleep(0.1)
        assert len(fios) >= 3, f"fio jobs did not start: {fios}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        survivors = _wait_gone(fios, timeout=10)
        assert survivors == [], f"fio outlived the killed sweep: {survivors}"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert set(glob.glob("/tmp/ssdpredict-fio-*")) == before


@pytest.mark.fio
def test_guarded_run_reports_exit_status_and_output(fio_available: str) -> None:
    code, out, _ = run_guarded([fio_available, "--version"], timeout=30)
    assert code == 0 and out.startswith("fio-")
    code, _, _ = run_guarded(["sh", "-c", "exit 3"], timeout=30)
    assert code == 3


def test_timeout_kills_the_whole_tree() -> None:
    from modeling.errors import FioError

    marker = f"ssdpredict-guard-test-{os.getpid()}"
    with pytest.raises(FioError, match="did not finish"):
        # a grandchild in its own session, like fio's job processes
        run_guarded(["sh", "-c", f"setsid sh -c 'sleep 300; echo {marker}' & exec sleep 300"], timeout=1)
    time.sleep(0.5)
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert left == []
