"""An import killed by ``kill -9`` leaves its staging folder; the next import removes it, and only it.

A real ``ssdpredict ingest`` process, a real ``kill -9``, real folders and locks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collectors.ingest.batch import STAGING_PREFIX
from modeling.store import DataDir
from modeling.store.files.workdirs import owned_workdir, remove_stale_workdirs

ROOT = Path(__file__).resolve().parents[2]


def _csv(path: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    pd.DataFrame({
        "write_ratio": rng.choice([0.0, 0.5, 1.0], n), "queue_depth": rng.choice([1, 4, 16], n),
        "request_size": rng.choice([4096, 65536], n), "randomness": rng.choice([0.0, 1.0], n),
        "numjobs": 1, "iops": rng.uniform(1e3, 1e5, n), "bandwidth_mib_s": rng.uniform(10, 500, n),
        "latency_mean_us": rng.uniform(20, 900, n), "latency_p99_us": rng.uniform(900, 5000, n),
    }).to_csv(path, index=False)
    return path


def _ingest(home: Path, device: str, path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "service.cli.main", "ingest", "--device", device, str(path)]
    return subprocess.Popen(cmd, env={**os.environ, "SSDPREDICT_HOME": str(home)}, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_kill_9_during_ingest_leaves_a_folder_that_the_next_ingest_removes(
        datadir: DataDir, home: Path, tmp_path: Path) -> None:
    staging_parent = datadir.measurements_dir
    big = _csv(tmp_path / "big.csv", 200_000)
    proc = _ingest(home, "big", big)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(staging_parent.glob(f"{STAGING_PREFIX}*/part-*")):
            assert proc.poll() is None, "the import ended before it staged anything"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = list(staging_parent.glob(f"{STAGING_PREFIX}*"))
    assert len(left) == 1, left  # kill -9 ran no cleanup
    assert datadir.catalog.list_devices() == []  # and stored nothing
    # a live import's folder (held here, in this process) must survive the next import's cleanup
    with owned_workdir(staging_parent, STAGING_PREFIX) as live:
        done = _ingest(home, "small", _csv(tmp_path / "small.csv", 200))
        _, err = done.communicate(timeout=120)
        assert done.returncode == 0, err
        assert list(staging_parent.glob(f"{STAGING_PREFIX}*")) == [live]
    assert list(staging_parent.glob(f"{STAGING_PREFIX}*")) == []
    assert [d.name for d in datadir.catalog.list_devices()] == ["small"]


def test_only_folders_of_dead_owners_are_removed(tmp_path: Path) -> None:
    # an owner in another process, alive, then dead (killed without cleanup)
    script = ("import sys, time\nfrom pathlib import Path\n"
              "from modeling.store.files.workdirs import owned_workdir\n"
              "with owned_workdir(Path(sys.argv[1]), 'w-') as d:\n"
              "    print(d, flush=True); time.sleep(300)\n")
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        theirs = Path(child.stdout.readline().strip())
        assert theirs.is_dir()
        with owned_workdir(tmp_path, "w-") as mine:
            assert remove_stale_workdirs(tmp_path, "w-") == []  # both owners alive
            child.kill()
            child.wait(timeout=10)
            assert remove_stale_workdirs(tmp_path, "w-") == [theirs]
            assert mine.is_dir() and not theirs.exists()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    # a folder without an owner file is young: being created, or an older version's, so kept
    young = tmp_path / "w-young"
    young.mkdir()
    assert remove_stale_workdirs(tmp_path, "w-") == []
    os.utime(young, (time.time() - 2 * 86400, time.time() - 2 * 86400))
    assert remove_stale_workdirs(tmp_path, "w-") == [young]
