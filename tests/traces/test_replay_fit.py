"""Replay fidelity: sizes and offsets a target cannot take are counted, rounded up or refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.errors import InvalidInput
from modeling.store import DataDir
from service.cli.main import app
from tests.device_fixtures import reference_or_skip
from tests.traces.helpers import write_generic
from traces.chunks import TraceChunk
from traces.replay.iolog import remap
from traces.replay.run import replay
from traces.validate.compare import validate_trace

MIB = 1 << 20


def _thousand_bytes(path: Path, n: int = 200, span_s: float = 0.5) -> Path:
    """A trace of 1,000-byte requests (no block device takes that size), 400 IO/s, 30 % writes."""
    rng = np.random.default_rng(11)
    t = np.linspace(0, span_s, n)
    off = rng.integers(0, 8 * MIB // 4096, n) * 4096
    return write_generic(path, t, rng.random(n) < 0.3, off, np.full(n, 1000))


def test_remap_counts_what_it_changes() -> None:
    off = np.array([0, 4096, 1000, 64 * MIB])  # a misaligned one and one beyond a 16 MiB target
    c = TraceChunk.build(np.arange(4.0), np.zeros(4, bool), off, np.array([4096, 1000, 4096, 8192]))
    out, fit = remap(c, 16 * MIB, 4096)
    assert out.size.tolist() == [4096, 4096, 4096, 8192]
    assert (fit.resized, fit.bytes_added, fit.trace_bytes, fit.replayed_bytes) == (1, 3096, 17384, 20480)
    assert (fit.realigned, fit.wrapped, fit.dropped) == (1, 1, 0)
    assert fit.trace_size.tolist() == [4096, 1000, 4096, 8192]
    text = " ".join(fit.warnings())
    assert "1 of 4 requests" in text and "3096 bytes added" in text and "beyond the target" in text
    with pytest.raises(InvalidInput, match=r"1 of 4 requests .*\(3096 bytes short\)"):
        remap(c, 16 * MIB, 4096, "refuse")
    clean, fit = remap(c.take(np.array([0])), 16 * MIB, 512, "refuse")
    assert fit.warnings() == [] and clean.size.tolist() == [4096]


def test_remap_reports_requests_larger_than_the_target() -> None:
    c = TraceChunk.build(np.arange(2.0), np.zeros(2, bool), np.zeros(2, np.int64), np.array([4096, 32 * MIB]))
    out, fit = remap(c, 16 * MIB, 512)
    assert len(out) == 1 and (fit.dropped, fit.dropped_bytes) == (1, 32 * MIB)
    assert any("larger than the target" in w for w in fit.warnings())
    with pytest.raises(InvalidInput, match="1 are larger than the target"):
        remap(c, 16 * MIB, 512, "refuse")


def test_thousand_byte_requests_replay_as_1024_on_a_file(tmp_path: Path, fio_available: str) -> None:
    trace = _thousand_bytes(tmp_path / "k.csv")
    result = replay(str(trace), str(tmp_path / "t.img"), window_s=0.25, size=16 * MIB, lanes=2, slip_us=0.0)
    assert result.fit is not None and (result.fit.block, result.fit.resized) == (512, 200)
    assert result.fit.bytes_added == 200 * 24
    assert any("200 of 200 requests" in w and "4800 bytes added" in w for w in result.warnings)
    # fio issued the rounded size, and the windows count both byte totals
    assert set(result.log["bs"]) == {1024}
    assert result.windows["replayed_bytes"].sum() == 200 * 1024
    assert result.windows["trace_bytes"].sum() == 200 * 1000
    assert result.to_dict()["fit"]["bytes_added"] == 4800


def test_refuse_stops_before_fio_and_the_cli_says_so_in_one_line(tmp_path: Path, fio_available: str) -> None:
    trace = _thousand_bytes(tmp_path / "k.csv")
    target = tmp_path / "t.img"
    with pytest.raises(InvalidInput, match="200 of 200 requests"):
        replay(str(trace), str(target), size=16 * MIB, resize="refuse")
    assert not target.exists()  # refused before the target was created
    cmd = ["trace", "replay", str(trace), "--target", str(target), "--resize"]
    r = CliRunner().invoke(app, [*cmd, "refuse"])
    assert r.exit_code == 2, r.output
    assert "200 of 200 requests" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, [*cmd, "split"])
    assert r.exit_code == 2 and "unknown resize rule 'split'" in r.output


def test_zram_replays_thousand_byte_requests_as_4_kib(tmp_path: Path, fio_available: str) -> None:
    with reference_or_skip(DataDir(tmp_path / "home"), "zram", 16 * MIB) as ref:
        result = replay(str(_thousand_bytes(tmp_path / "k.csv")), ref.path, destroy_data=True, window_s=0.25,
                        lanes=2, slip_us=0.0)
    assert result.fit is not None and (result.fit.block, result.fit.resized) == (4096, 200)
    assert result.fit.bytes_added == 200 * 3096 and set(result.log["bs"]) == {4096}
    assert any("200 of 200 requests" in w and "619200 bytes added" in w for w in result.warnings)


def test_validation_compares_bandwidth_with_the_bytes_replayed(trained: DataDir, tmp_path: Path,
                                                               fio_available: str) -> None:
    trace = _thousand_bytes(tmp_path / "k.csv", n=400, span_s=1.0)
    report = validate_trace(trained, "synth", trace, target=str(tmp_path / "t.img"), window_s=0.5,
                            device_check=False, lanes=2)
    df = report.windows
    ratio = df["replayed_bytes"] / df["trace_bytes"]
    assert np.allclose(ratio, 1.024)
    assert np.allclose(df["pred_bandwidth_mib_s"], df["pred_bandwidth_trace_mib_s"] * 1.024)
    assert report.summary["replayed_bytes"] == {"trace": 400_000, "replayed": 409_600,
                                                "added_fraction": pytest.approx(0.024)}
    errors = report.summary["errors"]
    # the same windows (those the busy machine did not hold back), both comparisons
    assert errors["bandwidth_mib_s"]["n"] == errors["bandwidth_mib_s_at_trace_sizes"]["n"]
    assert any("bytes added" in w for w in report.warnings)


def test_validate_refuses_before_the_device_check_claims_the_target(trained: DataDir, tmp_path: Path) -> None:
    target = tmp_path / "t.img"
    with pytest.raises(InvalidInput, match="200 of 200 requests"):
        validate_trace(trained, "synth", _thousand_bytes(tmp_path / "k.csv"), target=str(target),
                       window_s=0.5, resize="refuse")
    assert not target.exists()
