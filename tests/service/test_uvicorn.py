"""End to end: `ssdpredict serve` runs a real uvicorn process; talk to it over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from modeling.store import DataDir
from tests.conftest import REPO
from tests.service.utils import DEVICE

pytestmark = pytest.mark.slow

TOKEN = "e2e-token"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_end_to_end_through_real_uvicorn(trained: DataDir, home: Path) -> None:
    port = free_port()
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "SSDPREDICT_API_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=10) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if http.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, proc.communicate()[0]
                assert time.monotonic() < deadline, "server did not become ready"
                time.sleep(0.1)
            workload = {
                "write_ratio": 0.3,
                "queue_depth": 8,
                "request_size": "4k",
                "randomness": 1,
                "numjobs": 2,
            }
            r = http.post("/v1/predict", json={"device": DEVICE, "workload": workload})
            assert r.status_code == 200, r.text
            assert r.json()["model_version"] == trained.catalog.active_model_version(DEVICE).version  # type: ignore[union-attr]
            r = http.post("/v1/predict", json={"device": DEVICE, "workload": {**workload, "queue_depth": -1}})
            assert r.status_code == 422 and "queue_depth" in r.json()["error"]["message"]
            assert http.post("/v1/predict", json={"device": "nope", "workload": workload}).status_code == 404
            r = http.post("/v1/fleet/predict", json={"all_devices": True, "workloads": [workload]})
            assert r.status_code == 200 and r.json()["ranking"] == [[DEVICE]], r.text
            csv = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n"
            assert http.post("/v1/devices/up/sweeps", files={"file": ("m.csv", csv)}).status_code == 401
            r = http.post(
                "/v1/devices/up/sweeps",
                files={"file": ("m.csv", csv)},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert r.status_code == 201, r.text
            assert "/docs" in http.get("/docs").text or http.get("/docs").status_code == 200
            assert 'route="/v1/predict"' in http.get("/metrics").text
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert "API token: in force" in output, output
    assert "Application shutdown complete" in output, output  # a graceful stop
    assert proc.returncode in (0, -15), output  # uvicorn re-raises the SIGTERM it handled
