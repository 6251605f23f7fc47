"""Small serving frictions (issue 25, item 9): a port in use is one line and exit 2 before
"serving on"; /readyz drops a device deleted by another process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from modeling.store import DataDir
from service.api.main import create_app
from service.cli.main import app
from service.config import get_settings
from tests.conftest import REPO
from tests.service.utils import DEVICE, wait_ready


def test_a_port_in_use_is_one_line_and_exit_2_before_serving_on(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port)],
            cwd=REPO, env={**os.environ, "SSDPREDICT_HOME": str(home)}, capture_output=True, text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr
    assert "serving on" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}: Address already in use" in lines[0], done.stderr


def test_readyz_drops_a_device_deleted_by_another_process(trained: DataDir) -> None:
    with TestClient(create_app(get_settings()), raise_server_exceptions=False) as client:
        assert DEVICE in wait_ready(client).json()["models"]  # the preload runs in the background
        result = CliRunner().invoke(app, ["devices", "delete", DEVICE, "--yes"])
        assert result.exit_code == 0, result.output
        r = client.get("/readyz")
        assert r.status_code == 200 and DEVICE not in r.json()["models"], r.text
