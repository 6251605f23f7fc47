"""kill -9 of a real uvicorn server during a retrain: the job's state and the active version agree."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from modeling.store import DataDir
from tests.conftest import REPO
from tests.device_fixtures import free_port
from tests.service.utils import DEVICE

pytestmark = pytest.mark.slow


def _serve(home: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO, env={**os.environ, "SSDPREDICT_HOME": str(home)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, text=True,
    )


def _ready(http: httpx.Client, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if http.get("/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, "server died"
        time.sleep(0.05)
    raise AssertionError("server did not become ready")


def test_kill_9_right_after_the_new_version_is_registered(trained: DataDir, home: Path) -> None:
    old = trained.catalog.active_model_version(DEVICE)
    assert old is not None
    port = free_port()
    proc = _serve(home, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            _ready(http, proc)
            r = http.post(f"/v1/devices/{DEVICE}/retrain", json={"folds": 2, "time_budget_s": 1})
            assert r.status_code == 202, r.text
            job_id = r.json()["id"]
            # Watch the catalog from here, and kill the server the moment the new version is
            # in it: the job has no time left to record anything afterwards.
            conn = sqlite3.connect(trained.catalog_path, timeout=30)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if conn.execute("SELECT COUNT(*) FROM models").fetchone()[0] > 1:
                    os.kill(proc.pid, signal.SIGKILL)
                    break
                assert proc.poll() is None
                time.sleep(0.002)
            conn.close()
            proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    active = DataDir(home).catalog.active_model_version(DEVICE)
    assert active is not None and active.version != old.version  # the retrain got that far
    port = free_port()
    proc = _serve(home, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            _ready(http, proc)
            job = http.get(f"/v1/jobs/{job_id}").json()
            assert job["state"] == "succeeded", job
            assert job["result"]["model_version"] == active.version and job["result"]["active"] is True
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_job_whose_process_died_is_interrupted_on_startup(trained: DataDir, home: Path) -> None:
    from modeling.store.jobs import Job

    catalog = trained.catalog
    catalog.add_job(Job(id="a" * 32, kind="retrain", device=DEVICE))
    catalog.start_job("a" * 32)
    old = catalog.active_model_version(DEVICE)
    port = free_port()
    proc = _serve(home, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            _ready(http, proc)
            job = http.get(f"/v1/jobs/{'a' * 32}").json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert job["state"] == "interrupted" and job["error"]["code"] == "interrupted"
    assert catalog.get_job("a" * 32).state == "interrupted"
    assert catalog.active_model_version(DEVICE) == old
