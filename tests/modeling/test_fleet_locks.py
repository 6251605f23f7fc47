"""A fleet training holds each device's writer lock, as ``train --device`` does, across processes.

While a device is in training, another writer (here a real ``ssdpredict ingest`` process)
is refused with the fleet named; a device another writer holds fails alone, or is waited
for with ``wait``; each lock is given back as soon as its device's version is registered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modeling.errors import DeviceBusy, InvalidInput
from modeling.store import DataDir
from modeling.store.files.locks import DeviceLockSet
from modeling.training.fleet import DeviceResult, dask_client, train_fleet
from modeling.training.selection import candidates_of_kinds
from modeling.training.train import train_device
from tests.conftest import REPO
from tests.modeling.conftest import synthetic_rows
from tests.modeling.test_device_locks import _holder

FLEET = ("ssd-a", "ssd-b", "ssd-c")


def _fill(datadir: DataDir) -> None:
    for i, name in enumerate(FLEET):
        datadir.catalog.ensure_device(name)
        datadir.catalog.add_measurements(name, synthetic_rows(seed=i).to_dict("records"))


def _ingest(home: Path, device: str, csv: Path) -> subprocess.CompletedProcess[str]:
    """A real ``ssdpredict ingest`` process (another writer of ``device``)."""
    return subprocess.run(
        [sys.executable, "-m", "service.cli.main", "ingest", "--device", device, str(csv)],
        cwd=REPO, text=True, capture_output=True, timeout=120,
        env={**os.environ, "SSDPREDICT_HOME": str(home), "PYTHONPATH": str(REPO)},
    )


def test_lock_set_all_or_busy_reported(datadir: DataDir) -> None:
    proc = _holder(datadir.root, "b", 60)
    try:
        with pytest.raises(DeviceBusy, match="'b' is busy: sweep"):
            datadir.device_locks(["a", "b", "c"], "train").acquire()
        assert datadir.lock_holder("a") is None  # all or nothing: "a" was given back
        with datadir.device_locks(["a", "b", "c"], "train", skip_busy=True) as locks:
            assert set(locks.held) == {"a", "c"} and set(locks.busy) == {"b"}
            assert datadir.lock_holder("a")["operation"] == "train"  # type: ignore[index]
            locks.release("a")
            assert datadir.lock_holder("a") is None and datadir.lock_holder("c") is not None
        assert datadir.lock_holder("c") is None
    finally:
        proc.kill()
        proc.wait()


def test_lock_set_says_when_the_open_file_limit_is_too_low(datadir: DataDir, monkeypatch) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 2048))
    with pytest.raises(InvalidInput, match="ulimit -n"):
        DeviceLockSet(datadir.root, [f"d{i}" for i in range(4000)], "train").acquire()


@pytest.mark.slow
def test_fleet_training_holds_each_device_lock(datadir: DataDir, tmp_path: Path) -> None:
    _fill(datadir)
    csv = tmp_path / "more.csv"
    synthetic_rows(seed=7).head(3).to_csv(csv, index=False)
    fit_kw = {"folds": 2, "candidates": candidates_of_kinds(["cart"])}
    seen: list[tuple[str, dict | None, list[str]]] = []
    refused: list[subprocess.CompletedProcess[str]] = []

    def progress(result: DeviceResult, done: int, total: int) -> None:
        # When a device is reported, its lock is free and every device not reported yet is held.
        pending = [d for d in FLEET if d not in {s[0] for s in seen} | {result.device}]
        holders = {d: datadir.lock_holder(d) for d in pending}
        assert all(h is not None and h["operation"] == "train" and h["pid"] == os.getpid()
                   for h in holders.values()), holders
        if pending and not refused:
            refused.append(_ingest(datadir.root, pending[0], csv))
        seen.append((result.device, datadir.lock_holder(result.device), pending))

    holder = _holder(datadir.root, "ssd-b", 600)  # a sweep of ssd-b runs the whole time
    try:
        with dask_client(None, workers=1) as client:
            report = train_fleet(datadir, FLEET, client, progress=progress, **fit_kw)
            assert {r.device for r in report.succeeded} == {"ssd-a", "ssd-c"}
            (busy,) = report.failed
            assert busy.device == "ssd-b" and f"busy: sweep by PID {holder.pid}" in str(busy.error)
            assert datadir.catalog.active_model_version("ssd-b") is None
            assert seen[0][0] == "ssd-b"  # the busy device is reported first, still the sweep's
            assert seen[0][1]["operation"] == "sweep"  # type: ignore[index]
            assert all(lock is None for _, lock, _ in seen[1:])
            (ingest,) = refused
            assert ingest.returncode != 0 and f"busy: train by PID {os.getpid()}" in ingest.stderr, ingest
            assert all(datadir.lock_holder(d) is None for d in ("ssd-a", "ssd-c"))

            # With wait, the busy device is waited for, then trained.
            holder.kill()
            holder.wait()
            holder = _holder(datadir.root, "ssd-b", 2)
            said: list[str] = []
            started = time.monotonic()
            report = train_fleet(datadir, ["ssd-b"], client, wait=True, on_wait=said.append, **fit_kw)
            assert time.monotonic() - started > 1.0
            assert [r.device for r in report.succeeded] == ["ssd-b"] and not report.failed
            assert said and "busy" in said[0] and "waiting" in said[0]
    finally:
        holder.kill()
        holder.wait()
    assert all(datadir.lock_holder(d) is None for d in FLEET)


@pytest.mark.slow
def test_train_many_with_a_reference_transfers_each_device(datadir: DataDir) -> None:
    """``train --devices ... --reference R`` trains every other device as ``--reference R`` does."""
    from typer.testing import CliRunner

    from service.cli.main import app

    _fill(datadir)
    reference = train_device(datadir, "ssd-a", folds=2, candidates=candidates_of_kinds(["cart"]))
    r = CliRunner().invoke(app, ["train", "--devices", "ssd-*", "--reference", "ssd-a",
                                 "--candidates", "cart", "--folds", "2", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    trained = {s["device"] for s in json.loads(r.stdout)["succeeded"]}
    assert trained == {"ssd-b", "ssd-c"}  # the reference itself is left out
    assert [v.version for v in datadir.catalog.list_model_versions("ssd-a")] == [reference.version]
    for device in trained:
        transfer = datadir.catalog.active_model_version(device).manifest["transfer"]  # type: ignore[union-attr]
        assert transfer["reference"]["device"] == "ssd-a"
        assert transfer["reference"]["version"] == reference.version
