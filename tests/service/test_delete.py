"""Deleting a device or a sweep: catalog rows, Parquet files and model files go together."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.service.utils import DEVICE, assert_error

runner = CliRunner()
TOKEN = "delete-token"
CSV = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n0,2,4096,1,9500\n"


def test_cli_deletes_a_sweep_then_the_device(trained: DataDir, tmp_path) -> None:
    csv = tmp_path / "extra.csv"
    csv.write_bytes(CSV)
    assert runner.invoke(app, ["ingest", "--device", DEVICE, str(csv)]).exit_code == 0
    extra = trained.catalog.list_sweeps(DEVICE)[-1]
    parquet = trained.measurements_dir / str(extra.parquet)
    assert parquet.exists()
    r = runner.invoke(app, ["sweeps", "delete", str(extra.id)])
    assert r.exit_code == 2 and "--yes" in r.output and parquet.exists()
    r = runner.invoke(app, ["sweeps", "delete", str(extra.id), "--yes"])
    assert r.exit_code == 0, r.output
    assert not parquet.exists() and extra.id not in [s.id for s in trained.catalog.list_sweeps(DEVICE)]

    r = runner.invoke(app, ["devices", "delete", DEVICE])
    assert r.exit_code == 2 and "--yes" in r.output
    r = runner.invoke(app, ["devices", "delete", DEVICE, "--yes"])
    assert r.exit_code == 0 and "model versions" in r.output, r.output
    assert trained.catalog.list_devices() == []
    assert not (trained.measurements_dir / DEVICE).exists() and not (trained.models_dir / DEVICE).exists()
    import sqlite3

    conn = sqlite3.connect(trained.catalog_path)
    assert conn.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 0
    conn.close()
    r = runner.invoke(app, ["devices", "delete", DEVICE, "--yes"])
    assert r.exit_code == 2 and "unknown device" in r.output


def test_api_delete_needs_the_token_and_forgets_the_model(
    trained: DataDir, make_app: Callable[..., FastAPI]
) -> None:
    with TestClient(make_app(api_token=TOKEN), raise_server_exceptions=False) as client:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        workload = {"write_ratio": 0, "queue_depth": 1, "request_size": 4096, "randomness": 1}
        assert client.post("/v1/predict", json={"device": DEVICE, "workload": workload}).status_code == 200
        sweep = trained.catalog.list_sweeps(DEVICE)[0]
        assert_error(client.delete(f"/v1/devices/{DEVICE}/sweeps/{sweep.id}"), 401)
        assert_error(client.delete(f"/v1/devices/other/sweeps/{sweep.id}", headers=auth), 404)
        r = client.delete(f"/v1/devices/{DEVICE}/sweeps/{sweep.id}", headers=auth)
        assert r.status_code == 200 and r.json()["points"] == sweep.n_points, r.text
        assert_error(client.delete(f"/v1/devices/{DEVICE}"), 401)
        r = client.delete(f"/v1/devices/{DEVICE}", headers=auth)
        assert r.status_code == 200 and r.json()["models"] >= 1, r.text
        assert_error(client.post("/v1/predict", json={"device": DEVICE, "workload": workload}), 404)
        assert_error(client.delete(f"/v1/devices/{DEVICE}", headers=auth), 404)
        assert client.get("/v1/devices").json()["count"] == 0
