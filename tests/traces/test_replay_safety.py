"""A replay claims its target as a sweep does, and a killed replay leaves nothing running.

Real ``ssdpredict`` commands, real fio, a real tmpfs, a real ``kill -9``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.device_fixtures import sha256_of
from tests.traces.helpers import write_generic
from traces.replay.run import WORKDIR_PREFIX

ROOT = Path(__file__).resolve().parents[2]
ONE_POINT = ["--plan", "grid", "--write-ratios", "1", "--queue-depths", "1", "--sizes", "4k",
             "--randomness", "1", "--runtime", "1s"]


def _trace(path: Path, n: int = 100, span_s: float = 0.5) -> Path:
    t = np.linspace(0, span_s, n)
    off = np.arange(n) * 4096
    return write_generic(path, t, np.zeros(n, bool), off, np.full(n, 4096))


def _replay(trace: Path, target: Path, *extra: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["trace", "replay", str(trace), "--target", str(target), *extra])
    return r.exit_code, r.output


@pytest.mark.fio
def test_a_replay_file_that_does_not_fit_is_refused_with_the_numbers(
        datadir: DataDir, small_fs: Path, tmp_path: Path, fio_available: str) -> None:
    target = small_fs / "replay.img"  # the replay's 256 MiB file on a 64 MiB filesystem
    code, output = _replay(_trace(tmp_path / "t.csv"), target)
    assert code == 2, output
    assert "256.0 MiB" in output and "free" in output and "Traceback" not in output
    assert list(small_fs.iterdir()) == []


@pytest.mark.slow
@pytest.mark.fio
def test_a_replay_uses_the_products_scratch_file_but_refuses_a_users(
        datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    trace = _trace(tmp_path / "t.csv")
    scratch = tmp_path / "scratch.img"
    r = CliRunner().invoke(app, ["sweep", "--device", "f", "--target", str(scratch), "--size", "8MiB",
                                 *ONE_POINT])
    assert r.exit_code == 0, r.output
    code, output = _replay(trace, scratch)  # the sweep's own file: no --destroy-data needed
    assert code == 0, output
    assert scratch.stat().st_size == 256 << 20  # grown to the replay's size, and still ours
    assert _replay(trace, scratch)[0] == 0
    # a file the replay created is the product's too
    own = tmp_path / "own.img"
    assert _replay(trace, own)[0] == 0
    assert _replay(trace, own)[0] == 0
    # someone's file at the scratch file's path is refused, bytes unchanged
    scratch.unlink()
    scratch.write_bytes(os.urandom(1 << 20))
    before = sha256_of(scratch)
    code, output = _replay(trace, scratch)
    assert code == 2 and "did not create" in output and "--destroy-data" in output, output
    assert sha256_of(scratch) == before and scratch.stat().st_size == 1 << 20


def _fio_descendants(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == "fio"]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.slow
@pytest.mark.fio
def test_kill_9_of_a_replay_kills_fio_and_the_next_replay_removes_its_folder(
        home: Path, tmp_path: Path, fio_available: str) -> None:
    tmp = tmp_path / "tmp"  # the replays' TMPDIR: only this test's folders are in it
    tmp.mkdir()
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "TMPDIR": str(tmp)}
    target = tmp_path / "target.img"
    long = _trace(tmp_path / "long.csv", n=600, span_s=60.0)
    cmd = [sys.executable, "-m", "service.cli.main", "trace", "replay", str(long), "--target", str(target),
           "--lanes", "2"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        fios: list[psutil.Process] = []
        while time.monotonic() < deadline and len(fios) < 3:  # fio's main process and its two lanes
            assert proc.poll() is None, "the replay ended before fio ran"
            fios = _fio_descendants(proc.pid)
            time.sleep(0.1)
        assert len(fios) >= 3, f"fio lanes did not start: {fios}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        _, alive = psutil.wait_procs(fios, timeout=10)
        survivors = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert survivors == [], f"fio outlived the killed replay: {survivors}"
    finally:
        if proc.poll() is None:
            proc.kill()
    left = list(tmp.glob(f"{WORKDIR_PREFIX}*"))
    assert len(left) == 1, left  # kill -9 runs no cleanup: the folder is there...
    short = _trace(tmp_path / "short.csv", n=50, span_s=0.2)
    again = subprocess.run([*cmd[:5], str(short), *cmd[6:]], env=env, cwd=ROOT, capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stderr
    assert list(tmp.glob(f"{WORKDIR_PREFIX}*")) == []  # ... until the next replay starts
