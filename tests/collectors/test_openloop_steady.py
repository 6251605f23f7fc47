"""An open-loop point's steady part: its requests after a warm-up, from fio's per-I/O logs (real fio)."""

from __future__ import annotations

import json
import os
import subprocess
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collectors.fio.jobs import JobSettings
from collectors.fio.runner import run_fio
from collectors.sweep.openloop import build_open_loop_job, measure_open_point, realtime_prefix
from collectors.sweep.steady import steady_metrics
from modeling.errors import NoData
from modeling.workload import Workload


def _log(issue_ms: np.ndarray, lat_us: np.ndarray, ddir: np.ndarray) -> pd.DataFrame:
    lat_ns = lat_us * 1e3
    return pd.DataFrame(
        {
            "time_ms": np.floor(issue_ms + lat_ns / 1e6),
            "lat_ns": lat_ns,
            "ddir": ddir,
            "bs": np.full(len(issue_ms), 4096),
        }
    )


def test_the_steady_part_leaves_out_the_start() -> None:
    # a bucket's start-up: the first second's requests wait 50 ms, the next second's take 5 us
    issue = np.arange(0.0, 2000.0, 1.0)
    lat = np.where(issue < 1000, 50_000.0, 5.0)
    ddir = np.where(np.arange(len(issue)) % 4 == 0, 1, 0)  # a quarter writes
    row = steady_metrics(_log(issue, lat, ddir), warmup_ms=1000, measured_ms=1000)
    assert row["latency_mean_us"] == pytest.approx(5.0) and row["latency_p99_us"] == pytest.approx(5.0)
    assert row["iops"] == pytest.approx(1000, rel=0.01) and row["steady_requests"] == pytest.approx(
        1000, abs=2
    )
    assert row["write_iops"] == pytest.approx(250, rel=0.02) and row["measured_write_ratio"] == pytest.approx(
        0.25, abs=0.01
    )
    assert row["bandwidth_mib_s"] == pytest.approx(1000 * 4096 / 2**20, rel=0.01)
    # the whole run's mean would have been the start's
    assert float(np.mean(lat)) > 1000 * row["latency_mean_us"]
    with pytest.raises(NoData, match="warm-up"):
        steady_metrics(_log(issue[:10], lat[:10], ddir[:10]), warmup_ms=1000, measured_ms=1000)


def test_the_point_logs_into_the_folder_given_only(tmp_path: Path) -> None:
    w = Workload(write_ratio=0.0, queue_depth=1, numjobs=4, request_size=4096, randomness=1.0)
    settings = JobSettings(target=str(tmp_path / "t.img"), engine="psync")
    assert "write_lat_log" not in build_open_loop_job(w, 400, settings)
    job = build_open_loop_job(w, 400, settings, tmp_path)
    assert f"write_lat_log={tmp_path}/point\n" in job and "log_offset=1\n" in job


@pytest.mark.fio
def test_a_point_measures_its_requests_after_the_warm_up(tmp_path: Path, fio_available: str) -> None:
    target = tmp_path / "t.img"
    target.write_bytes(np.random.default_rng(0).integers(0, 256, 8 << 20, dtype=np.uint8).tobytes())
    w = Workload(write_ratio=0.0, queue_depth=1, numjobs=4, request_size=4096, randomness=1.0)
    job = JobSettings(target=str(target), engine="psync", size=8 << 20, runtime_ms=1000)
    row, raw = measure_open_point(w, 400, job, partial(run_fio, timeout=60), min_requests=100, warmup_ms=500)
    assert row["warmup_s"] == 0.5 and row["runtime_s"] == 1.0 and row["requested_iops"] == 400.0
    # the requests issued in the 1 s after the warm-up, of all that fio's JSON counts over 1.5 s
    # (how many fio keeps up with depends on the machine's load: not asserted)
    doc = json.loads(raw)
    total = sum(int(j[d]["total_ios"]) for j in doc["jobs"] for d in ("read", "write"))
    assert 0 < row["steady_requests"] < total and row["iops"] == row["steady_requests"] / 1.0
    assert 0 < row["latency_p50_us"] <= row["latency_p99_us"] and raw.lstrip().startswith("{")
    # the rate the latency belongs to: what fio offered, where it offered more than asked
    assert row["offered_iops"] == max(400.0, row["iops"])
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("ssdpredict-openloop-*/point_lat*"))


@pytest.mark.slow
@pytest.mark.fio
def test_near_the_cap_the_steady_part_meets_the_bucket_busy(tmp_path: Path, fio_available: str) -> None:
    """At 95 % of a 2,000 IO/s cap, waits for the bucket's next slice (milliseconds) come at the
    point's start: its steady part is served in microseconds, as a replay meets it."""
    from collectors.devices.throttle import throttle_support
    from modeling.store import DataDir
    from tests.device_fixtures import reference_or_skip

    if throttle_support() is None:
        pytest.skip("no block throttle here (cgroup v1 blkio or a v2 io controller)")
    with reference_or_skip(DataDir(tmp_path / "home"), "throttled", 16 << 20, iops=2000) as ref:
        subprocess.run(
            ["dd", "if=/dev/urandom", f"of={ref.path}", "bs=1M", "count=16", "oflag=direct"],
            check=True,
            capture_output=True,
        )
        w = Workload(write_ratio=0.0, queue_depth=1, numjobs=16, request_size=4096, randomness=1.0)
        job = JobSettings(target=ref.path, engine="psync", size=16 << 20, runtime_ms=1000)
        run = partial(run_fio, prefix=realtime_prefix()[0], timeout=60)
        row, _ = measure_open_point(w, 1900, job, run, min_requests=100)
    assert row["iops"] == pytest.approx(1900, rel=0.15)
    assert row["latency_p99_us"] < 1000, row
