"""Training and evaluating many devices on Dask: a LocalCluster, and real scheduler/worker processes.

The fleet path must give exactly the models serial training gives (CART is deterministic,
so the version files' SHA-256 match), register them from the client only, and report a
failed device without stopping the others.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.errors import InvalidInput, NothingSelected, UnknownDevice
from modeling.training.fleet import select_devices
from modeling.training.selection import candidates_of_kinds
from modeling.store import DataDir
from modeling.training.train import train_device
from service.cli.main import app
from tests.conftest import REPO
from tests.modeling.conftest import synthetic_rows

runner = CliRunner()
FLEET = ("ssd-a", "ssd-b", "nvme-c")
QUICK = ("--candidates", "cart", "--folds", "2")


def _fill(datadir: DataDir, *, broken: bool = True) -> None:
    for i, name in enumerate(FLEET):
        datadir.catalog.ensure_device(name)
        datadir.catalog.add_measurements(name, synthetic_rows(seed=i).to_dict("records"))
    if broken:  # too few points to train: must fail alone
        datadir.catalog.ensure_device("tiny")
        datadir.catalog.add_measurements("tiny", synthetic_rows(seed=9).head(4).to_dict("records"))


def _serial_files(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Each device's model file hashes from plain one-at-a-time training of the same data."""
    serial = DataDir(tmp_path / "serial")
    _fill(serial, broken=False)
    cands = candidates_of_kinds(["cart"])
    return {name: train_device(serial, name, folds=2, candidates=cands).manifest["files"] for name in FLEET}


def _check_same_as_serial(datadir: DataDir, tmp_path: Path, output: dict) -> None:
    assert {r["device"] for r in output["succeeded"]} == set(FLEET)
    assert [f["device"] for f in output["failed"]] == ["tiny"]
    assert "at least" in output["failed"][0]["error"]
    serial = _serial_files(tmp_path)
    for name in FLEET:
        mv = datadir.catalog.active_model_version(name)
        assert mv is not None and mv.manifest["files"] == serial[name], name
    assert datadir.catalog.list_model_versions("tiny") == []


def test_select_devices(datadir):
    _fill(datadir)
    assert select_devices(datadir, all_devices=True) == sorted([*FLEET, "tiny"])
    assert select_devices(datadir, ["ssd-*", "tiny", "ssd-a"]) == ["ssd-a", "ssd-b", "tiny"]
    with pytest.raises(UnknownDevice):
        select_devices(datadir, ["ghost"])
    with pytest.raises(InvalidInput, match="no device matches"):
        select_devices(datadir, ["hdd-*"])
    with pytest.raises(InvalidInput):
        select_devices(datadir, [])
    with pytest.raises(NothingSelected):  # an API 404, not a 422: the request was well formed
        select_devices(DataDir(datadir.root / "empty"), all_devices=True)


def test_exactly_one_device_choice(datadir):
    _fill(datadir)
    r = runner.invoke(app, ["train", "--device", "ssd-a", "--all"])
    assert r.exit_code == 2 and "exactly one of" in r.output
    r = runner.invoke(app, ["train", "--all", "--candidates", "forest"])
    assert r.exit_code == 2 and "unknown estimator kind" in r.output


def test_missing_dask_is_one_clear_line(datadir, monkeypatch):
    _fill(datadir)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    r = runner.invoke(app, ["train", "--all", *QUICK])
    assert r.exit_code == 2
    assert "needs dask.distributed" in r.output and "pip install" in r.output


def test_unreachable_scheduler(datadir, monkeypatch):
    import modeling.training.fleet

    _fill(datadir)
    monkeypatch.setattr(modeling.training.fleet, "CONNECT_TIMEOUT_S", 1.0)
    r = runner.invoke(app, ["train", "--all", *QUICK, "--scheduler", f"tcp://127.0.0.1:{_free_port()}"])
    assert r.exit_code == 2 and "cannot reach the Dask scheduler" in r.output


@pytest.mark.slow
def test_train_all_on_a_local_cluster_matches_serial(datadir, tmp_path):
    _fill(datadir)
    r = runner.invoke(app, ["train", "--all", *QUICK, "--workers", "2", "--json"])
    assert r.exit_code == 1, r.output  # one device failed, the others trained
    output = json.loads(r.stdout)
    assert output["workers"] == 2 and output["devices"] == 4
    _check_same_as_serial(datadir, tmp_path, output)

    r = runner.invoke(app, ["evaluate", "--devices", "ssd-*", *QUICK, "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    reports = json.loads(r.stdout)["reports"]
    assert set(reports) == {"ssd-a", "ssd-b"}
    assert all(reports[d]["device"] == d and reports[d]["n"] == 128 for d in reports)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dask_processes(tmp_path: Path) -> Iterator[str]:
    """A real ``dask scheduler`` and ``dask worker`` (two single-threaded processes) on loopback."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bindir = Path(sys.executable).parent
    logs = [open(tmp_path / name, "wb") for name in ("scheduler.log", "worker.log")]
    procs = [
        subprocess.Popen(
            [
                str(bindir / "dask"),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
                "--no-show",
            ],
            env=env,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    pytest.fail("dask scheduler did not start: " + (tmp_path / "scheduler.log").read_text())
                time.sleep(0.2)
        procs.append(
            subprocess.Popen(
                [
                    str(bindir / "dask"),
                    "worker",
                    address,
                    "--nworkers",
                    "2",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                ],
                env=env,
                stdout=logs[1],
                stderr=subprocess.STDOUT,
            )
        )
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


@pytest.mark.slow
def test_train_all_on_a_real_scheduler_and_workers(datadir, tmp_path, dask_processes, monkeypatch):
    _fill(datadir)
    monkeypatch.setenv("SSDPREDICT_SCHEDULER", dask_processes)  # through the settings class
    r = runner.invoke(app, ["train", "--all", *QUICK, "--json"])
    assert r.exit_code == 1, r.output
    output = json.loads(r.stdout)
    assert output["workers"] == 2
    _check_same_as_serial(datadir, tmp_path, output)
