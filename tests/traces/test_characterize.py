"""Characterisation on traces whose answers are known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from modeling.workload import WORKLOAD_FIELDS, Workload
from service.cli.main import app
from tests.traces.helpers import DATA, sequential_writes, write_blktrace, write_generic
from traces.characterize import characterize, characterize_chunks
from traces.chunks import TraceChunk, TraceInfo


@pytest.mark.parametrize("depth", [1, 4, 16])
def test_sequential_64k_writes_at_known_depth(tmp_path: Path, depth: int) -> None:
    t, w, off, size, done = sequential_writes(4000, 65536, depth, latency_s=0.002)
    path = write_generic(tmp_path / "seq.csv", t, w, off, size, complete=done)
    r = characterize(str(path), window_s=float(t[-1]) / 6)
    inner = r.windows.iloc[1:-1]  # the first window ramps up, the last is cut short
    assert len(inner) >= 2
    assert (inner["write_ratio"] == 1.0).all()
    assert (inner["randomness"] == 0.0).all() and (inner["write_randomness"] == 0.0).all()
    assert (inner["request_size"] == 65536).all() and (inner["write_size"] == 65536).all()
    assert (inner["queue_depth"] == depth).all()
    assert inner["queue_depth_raw"].to_numpy() == pytest.approx(depth, rel=1e-3)
    assert inner["iops"].to_numpy() == pytest.approx(depth / 0.002, rel=1e-3)
    assert inner["latency_mean_us"].to_numpy() == pytest.approx(2000, rel=1e-6)
    s = r.summary
    assert s["qd_method"] == "pairs" and s["workload"]["queue_depth"] == depth
    assert s["workload"]["randomness"] == pytest.approx(1 / 4000)  # only the very first request


def test_littles_law_from_response_times(tmp_path: Path) -> None:
    t, w, off, size, done = sequential_writes(2000, 4096, 8, latency_s=0.001)
    path = write_generic(tmp_path / "rt.csv", t, ~w, off, size, latency_us=np.full(2000, 1000.0))
    r = characterize(str(path), window_requests=500)
    assert (r.windows["qd_method"] == "littles_law").all()
    assert (r.windows["queue_depth"].iloc[:-1] == 8).all()
    assert (r.windows["write_ratio"] == 0).all() and (r.windows["read_size"] == 4096).all()
    assert r.windows["requests"].tolist() == [500, 500, 500, 500]


def test_mixed_random_workload_known_fractions() -> None:
    rng = np.random.default_rng(1)
    n = 10_000
    is_w = np.arange(n) % 4 == 0  # exactly 25 % writes
    size = np.where(is_w, 16384, 4096)
    # Reads: sequential within their own stream; writes: random 4 KiB-aligned offsets.
    off = np.zeros(n, dtype=np.int64)
    reads = np.flatnonzero(~is_w)
    off[reads] = np.arange(len(reads)) * 4096
    off[is_w] = (rng.integers(0, 1 << 20, is_w.sum()) * 4096) + (1 << 40)
    t = np.arange(n) * 1e-4
    chunks = [
        TraceChunk.build(t[i : i + 777], is_w[i : i + 777], off[i : i + 777], size[i : i + 777])
        for i in range(0, n, 777)
    ]  # odd chunk size: windows straddle chunks
    r = characterize_chunks(TraceInfo("test"), iter(chunks), window_s=0.25)
    win = r.windows
    assert win["requests"].sum() == n and len(win) == 4
    assert win["write_ratio"].to_numpy() == pytest.approx(0.25, abs=1e-3)
    assert (win["read_randomness"].iloc[1:] == 0).all()
    assert win["write_randomness"].to_numpy() == pytest.approx(1.0, abs=1e-3)
    assert (win["read_size"] == 4096).all() and (win["write_size"] == 16384).all()
    assert (win["request_size"] == 7168).all()  # 0.75 * 4096 + 0.25 * 16384
    assert (win["qd_method"] == "burst").all() and (win["queue_depth"] == 1).all()


def test_window_rows_are_valid_workloads() -> None:
    r = characterize(str(DATA / "wsrch-small.trace"), window_s=5.0)
    for row in r.windows.to_dict(orient="records"):
        Workload.from_row(row)
    assert list(r.windows.columns[:12]) == ["window_start_s", "window_end_s", "requests", *WORKLOAD_FIELDS]


def test_cli_characterize_csv_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "w.csv"
    res = runner.invoke(
        app, ["trace", "characterize", str(DATA / "sample.blktrace.0"), "--window", "100ms", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    df = pd.read_csv(out)
    assert len(df) == 4 and df["requests"].sum() == 963 and (df["write_ratio"] == 0).all()
    res = runner.invoke(app, ["trace", "characterize", str(DATA / "msr-sample.csv"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["summary"]["qd_method"] == "littles_law" and doc["summary"]["requests"] == 6
    res = runner.invoke(app, ["trace", "characterize", str(tmp_path / "missing.trace")])
    assert res.exit_code == 2 and "no such trace file" in res.output


@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_sequential_writes_in_blktrace_binary(tmp_path: Path, byteorder: str) -> None:
    t, w, off, size, done = sequential_writes(3000, 65536, 8, latency_s=0.004)
    path = write_blktrace(tmp_path / "seq.blktrace.0", t, w, off, size, done, byteorder)
    r = characterize(str(path), window_s=float(t[-1]) / 5)
    inner = r.windows.iloc[1:-1]
    assert r.info.format == "blktrace" and r.summary["requests"] == 3000
    assert (inner["write_ratio"] == 1).all() and (inner["randomness"] == 0).all()
    assert (inner["write_size"] == 65536).all() and (inner["queue_depth"] == 8).all()
    assert inner["latency_mean_us"].to_numpy() == pytest.approx(4000, rel=1e-6)


def test_cli_characterize_prints_tables_not_a_frame_dump() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["trace", "characterize", str(DATA / "sample.blkparse.txt"), "--window", "10ms"])
    assert res.exit_code == 0, res.output
    assert "trace summary" in res.output and "windows" in res.output
    # sizes and ratios read as a storage engineer writes them; no pandas column dump
    assert "4 KiB" in res.output and "100%" in res.output
    assert "window_end_s" not in res.output and "read_randomness  write_randomness" not in res.output
    many = runner.invoke(app, ["trace", "characterize", str(DATA / "wsrch-small.trace"), "--window", "1s"])
    assert many.exit_code == 0, many.output
    assert "more windows: -o FILE.csv or --json gives them all" in many.output
