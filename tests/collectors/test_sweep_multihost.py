"""One sweep over many hosts: two real ``fio --server`` instances on 127.0.0.1, one command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.sweep.multihost import host_device, run_multihost, split_remotes
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput
from modeling.store import DataDir, validate_name
from service.cli.main import app
from modeling.workload import Workload
from tests.device_fixtures import free_port, serve_fio, tiny_plan

ROOT = Path(__file__).resolve().parents[2]
GRID = ["--plan", "grid", "--write-ratios", "0,1", "--queue-depths", "1,4", "--sizes", "4k",
        "--randomness", "1", "--seed", "7"]


def _sweep(home: Path, target: Path, remote: str, *extra: str) -> list[str]:
    return ["sweep", "--device", "fleet", "--target", str(target), "--size", "8MiB", "--runtime", "1s",
            "--remote", remote, *GRID, *extra]


def _order(datadir: DataDir, device: str) -> list[tuple[float, int]]:
    frame = datadir.catalog.measurements(device).sort_values("seq")
    return list(zip(frame["write_ratio"], frame["queue_depth"], strict=True))


def test_host_names_and_remote_lists() -> None:
    assert split_remotes("h1:8765, h2:9000") == ["h1:8765", "h2:9000"]
    assert host_device("d", "h1:8765") == "d@h1"
    assert host_device("d", "10.0.0.7:9000") == "d@10.0.0.7:9000"
    for bad in ("h1:8765,h1:8765", "h1,8765", ",", "h1:99999,h2:1"):
        with pytest.raises(InvalidInput):
            split_remotes(bad)
    # the widened name rule still keeps names inside the data directory
    assert validate_name("d@h1:9000") == "d@h1:9000"
    for bad in ("@h1", ":x", "d@h/1", "d@../x"):
        with pytest.raises(InvalidInput):
            validate_name(bad)


@pytest.mark.slow
@pytest.mark.fio
def test_two_hosts_in_one_command_store_two_devices_in_the_same_order(
        fio_servers: tuple[str, str], datadir: DataDir, tmp_path: Path) -> None:
    first, second = fio_servers
    result = CliRunner().invoke(app, _sweep(datadir.root, tmp_path / "t.img", f"{first},{second}", "--json"))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["host_count"], out["complete"], out["failed"]) == (2, 2, 0)
    names = [host_device("fleet", first), host_device("fleet", second)]
    assert [h["device"] for h in out["hosts"]] == names
    for name in names:
        (sweep,) = datadir.catalog.list_sweeps(name)
        assert sweep.status == "complete" and sweep.n_points == 4
        frame = datadir.catalog.measurements(name)
        assert len(frame) == 4 and (frame["iops"] > 0).all()
    assert {row for row in _order(datadir, names[0])} == {(w, q) for w in (0.0, 1.0) for q in (1, 4)}
    assert _order(datadir, names[0]) == _order(datadir, names[1])  # the same seeded order on both
    assert not datadir.catalog.has_device("fleet")  # only the per-host devices exist


@pytest.mark.slow
@pytest.mark.fio
def test_an_unreachable_host_is_reported_and_the_other_completes(
        fio_servers: tuple[str, str], datadir: DataDir, tmp_path: Path) -> None:
    live, dead = fio_servers[0], f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, _sweep(datadir.root, tmp_path / "t.img", f"{dead},{live}"))
    assert result.exit_code == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1 and host_device("fleet", dead) in failed[0] and "cannot connect" in failed[0]
    assert "2 hosts: 1 complete, 1 failed" in result.stdout
    assert datadir.catalog.list_sweeps(host_device("fleet", live))[0].n_points == 4
    assert not datadir.catalog.has_device(host_device("fleet", dead))


@pytest.mark.fio
def test_writer_locks_are_per_host_device(fio_servers: tuple[str, str], datadir: DataDir,
                                          tmp_path: Path) -> None:
    first, second = fio_servers
    settings = SweepSettings(target=str(tmp_path / "t.img"), runtime="200ms", size="8MiB", remote=first)
    with datadir.device_lock(host_device("d", first), "train"):
        busy, free = run_multihost(datadir, "d", tiny_plan(1), settings, [first, second])
    assert busy.sweep is None and busy.error is not None and "busy" in busy.error.lower()
    assert free.error is None and free.sweep is not None and free.sweep.n_points == 1


@pytest.mark.slow
@pytest.mark.fio
def test_kill_then_rerun_resumes_every_host_where_it_stopped(
        fio_servers: tuple[str, str], home: Path, tmp_path: Path) -> None:
    remotes = ",".join(fio_servers)
    names = [host_device("fleet", r) for r in fio_servers]
    cmd = [sys.executable, "-m", "service.cli.main", *_sweep(home, tmp_path / "t.img", remotes)]
    env = {**os.environ, "SSDPREDICT_HOME": str(home)}
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    catalog = DataDir(home).catalog
    deadline = time.monotonic() + 90

    def stored() -> list[int]:
        return [s.n_points for n in names if catalog.has_device(n) for s in catalog.list_sweeps(n)]

    while time.monotonic() < deadline and proc.poll() is None and (len(stored()) < 2 or min(stored()) < 1):
        time.sleep(0.05)
    assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.stderr.read()!r}"  # type: ignore[union-attr]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed = {n: catalog.list_sweeps(n)[0] for n in names}
    assert all(s.status == "running" and 1 <= s.n_points < 4 for s in killed.values()), killed

    done = subprocess.run([*cmd, "--json"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in names:
        (sweep,) = catalog.list_sweeps(name)
        assert sweep.id == killed[name].id and sweep.status == "complete" and sweep.n_points == 4
        frame = catalog.measurements(name)
        assert sorted(frame["seq"]) == [0, 1, 2, 3]  # each point once: resumed, not restarted


@pytest.mark.slow
@pytest.mark.fio
def test_a_host_lost_mid_sweep_keeps_its_points_and_the_other_completes(
        fio_available: str, datadir: DataDir, tmp_path: Path) -> None:
    with serve_fio(fio_available, tmp_path) as server, serve_fio(fio_available, tmp_path) as other:
        doomed, steady = server.remote, other.remote
        settings = SweepSettings(target=str(tmp_path / "t.img"), runtime="1s", size="8MiB", remote=doomed)
        lost = host_device("d", doomed)

        def progress(name: str) -> Callable[[int, int, Workload], None]:
            def advance(done: int, total: int, workload: Workload) -> None:
                if name == lost and done == 1:
                    server.process.kill()  # the host goes down between two points
                    server.process.wait()
            return advance

        gone, kept = run_multihost(datadir, "d", tiny_plan(3), settings, [doomed, steady], progress=progress)
    assert gone.sweep is None and gone.error and "fio failed" in gone.error
    (partial,) = datadir.catalog.list_sweeps(lost)
    assert partial.status == "running" and partial.n_points == 1  # kept, to be resumed
    assert kept.sweep is not None and kept.sweep.status == "complete" and kept.sweep.n_points == 3
