"""A data directory on a read-only filesystem (issue 25, item 3).

Reads work (devices, models, predict, report, export, catalog check, the API's reads),
writes are refused with one line naming the directory and the reason, and `catalog check`
does not call the catalog damaged.  We run as root, who ignores permission bits, so the
directory is a real tmpfs remounted read-only (cleaned up after the test).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.service.utils import DEVICE, wait_ready

runner = CliRunner()
WORKLOAD = ["--write-ratio", "0.3", "--queue-depth", "4", "--request-size", "4k", "--randomness", "1"]
CSV = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n"


@contextmanager
def read_only_copy(
    src: Path, mount: Path, *, skip: Callable[[str], bool] = lambda name: False
) -> Iterator[Path]:
    """``src`` copied onto a tmpfs at ``mount`` that is then remounted read-only (files ``skip``
    names are left out); unmounted after."""
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        shutil.copytree(src, mount, dirs_exist_ok=True,
                        ignore=lambda _folder, names: [n for n in names if skip(n)])
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        yield mount
    finally:
        # the in-process CLI's serving registry may still hold the catalog open: detach lazily then
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(mount)], check=True)


@pytest.fixture
def read_only_home(trained: DataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The trained data directory copied onto a tmpfs that is then remounted read-only."""
    with read_only_copy(trained.root, tmp_path / "ro") as mount:
        monkeypatch.setenv("SSDPREDICT_HOME", str(mount))
        yield mount


def _version(home: Path) -> str:
    active = DataDir(home).catalog.active_model_version(DEVICE)
    assert active is not None
    return active.version


def test_reads_work_and_writes_are_refused_in_one_line(read_only_home: Path, tmp_path: Path) -> None:
    csv = tmp_path / "m.csv"
    csv.write_bytes(CSV)
    reads = [
        ["devices"],
        ["devices", "show", DEVICE],
        ["models", "list", "--device", DEVICE],
        ["predict", "--device", DEVICE, *WORKLOAD],
        ["report", "--device", DEVICE, "--output", str(tmp_path / "r.html")],
        ["export", "--device", DEVICE, "--output", str(tmp_path / "e.csv")],
    ]
    for args in reads:
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
    result = runner.invoke(app, ["catalog", "check"])
    assert (result.exit_code, result.output) == (0, "catalog ok\n")
    writes = [
        ["train", "--device", DEVICE],
        ["ingest", "--device", DEVICE, str(csv)],
        ["ingest", "--device", "brand-new", str(csv)],
        ["sweeps", "delete", "1", "--yes"],
        ["models", "activate", "--device", DEVICE, _version(read_only_home)],
        ["catalog", "rebuild", "--force"],
    ]
    for args in writes:
        result = runner.invoke(app, args)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 2 and len(errors) == 1, (args, result.output)
        assert f"data directory {read_only_home} is not writable (read-only file system)" in errors[0], errors
        assert "Traceback" not in result.output


def test_the_api_serves_reads_and_refuses_writes_with_json(
    read_only_home: Path, make_app: Callable[..., FastAPI]
) -> None:
    workload = {"write_ratio": 0.3, "queue_depth": 4, "request_size": 4096, "randomness": 1}
    version = _version(read_only_home)
    with TestClient(make_app(), raise_server_exceptions=False) as client:
        assert wait_ready(client).status_code == 200  # the preload runs in the background
        for url in ("/readyz", "/v1/devices", f"/v1/devices/{DEVICE}/models", f"/v1/devices/{DEVICE}/report"):
            assert client.get(url).status_code == 200, url
        r = client.post("/v1/predict", json={"device": DEVICE, "workload": workload})
        assert r.status_code == 200 and r.json()["model_version"] == version, r.text
        writes = [
            ("POST", "/v1/devices/new/sweeps", {"files": {"file": ("m.csv", CSV)}}),
            ("DELETE", f"/v1/devices/{DEVICE}", {}),
            ("DELETE", f"/v1/devices/{DEVICE}/sweeps/1", {}),
            ("POST", f"/v1/devices/{DEVICE}/models/{version}/activate", {}),
            ("POST", f"/v1/devices/{DEVICE}/retrain", {"json": {}}),
        ]
        for method, url, kwargs in writes:
            r = client.request(method, url, **kwargs)
            assert r.status_code == 503, (url, r.status_code, r.text)
            error = r.json()["error"]
            assert error["code"] == "read_only" and str(read_only_home) in error["message"], r.text


def test_a_write_ahead_log_without_its_shm_file_is_read(
    trained: DataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy (or a crash) can leave the catalog's -wal file, holding committed writes, without
    the -shm file SQLite needs to read it, which a read-only folder cannot create: the
    catalog is still read, with those writes."""
    reader = sqlite3.connect(trained.catalog_path)  # holds the log open: no checkpoint at close
    try:
        reader.execute("PRAGMA wal_autocheckpoint=0")
        reader.execute("SELECT count(*) FROM devices").fetchall()
        trained.catalog.ensure_device("only-in-the-log")
        wal = Path(f"{trained.catalog_path}-wal")
        assert wal.exists() and wal.stat().st_size > 0
        with read_only_copy(trained.root, tmp_path / "ro", skip=lambda name: name.endswith("-shm")) as mount:
            assert not Path(f"{mount}/catalog.sqlite3-shm").exists()
            assert Path(f"{mount}/catalog.sqlite3-wal").stat().st_size > 0
            monkeypatch.setenv("SSDPREDICT_HOME", str(mount))
            result = runner.invoke(app, ["devices"])
            assert result.exit_code == 0 and "only-in-the-log" in result.output, result.output
            result = runner.invoke(app, ["predict", "--device", DEVICE, *WORKLOAD])
            assert result.exit_code == 0, result.output
            result = runner.invoke(app, ["catalog", "check"])
            assert (result.exit_code, result.output) == (0, "catalog ok\n")
    finally:
        reader.close()
