"""A damaged catalog: detected on open, nothing written, one-line CLI error, 503, and a rebuild.

Real SQLite files damaged the ways the field damages them; the CLI through typer's runner,
the API through the test client.
"""

from __future__ import annotations

import os
import random
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


def _bad_header(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.write(b"this is no db...")


def _truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(1).randbytes(path.stat().st_size))


def _damaged_page(path: Path) -> None:
    with open(path, "r+b") as fh:  # pages 2-4 (4 KiB pages): table roots and interior pages
        fh.seek(4096)
        fh.write(random.Random(2).randbytes(3 * 4096))


def _byte_flips(path: Path) -> None:
    rng = random.Random(3)
    data = bytearray(path.read_bytes())
    for offset in rng.sample(range(100, len(data)), 64):  # past the 100-byte header
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _zero_bytes(path: Path) -> None:
    os.truncate(path, 0)


DAMAGE = [_bad_header, _truncated, _random_bytes, _damaged_page, _byte_flips, _zero_bytes]


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_damage_is_refused_everywhere_and_the_rebuild_restores_the_catalog(
    damage: Callable[[Path], None], trained: DataDir, make_app: Callable[..., FastAPI], tmp_path: Path
) -> None:
    before = {
        "sweeps": [(s.id, s.n_points, s.source) for s in trained.catalog.list_sweeps(DEVICE)],
        "device": trained.catalog.get_device(DEVICE),
        "active": trained.catalog.active_model_version(DEVICE),
    }
    path = trained.catalog_path
    assert not Path(f"{path}-wal").exists()  # everything is in the main file
    damage(path)
    damaged = sha256_of(path)
    csv = tmp_path / "more.csv"
    csv.write_bytes(CSV)
    for args in (["devices"], ["devices", "show", DEVICE], ["ingest", "--device", DEVICE, str(csv)],
                 ["train", "--device", DEVICE]):
        code, output = _cli(*args)
        assert code == 2, (args, output)
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "damaged" in errors[0] and "catalog rebuild" in errors[0], output
        assert "Traceback" not in output
        assert sha256_of(path) == damaged  # nothing was written into it
    with TestClient(make_app(), raise_server_exceptions=False) as client:
        r = client.get("/v1/devices")
        assert r.status_code == 503 and r.json()["error"]["code"] == "catalog_corrupt", r.text
        r = client.post("/v1/devices/x/sweeps", files={"file": ("m.csv", CSV)})
        assert r.status_code == 503, r.text
    assert sha256_of(path) == damaged

    code, output = _cli("catalog", "rebuild")
    assert code == 0, output
    assert "rebuilt the catalog" in output
    catalog = DataDir(trained.root).catalog
    assert [(s.id, s.n_points, s.source) for s in catalog.list_sweeps(DEVICE)] == before["sweeps"]
    device, old = catalog.get_device(DEVICE), before["device"]
    assert (device.device_class, device.metadata) == (old.device_class, old.metadata)
    active = catalog.active_model_version(DEVICE)
    assert active is not None and before["active"] is not None
    assert (active.version, active.manifest) == (before["active"].version, before["active"].manifest)
    assert list(trained.root.glob("catalog.sqlite3.damaged-*"))  # kept for inspection
    code, output = _cli("predict", "--device", DEVICE, "--write-ratio", "0.3", "--queue-depth", "4",
                        "--request-size", "4k", "--randomness", "1")
    assert code == 0, output
    assert _cli("catalog", "check") == (0, "catalog ok\n")


def test_a_healthy_catalog_is_not_rebuilt_without_force(trained: DataDir) -> None:
    code, output = _cli("catalog", "rebuild")
    assert code == 2 and "--force" in output


def test_schema_is_versioned_and_a_newer_one_is_refused(trained: DataDir) -> None:
    import sqlite3

    from modeling.store.schema import SCHEMA_VERSION

    conn = sqlite3.connect(trained.catalog_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    code, output = _cli("devices")
    assert code == 2 and "newer than this ssdpredict" in output


def test_a_catalog_from_before_versioning_is_migrated(home: Path) -> None:
    import sqlite3

    from modeling.store.schema import MIGRATIONS, SCHEMA_VERSION

    home.mkdir(parents=True)
    conn = sqlite3.connect(home / "catalog.sqlite3")
    conn.executescript(MIGRATIONS[0])  # the original schema, user_version 0
    conn.execute("INSERT INTO devices (name, class, metadata, created_at) VALUES ('old', 'ssd', '{}', 'x')")
    conn.commit()
    conn.close()
    catalog = DataDir(home).catalog
    assert [d.name for d in catalog.list_devices()] == ["old"]
    conn = sqlite3.connect(home / "catalog.sqlite3")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0
    conn.close()


def test_an_imported_csv_sweep_comes_back_with_its_records(datadir: DataDir, tmp_path: Path) -> None:
    """A streamed import writes its Parquet before the sweep exists: its records go beside it."""
    from collectors.ingest import ingest_paths

    csv = tmp_path / "runs.csv"
    csv.write_bytes(CSV)
    datadir.catalog.ensure_device("imported", "raid", {"level": 5})
    sweep = ingest_paths(datadir, "imported", [csv])
    (parquet,) = (datadir.measurements_dir / "imported").glob("sweep-*.parquet")
    assert parquet.with_suffix(".record.json").is_file()
    before = datadir.catalog.list_sweeps("imported")
    (datadir.root / "catalog.sqlite3").unlink()

    code, output = _cli("catalog", "rebuild", "--force")
    assert code == 0, output
    assert "no provenance" not in output
    catalog = DataDir(datadir.root).catalog
    device = catalog.get_device("imported")
    assert (device.device_class, device.metadata) == ("raid", {"level": 5})
    after = catalog.list_sweeps("imported")
    assert [(s.id, s.n_points, s.source, s.info.get("files")) for s in after] == [
        (s.id, s.n_points, s.source, s.info.get("files")) for s in before
    ]
    assert sweep.id == after[0].id
    # deleting the sweep takes its records with it
    assert _cli("sweeps", "delete", str(sweep.id), "--yes")[0] == 0
    assert not parquet.with_suffix(".record.json").exists()
