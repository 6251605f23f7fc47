"""``trace headroom``: the largest speed-up of a trace's time line under an SLO, held to ``trace predict``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.traces.helpers import write_generic
from traces.capacity.headroom import trace_headroom
from traces.capacity.mix_latency import scaled_gaps
from traces.capacity.slo import parse_slo
from traces.predict.windows import predict_trace
from traces.stats import GAP_EDGES, gap_histogram

RATES = (1000.0, 4000.0, 2000.0)  # three segments of N requests each: the 4,000 IO/s one breaks first
N = 600
SLO = "p99<=120us"


def _trace(path: Path, speedup: float = 1.0, seed: int = 7) -> Path:
    """Poisson arrivals of 4 KiB random reads, segment by segment, ``speedup`` x faster."""
    rng = np.random.default_rng(seed)
    gaps = np.concatenate([rng.exponential(1 / r, N) for r in RATES])
    t = np.cumsum(gaps) / speedup
    n = len(t)
    offset = rng.integers(0, 2**20, n) * 4096
    return write_generic(path, t, np.zeros(n, bool), offset, np.full(n, 4096))


def _predicted_p99(trained: DataDir, path: Path) -> np.ndarray:
    result, _ = predict_trace(trained, "synth", path, window_s=None, window_requests=N)
    return result.windows["pred_latency_p99_us"].to_numpy()


def test_headroom_is_where_trace_predict_crosses_the_target(trained: DataDir, tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.csv")
    h = trace_headroom(trained, "synth", path, parse_slo(SLO), window_s=None, window_requests=N)
    assert h.outcome == "limited" and h.windows == 3 and h.allowed_to_break == 0
    assert h.breaking_first[0]["window"] == 1 and h.binding_window["window"] == 1  # the busiest segment
    assert [w["window"] for w in h.breaking_first] == list(np.argsort(h.table["speedup"].to_numpy()))
    assert h.speedup_lower <= h.speedup <= h.speedup_upper
    # the same trace replayed 1 % slower than the headroom meets the target in every window
    # (trace predict's own path), and 3 % faster breaks it in the binding window
    assert (_predicted_p99(trained, _trace(tmp_path / "slow.csv", h.speedup * 0.99)) <= 120).all()
    over = _predicted_p99(trained, _trace(tmp_path / "fast.csv", h.speedup * 1.03))
    assert over[1] > 120


def test_a_share_lets_the_first_window_break(trained: DataDir, tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.csv")
    every = trace_headroom(trained, "synth", path, parse_slo(SLO), window_s=None, window_requests=N)
    most = trace_headroom(trained, "synth", path, parse_slo(SLO), share=0.6, window_s=None, window_requests=N)
    assert most.allowed_to_break == 1 and most.speedup > every.speedup
    # the second window to break binds: the 2,000 IO/s segment
    assert most.binding_window["window"] == 2
    assert most.speedup == pytest.approx(sorted(every.table["speedup"])[1], rel=1e-3)


def test_gaps_scale_with_the_speedup() -> None:
    t = np.cumsum(np.random.default_rng(1).exponential(1e-3, 2000))
    g = np.zeros(len(t), dtype=np.int64)
    hist = gap_histogram(t, g, 1)[0]
    fast = gap_histogram(t / 10, g, 1)[0]
    moved = scaled_gaps(hist, 10.0)
    assert moved.sum() == hist.sum()
    # the same counts, within one bin (the bins are a factor 10**0.1 wide)
    centre = np.log10(GAP_EDGES[1:] * GAP_EDGES[:-1]) / 2
    mean = lambda h: float((h[1:-1] * centre).sum() / h[1:-1].sum())  # noqa: E731
    assert mean(moved) == pytest.approx(mean(fast), abs=0.1)
    assert scaled_gaps(hist, 1.0) is hist


def test_trace_headroom_cli(trained: DataDir, tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.csv")
    base = ["trace", "headroom", str(path), "-d", "synth", "--window-requests", str(N)]
    args = [*base, "--slo", SLO]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["binding_window"]["window"] == 1 and len(doc["window_table"]) == 3
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "faster" in res.output and "break first" in res.output
    for bad, message in (
        ([*args, "--share", "0"], "share"),
        ([*base, "--slo", "p99<=1"], "give the limit a unit"),
    ):
        res = CliRunner().invoke(app, bad)
        assert res.exit_code == 2 and message in res.output, res.output
