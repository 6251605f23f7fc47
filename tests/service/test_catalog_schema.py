"""Catalog damage that SQLite's own check passes (issue 25, item 2): a dropped table or
column, a reset ``user_version``; and the damage kinds every command meets on open.

Every CLI command gives one line and exit 2, every API endpoint one JSON error (no 500),
``catalog check`` names the schema problem, and a failed ingest leaves no device behind.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.device_fixtures import sha256_of
from tests.service.utils import DEVICE

runner = CliRunner()
CSV = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n0,2,4096,1,9500\n"
WORKLOAD = ["--write-ratio", "0.3", "--queue-depth", "4", "--request-size", "4k", "--randomness", "1"]


def _sql(*statements: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        conn = sqlite3.connect(path)
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.close()

    return damage


def _zero_bytes(path: Path) -> None:
    os.truncate(path, 0)


def _garbage_header(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.write(b"this is no db...")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "zero-bytes": _zero_bytes,
    "garbage-header": _garbage_header,
    "dropped-models": _sql("DROP TABLE models"),
    "dropped-devices": _sql("PRAGMA foreign_keys=OFF", "DROP TABLE devices"),
    "dropped-points": _sql("DROP TABLE points"),
    "dropped-column": _sql("ALTER TABLE models DROP COLUMN manifest"),
    "user-version-reset": _sql("PRAGMA user_version = 0"),
}
SCHEMA_DAMAGE = [k for k in DAMAGE if k not in ("zero-bytes", "garbage-header")]


def _commands(tmp: Path) -> list[list[str]]:
    csv = tmp / "more.csv"
    csv.write_bytes(CSV)
    trace = tmp / "t.csv"
    trace.write_text("timestamp_s,op,offset,size\n0.0,read,0,4096\n0.001,read,4096,4096\n")
    return [
        ["devices"],
        ["devices", "show", DEVICE],
        ["models", "list", "--device", DEVICE],
        ["predict", "--device", DEVICE, *WORKLOAD],
        ["train", "--device", DEVICE],
        ["ingest", "--device", DEVICE, str(csv)],
        ["ingest", "--device", "newdev", str(csv)],
        ["evaluate", "--device", DEVICE],
        ["report", "--device", DEVICE, "--output", str(tmp / "r.html")],
        ["export", "--device", DEVICE, "--output", str(tmp / "e.csv")],
        ["sweeps", "delete", "1", "--yes"],
        ["trace", "predict", str(trace), "--device", DEVICE],
        ["capacity", "--device", DEVICE, "--workload", "write_ratio=0.3,request_size=4k,randomness=1",
         "--slo", "p99<=10ms"],
        ["catalog", "check"],
    ]


# ~5 s each on 2 loaded cores: the case in the everyday run, the others in the slow set
@pytest.mark.parametrize(
    "kind", [k if k == "dropped-models" else pytest.param(k, marks=pytest.mark.slow) for k in DAMAGE]
)
def test_every_command_gives_one_line_and_exit_2(
    kind: str, trained: DataDir, tmp_path: Path
) -> None:
    path = trained.catalog_path
    DAMAGE[kind](path)
    damaged = sha256_of(path)
    failures = []
    for args in _commands(tmp_path):
        result = runner.invoke(app, args)
        lines = result.output.strip().splitlines()
        errors = [line for line in lines if line.startswith("error:")]
        if result.exit_code != 2 or len(errors) != 1 or "Traceback" in result.output or (
            "damaged" not in errors[0]
        ):
            failures.append((args, result.exit_code, result.output[-300:]))
        assert sha256_of(path) == damaged, args  # nothing was written into it
    assert not failures, failures


@pytest.mark.parametrize("kind", SCHEMA_DAMAGE)
def test_catalog_check_names_the_schema_problem(kind: str, trained: DataDir) -> None:
    DAMAGE[kind](trained.catalog_path)
    result = runner.invoke(app, ["catalog", "check"])
    assert result.exit_code == 2 and "damaged" in result.output, result.output
    assert "catalog rebuild" in result.output


def test_catalog_check_of_a_fresh_data_directory_is_no_damage(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh data directory has no catalog yet: `catalog check` called it damaged (issue 25)."""
    result = runner.invoke(app, ["catalog", "check"])
    assert (result.exit_code, result.output) == (0, f"no catalog yet in {home}: nothing measured or "
                                                    "trained here, nothing to check\n")
    assert not (home / "catalog.sqlite3").exists()


def test_catalog_check_of_a_lost_catalog_is_damage(trained: DataDir) -> None:
    """Beside measurements and models, a missing catalog is a lost one."""
    trained.catalog_path.unlink()
    result = runner.invoke(app, ["catalog", "check"])
    assert result.exit_code == 2 and "missing or empty" in result.output, result.output


@pytest.mark.parametrize("kind", DAMAGE)
def test_every_endpoint_gives_one_json_error(
    kind: str, trained: DataDir, make_app: Callable[..., FastAPI]
) -> None:
    DAMAGE[kind](trained.catalog_path)
    workload = {"write_ratio": 0.3, "queue_depth": 4, "request_size": 4096, "randomness": 1}
    requests = [
        ("GET", "/v1/devices", {}),
        ("GET", f"/v1/devices/{DEVICE}", {}),
        ("GET", f"/v1/devices/{DEVICE}/models", {}),
        ("POST", "/v1/predict", {"json": {"device": DEVICE, "workload": workload}}),
        ("POST", "/v1/fleet/predict", {"json": {"all_devices": True, "workloads": [workload]}}),
        ("POST", "/v1/devices/new/sweeps", {"files": {"file": ("m.csv", CSV)}}),
        ("DELETE", f"/v1/devices/{DEVICE}", {}),
        ("GET", "/readyz", {}),
    ]
    with TestClient(make_app(), raise_server_exceptions=False) as client:
        for method, url, kwargs in requests:
            r = client.request(method, url, **kwargs)
            assert r.status_code != 500 and r.status_code >= 400, (url, r.status_code, r.text)
            body = r.json()
            assert "error" in body or url == "/readyz", (url, r.text)


def test_failed_ingest_leaves_no_empty_device(trained: DataDir, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,abc\n")
    result = runner.invoke(app, ["ingest", "--device", "fresh", str(bad)])
    assert result.exit_code == 2
    assert "fresh" not in [d.name for d in trained.catalog.list_devices()]
    _sql("DROP TABLE points")(trained.catalog_path)
    good = tmp_path / "good.csv"
    good.write_bytes(CSV)
    result = runner.invoke(app, ["ingest", "--device", "fresh2", str(good)])
    assert result.exit_code == 2
    conn = sqlite3.connect(trained.catalog_path)
    assert conn.execute("SELECT COUNT(*) FROM devices WHERE name LIKE 'fresh%'").fetchone()[0] == 0
    conn.close()
