"""Large CSV imports (issue 12, item 7): streamed in chunks, all or nothing, not copied into
the catalog, and refused above a size limit with the numbers."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from collectors.ingest import csv_fast, csv_stream, ingest_paths
from collectors.ingest.csv_stream import exact_frames, iter_csv_frames
from modeling.errors import InvalidInput, TooLarge, UnknownDevice
from modeling.store import DataDir
from service.cli.main import app

HEADER = "write_ratio,queue_depth,request_size,randomness,numjobs,iops,latency_mean_us,latency_p99_us\n"


def _rows(n: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "write_ratio": rng.random(n),
            "queue_depth": rng.choice([1, 4, 32], n),
            "request_size": rng.choice([4096, 65536], n),
            "randomness": rng.random(n),
            "numjobs": rng.choice([1, 8], n),
            "iops": rng.uniform(1e3, 1e5, n),
            "latency_mean_us": rng.uniform(10, 1e4, n),
            "latency_p99_us": rng.uniform(1e4, 1e5, n),
        }
    )
    return frame.to_csv(index=False, header=False)


N_ROWS = 12_000


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 1,000 rows and blocks of 64 KiB, so a 2 MB file is many of each."""
    monkeypatch.setattr(csv_stream, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(csv_fast, "BLOCK_BYTES", 64 << 10)


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 2 MB, 12,000 rows: many fast-path blocks and exact-path chunks."""
    path = tmp_path_factory.mktemp("big") / "big.csv"
    path.write_text(HEADER + _rows(N_ROWS))
    return path


def _state(datadir: DataDir) -> tuple[list[str], int]:
    files = sorted(str(p.relative_to(datadir.root)) for p in datadir.root.rglob("*") if p.is_file())
    with sqlite3.connect(datadir.catalog_path) as conn:
        tables = ("devices", "sweeps", "points")
        rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)
    return [f for f in files if not f.startswith("catalog.sqlite3")], rows


def test_big_csv_is_stored_in_parquet_not_in_the_catalog(datadir: DataDir, big_csv: Path) -> None:
    sweep = ingest_paths(datadir, "big", [big_csv])
    assert sweep.n_points == N_ROWS == sweep.info["n_rows"]
    frame = datadir.catalog.measurements("big")
    source = pd.read_csv(big_csv)
    assert len(frame) == N_ROWS and (frame["sweep_id"] == sweep.id).all()
    np.testing.assert_array_equal(frame["iops"].to_numpy(), source["iops"].to_numpy())
    assert frame["seq"].tolist() == list(range(N_ROWS))
    with sqlite3.connect(datadir.catalog_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 0
    assert datadir.catalog_path.stat().st_size < 1 << 20  # the points rows took about 7.5 MB


def test_csv_is_read_in_chunks(big_csv: Path) -> None:
    def opener() -> io.BufferedReader:
        return open(big_csv, "rb")

    fast = [len(f) for f in iter_csv_frames(opener, "big.csv")]
    exact = [len(f) for f in exact_frames(opener, "big.csv")]
    assert len(fast) > 1 and len(exact) > 1 and sum(fast) == sum(exact) == N_ROWS
    assert max(exact) <= 1000


def test_fast_and_exact_readers_give_the_same_rows(big_csv: Path) -> None:
    def opener() -> io.BufferedReader:
        return open(big_csv, "rb")

    fast = pd.concat(list(iter_csv_frames(opener, "b")), ignore_index=True)
    exact = pd.concat(list(exact_frames(opener, "b")), ignore_index=True)
    pd.testing.assert_frame_equal(fast, exact)


def test_a_late_irregular_line_hands_over_to_the_exact_reader(datadir: DataDir, tmp_path: Path) -> None:
    path = tmp_path / "late.csv"
    path.write_text(HEADER + _rows(10_000) + '"0.5",4,16k,1,,9000,100,\n')
    sweep = ingest_paths(datadir, "late", [path])
    frame = datadir.catalog.measurements("late")
    assert sweep.n_points == len(frame) == 10_001
    assert frame["request_size"].iloc[-1] == 16384 and frame["numjobs"].iloc[-1] == 1
    assert frame["seq"].is_unique


BAD_ROWS = ["0.5,4,4096,1,1,-3,100,200", "0.5,4,4096,1,1,9000,100", "0.5,0,4096,1,1,9,1,2"]


@pytest.mark.parametrize("bad", BAD_ROWS)
def test_a_bad_last_row_stores_nothing_and_names_its_line(datadir: DataDir, tmp_path: Path, bad: str) -> None:
    ingest_paths(datadir, "dev", [_small(tmp_path)])
    before = _state(datadir)
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + _rows(10_000) + bad + "\n")
    with pytest.raises(InvalidInput, match=r"bad.csv, line 10002: .*nothing was stored"):
        ingest_paths(datadir, "dev", [path])
    assert _state(datadir) == before
    with pytest.raises(InvalidInput):
        ingest_paths(datadir, "new-dev", [path])
    with pytest.raises(UnknownDevice):
        datadir.catalog.get_device("new-dev")
    assert _state(datadir) == before


def _small(tmp_path: Path) -> Path:
    path = tmp_path / "small.csv"
    path.write_text(HEADER + _rows(3, seed=1))
    return path


def test_size_limit_refuses_before_reading(datadir: DataDir, big_csv: Path) -> None:
    size = big_csv.stat().st_size
    message = rf"big.csv: {size:,} bytes is over the import limit of 1,048,576 bytes"
    with pytest.raises(TooLarge, match=message):
        ingest_paths(datadir, "big", [big_csv], max_bytes=1 << 20)
    with pytest.raises(UnknownDevice):
        datadir.catalog.get_device("big")


def test_cli_max_bytes_and_its_setting(
    datadir: DataDir, big_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "-d", "big", "--max-bytes", "1m", str(big_csv)])
    assert result.exit_code == 2 and "over the import limit of 1,048,576 bytes" in result.output
    monkeypatch.setenv("SSDPREDICT_MAX_INGEST_BYTES", "1000")
    from service.config import get_settings

    get_settings.cache_clear()
    result = runner.invoke(app, ["ingest", "-d", "big", str(big_csv)])
    assert result.exit_code == 2 and "over the import limit of 1,000 bytes" in result.output
    result = runner.invoke(app, ["ingest", "-d", "big", "--max-bytes", "1g", str(big_csv)])
    assert result.exit_code == 0, result.output
    assert f"stored {N_ROWS} points" in result.output
    result = runner.invoke(app, ["ingest", "-d", "big", "--max-bytes", "lots", str(big_csv)])
    assert result.exit_code == 2 and "invalid --max-bytes 'lots'" in result.output
