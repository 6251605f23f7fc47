"""Parsing fio JSON: real fio-plot files, real fio runs, client/server output, corrupt input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from collectors.fio.results import parse_fio_output, workload_from_options
from collectors.fio.runner import run_fio
from modeling.errors import FioOutputError
from modeling.workload import METRICS
from tests.conftest import FIO_PLOT

INTEL = FIO_PLOT / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"


def test_fio_3_1_result_without_bw_bytes() -> None:
    text = (INTEL / "randread-16-8.json").read_text()
    (result,) = parse_fio_output(text)
    raw = json.loads(text)["jobs"][0]["read"]
    row = result.row
    assert result.workload.queue_depth == 16 and result.workload.numjobs == 8
    assert result.workload.write_ratio == 0.0 and result.workload.randomness == 1.0
    assert row["iops"] == pytest.approx(raw["iops"])
    assert row["bandwidth_mib_s"] == pytest.approx(raw["bw"] / 1024)
    assert row["latency_mean_us"] == pytest.approx(raw["lat_ns"]["mean"] / 1000)
    assert row["latency_p99_us"] == pytest.approx(raw["clat_ns"]["percentile"]["99.000000"] / 1000)
    assert math.isnan(row["write_latency_mean_us"]) and row["write_iops"] == 0
    assert row["fio_version"] == "fio-3.1"


def test_mixed_result_combines_directions() -> None:
    text = (FIO_PLOT / "HPDL380G8" / "RAID" / "NEW" / "P420i_SAMSUNG860_RW" / "randrw-4-2.json").read_text()
    (result,) = parse_fio_output(text)
    job = json.loads(text)["jobs"][0]
    r, w = job["read"], job["write"]
    row = result.row
    assert result.workload.write_ratio == 0.5
    assert row["iops"] == pytest.approx(r["iops"] + w["iops"])
    expected_mean = (r["iops"] * r["lat_ns"]["mean"] + w["iops"] * w["lat_ns"]["mean"]) / (
        r["iops"] + w["iops"]
    )
    assert row["latency_mean_us"] == pytest.approx(expected_mean / 1000)
    lo = min(r["clat_ns"]["percentile"]["99.000000"], w["clat_ns"]["percentile"]["99.000000"])
    hi = max(r["clat_ns"]["percentile"]["99.000000"], w["clat_ns"]["percentile"]["99.000000"])
    assert lo / 1000 <= row["latency_p99_us"] <= hi / 1000
    assert 0.3 < row["measured_write_ratio"] < 0.7


def test_every_fio_plot_file_parses() -> None:
    files = sorted(FIO_PLOT.rglob("*.json"))
    assert len(files) == 637
    for path in files:
        (result,) = parse_fio_output(path.read_text(), source=str(path))
        assert all(result.row[m] > 0 for m in METRICS), path


@pytest.mark.parametrize(
    "text",
    ["", "not json", "{", '{"jobs": "x"}', "[1, 2]", '{"fio version": "fio-3.33"}', '{"jobs": []}'],
)
def test_corrupt_output_is_rejected(text: str) -> None:
    with pytest.raises(FioOutputError):
        parse_fio_output(text, source="upload.json")


def test_truncated_real_file_names_the_source() -> None:
    text = (INTEL / "randread-1-1.json").read_text()
    with pytest.raises(FioOutputError, match="upload.json"):
        parse_fio_output(text[: len(text) // 2], source="upload.json")


def test_failed_job_is_rejected() -> None:
    data = json.loads((INTEL / "randread-1-1.json").read_text())
    data["jobs"][0]["error"] = 5
    with pytest.raises(FioOutputError, match="error 5"):
        parse_fio_output(json.dumps(data))


def test_job_options_with_unsupported_values_are_rejected() -> None:
    with pytest.raises(FioOutputError, match="bs"):
        workload_from_options({"rw": "randread", "bs": "4k-64k"})
    with pytest.raises(FioOutputError, match="trim"):
        workload_from_options({"rw": "randtrim"})
    with pytest.raises(FioOutputError, match="queue_depth"):
        workload_from_options({"rw": "read", "iodepth": "0"})


def test_job_options_per_direction() -> None:
    w = workload_from_options(
        {"rw": "randrw", "rwmixwrite": "25", "bs": "4k,64k", "percentage_random": "100,0", "iodepth": "8"}
    )
    assert w.write_ratio == 0.25 and (w.read_size, w.write_size) == (4096, 65536)
    assert (w.read_randomness, w.write_randomness) == (1.0, 0.0)
    assert w.randomness == pytest.approx(0.75)
    assert w.request_size == 19456  # 0.75 * 4k + 0.25 * 64k


@pytest.mark.fio
def test_real_fio_run_parses(tmp_path: Path, fio_available: str) -> None:
    target = tmp_path / "t.img"
    job = (
        "[global]\nioengine=psync\ndirect=1\ntime_based=1\nruntime=500ms\n"
        f"filename={target}\nsize=8m\nlat_percentiles=1\nunified_rw_reporting=both\n"
        "[p]\nrw=randrw\nrwmixwrite=30\nbs=4k,8k\npercentage_random=100,50\n"
    )
    (result,) = parse_fio_output(run_fio(job, timeout=60))
    w = result.workload
    assert (w.write_ratio, w.read_size, w.write_size, w.write_randomness) == (0.3, 4096, 8192, 0.5)
    assert result.row["iops"] > 0 and result.row["latency_p99_us"] > 0
    assert result.row["read_iops"] > 0 and result.row["write_iops"] > 0
    assert result.row["fio_version"].startswith("fio-")
