"""Test data built through the real code: a device ingested from real fio results, trained."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from collectors.fio.results import parse_fio_output
from modeling.training.selection import Candidate
from modeling.store import DataDir, ModelVersion
from modeling.training.train import train_device
from tests.conftest import FIO_PLOT, data_path

DEVICE_DIR = FIO_PLOT / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"
DEVICE = "intel-s4610"


def fio_files(limit: int | None = None, folder: Path = DEVICE_DIR) -> list[Path]:
    """Real fio JSON results of one SATA SSD (fio-plot data)."""
    files = sorted(data_path(folder).glob("*.json"))
    if not files:
        raise AssertionError(f"no fio JSON results in {folder}")
    return files[:limit]


def ingest_fio(datadir: DataDir, device: str, paths: list[Path]) -> None:
    """Store the results of ``paths`` as one sweep of ``device`` (created if new)."""
    rows = [r.row for p in paths for r in parse_fio_output(p.read_text(), source=p.name)]
    datadir.catalog.ensure_device(device)
    datadir.catalog.add_measurements(device, rows)


def quick_train(datadir: DataDir, device: str) -> ModelVersion:
    """Train ``device`` with CART only (tens of milliseconds instead of seconds)."""
    cart = [Candidate("extended", "cart", (("min_samples_leaf", 1),))]
    return train_device(datadir, device, folds=2, candidates=cart)


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """Check the one error shape and return its ``error`` object."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def wait_ready(client: Any, seconds: float = 10) -> Any:
    """``GET /readyz`` until the background preload is done (200) or names an error, or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while True:
        r = client.get("/readyz")
        if r.status_code == 200 or r.json()["errors"] or time.monotonic() > deadline:
            return r
        time.sleep(0.02)
