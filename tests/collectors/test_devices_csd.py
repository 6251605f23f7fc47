"""CSD paths with a real `fio --server` on loopback standing in for the drive's own Linux."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from collectors.devices.csd import combine_concurrent, run_concurrent, run_concurrent_timed
from collectors.fio.results import parse_fio_output
from collectors.ingest import ingest_bytes
from collectors.fio.runner import run_fio
from modeling.errors import FioError, InvalidInput
from modeling.store import DataDir
from tests.device_fixtures import free_port


def job(path: Path, rw: str = "randread", runtime: str = "1s") -> str:
    """A small fio job on a temp file (psync: works on any file system)."""
    return (
        "[global]\nioengine=psync\ndirect=0\nsize=16m\ntime_based=1\n"
        f"runtime={runtime}\nbs=4k\nfilename={path}\n[point]\nrw={rw}\n"
    )


def test_internal_path_runs_in_the_fio_server(fio_server: str, tmp_path: Path, datadir: DataDir) -> None:
    drive = tmp_path / "in-drive.dat"
    text = run_fio(job(drive), remote=fio_server, timeout=60)
    assert '"client_stats"' in text
    (result,) = parse_fio_output(text)
    assert result.row["iops"] > 0 and result.workload.write_ratio == 0.0
    assert drive.stat().st_size == 16 * 1024 * 1024  # the server, not the host job, laid it out
    # client/server output imports like any fio result
    sweep = ingest_bytes(datadir, "csd-internal", "internal.json", text.encode(), device_class="csd")
    assert sweep.n_points == 1
    assert datadir.catalog.measurements("csd-internal")["iops"].iloc[0] == pytest.approx(result.row["iops"])


def test_concurrent_runs_both_sides_at_once_and_sums_them(fio_server: str, tmp_path: Path) -> None:
    external, internal = tmp_path / "host.dat", tmp_path / "drive.dat"
    run = run_concurrent_timed(job(external, runtime="2s"), job(internal, "randwrite", runtime="2s"),
                               fio_server, timeout=60)
    ext = parse_fio_output(run.external_json)[0]
    intl = parse_fio_output(run.internal_json)[0]
    assert '"jobs"' in run.external_json and '"client_stats"' in run.internal_json
    assert ext.workload.write_ratio == 0.0 and intl.workload.write_ratio == 1.0
    # launched together: the whole run is shorter than the two sides one after the other
    span = max(run.external.ended, run.internal.ended) - min(run.external.started, run.internal.started)
    durations = (run.external.ended - run.external.started) + (run.internal.ended - run.internal.started)
    assert span < durations
    # the slower-starting client side is launched first, and the I/O windows overlap
    assert run.internal.started < run.external.started
    assert run.overlap_s > 0 and 0 < run.overlap_ratio <= 1

    row = combine_concurrent(ext.row, intl.row, run=run)
    assert row["iops"] == pytest.approx(ext.row["iops"] + intl.row["iops"])
    assert row["bandwidth_mib_s"] == pytest.approx(ext.row["bandwidth_mib_s"] + intl.row["bandwidth_mib_s"])
    e, i = ext.row, intl.row
    expected = (e["iops"] * e["latency_mean_us"] + i["iops"] * i["latency_mean_us"]) / (e["iops"] + i["iops"])
    assert row["latency_mean_us"] == pytest.approx(expected)
    lo, hi = sorted((ext.row["latency_p99_us"], intl.row["latency_p99_us"]))
    assert lo <= row["latency_p99_us"] <= hi
    assert row["read_iops"] == pytest.approx(e["iops"]) and row["write_iops"] == pytest.approx(i["iops"])
    assert row["write_ratio"] == 0.0 and row["read_size"] == 4096  # the host side's workload
    assert row["external_iops"] == ext.row["iops"] and row["internal_iops"] == intl.row["iops"]
    assert row["concurrent_overlap_s"] == run.overlap_s and row["csd_path"] == "concurrent"
    assert 0 < row["measured_write_ratio"] < 1


def test_concurrent_failure_names_the_side(fio_server: str, tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(FioError, match="^internal side: fio failed"):
        run_concurrent(job(tmp_path / "a.dat", runtime="500ms"), job(tmp_path / "b.dat"), dead, timeout=30,
                       internal_lead_s=0.0)
    with pytest.raises(InvalidInput, match="invalid remote"):
        run_concurrent(job(tmp_path / "a.dat"), job(tmp_path / "b.dat"), "host:port:x", timeout=30)


def _row(iops: float, lat: float, p50: float, p99: float, rw: str = "read") -> dict[str, float]:
    other = "write" if rw == "read" else "read"
    return {
        "write_ratio": 0.0 if rw == "read" else 1.0, "queue_depth": 8, "iops": iops,
        "bandwidth_mib_s": iops / 256,
        "latency_mean_us": lat, "latency_p50_us": p50, "latency_p90_us": p50 * 1.5, "latency_p99_us": p99,
        "latency_p99_9_us": p99 * 2, f"{rw}_iops": iops, f"{rw}_latency_mean_us": lat,
        f"{rw}_bandwidth_mib_s": iops / 256, f"{other}_iops": 0.0, f"{other}_latency_mean_us": math.nan,
        f"{other}_bandwidth_mib_s": 0.0,
    }


def test_combine_concurrent_weights_latency_by_iops() -> None:
    ext, intl = _row(300, 10.0, 8, 40), _row(100, 50.0, 8, 40, rw="write")
    row = combine_concurrent(ext, intl)
    assert row["iops"] == 400 and row["bandwidth_mib_s"] == pytest.approx(400 / 256)
    assert row["latency_mean_us"] == pytest.approx((300 * 10 + 100 * 50) / 400)
    assert row["latency_p50_us"] == pytest.approx(8) and row["latency_p99_us"] == pytest.approx(40)
    assert row["read_iops"] == 300 and row["write_iops"] == 100 and row["measured_write_ratio"] == 0.25
    assert row["write_latency_mean_us"] == 50.0 and row["read_latency_mean_us"] == 10.0
    assert row["external_latency_mean_us"] == 10.0 and row["internal_write_iops"] == 100
    assert row["write_ratio"] == 0.0 and row["queue_depth"] == 8  # the host side's workload
    with pytest.raises(InvalidInput, match="internal row has no iops"):
        combine_concurrent(ext, {"latency_mean_us": 3.0})


def test_fake_runner_lead_is_learned_from_the_measured_skew() -> None:
    """A drive whose fio --client takes 0.4 s longer to start I/O than local fio."""
    from collectors.devices import csd

    def fake_fio(job_text: str, *, remote: str | None = None, timeout: float = 0) -> str:
        time.sleep(0.4 if remote else 0.0)  # start-up cost before the I/O begins
        time.sleep(0.3)  # the I/O itself
        key = "client_stats" if remote else "jobs"
        return '{"%s": [{"jobname": "point", "job_runtime": 300}]}' % key

    remote = "127.0.0.1:65001"
    csd._learned_lead.pop(remote, None)
    first = run_concurrent_timed("ext", "int", remote, timeout=10, runner=fake_fio)
    assert first.overlap_s == 0  # the default 1 s lead overshoots this drive
    second = run_concurrent_timed("ext", "int", remote, timeout=10, runner=fake_fio)
    assert second.overlap_ratio > 0.7
    assert abs(second.start_skew_s) < 0.1
    fixed = run_concurrent_timed("ext", "int", remote, timeout=10, runner=fake_fio, internal_lead_s=0.0)
    assert fixed.start_skew_s == pytest.approx(0.4, abs=0.1)
