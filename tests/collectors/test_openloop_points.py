"""Open-loop sweep points: real fio with Poisson arrivals at fractions of the measured capacity."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collectors.fio.jobs import JobSettings
from collectors.sweep.openloop import (
    MAX_POINT_MS,
    build_open_loop_job,
    measure_open_loop,
    offered_rate,
    open_loop_plan,
    point_runtime_ms,
)
from modeling.errors import InvalidInput, NoData
from modeling.training.fit import training_rows
from modeling.store import DataDir
from modeling.workload import Workload
from tests.traces.fake_devices import FakeMMcDevice
from traces.predict.windows import device_source


def _closed_rows() -> list[dict[str, float]]:
    rows = []
    for wr in (0.0, 1.0):
        for qd in (1, 4, 16):
            iops = min(qd, 4) * 1000.0 * (1 - 0.5 * wr)
            rows.append(dict(write_ratio=wr, queue_depth=qd, request_size=4096, randomness=1.0, numjobs=1,
                             iops=iops, bandwidth_mib_s=iops * 4096 / 2**20, latency_mean_us=qd / iops * 1e6,
                             latency_p99_us=qd / iops * 3e6))
    return rows


def test_plan_takes_each_mix_capacity() -> None:
    plan = open_loop_plan(pd.DataFrame(_closed_rows()), fractions=(0.1, 0.5))
    # the light 200 IO/s point is added under half the smallest fraction's rate only
    assert [(w.write_ratio, w.numjobs, rate) for w, rate in plan] == [
        (0.0, 16, 400), (0.0, 16, 2000), (1.0, 16, 200), (1.0, 16, 1000)
    ]
    fast = pd.DataFrame([{**_closed_rows()[2], "iops": 100_000.0}])
    assert [rate for _, rate in open_loop_plan(fast, fractions=(0.1,))] == [200, 2000, 10_000]
    with pytest.raises(InvalidInput):
        open_loop_plan(pd.DataFrame(_closed_rows()), fractions=())
    with pytest.raises(NoData):
        open_loop_plan(pd.DataFrame())


def test_job_has_poisson_rate_from_the_whitelist(tmp_path: Path) -> None:
    w = Workload(write_ratio=0.3, queue_depth=1, numjobs=16, request_size=4096, randomness=1.0)
    job = build_open_loop_job(w, 1600, JobSettings(target=str(tmp_path / "t.img")))
    # 100 IO/s a job, 30 % of them writes: fio limits each direction by its own number
    assert "rate_iops=70,30\n" in job and "rate_process=poisson\n" in job and "numjobs=16\n" in job
    assert "ioengine=psync\n" in job
    reads = build_open_loop_job(w.model_copy(update={"write_ratio": 0.0}), 1600,
                                JobSettings(target=str(tmp_path / "t.img")))
    assert "rate_iops=100\n" in reads
    assert offered_rate(w, 1600) == 1600.0


def test_a_mixed_point_offers_its_rate_in_all(tmp_path: Path, fio_available: str) -> None:
    """One rate_iops number on a mixed workload is offered to each direction: twice the rate."""
    from collectors.fio.results import load_fio_json, parse_fio_document
    from collectors.fio.runner import run_fio

    target = tmp_path / "t.img"
    target.write_bytes(np.random.default_rng(0).integers(0, 256, 8 << 20, dtype=np.uint8).tobytes())
    w = Workload(write_ratio=0.4, queue_depth=1, numjobs=4, request_size=4096, randomness=1.0)
    job = build_open_loop_job(w, 800, JobSettings(target=str(target), engine="psync", size=8 << 20,
                                                  runtime_ms=1000))
    row = parse_fio_document(load_fio_json(run_fio(job, timeout=30), source="t"), source="t")[0].row
    assert row["iops"] == pytest.approx(800, rel=0.25)
    assert row["write_ratio"] == pytest.approx(0.4, abs=0.1)


def test_open_loop_points_are_measured_stored_and_kept_out_of_training(
    tmp_path: Path, fio_available: str
) -> None:
    d = DataDir(tmp_path / "home")
    d.catalog.ensure_device("dev")
    d.catalog.add_measurements("dev", _closed_rows()[:3])  # reads only: one mix, capacity 4000
    target = tmp_path / "t.img"
    target.write_bytes(np.random.default_rng(0).integers(0, 256, 16 << 20, dtype=np.uint8).tobytes())
    job = JobSettings(target=str(target), engine="libaio", size=16 << 20, runtime_ms=1000)
    # 400 requests are enough here: both points keep the 1 s runtime
    sweep = measure_open_loop(d, "dev", job, fractions=(0.1, 0.25), min_requests=400,
                              warmup_ms=200)
    assert sweep.source == "open-loop" and sweep.n_points == 2
    # at the replay's real-time priority where the process may (root and chrt), else said why
    realtime = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("chrt") is not None
    assert sweep.info["priority"] == ("realtime" if realtime else "normal")
    assert bool(sweep.info["warnings"]) is not realtime
    frame = d.catalog.measurements("dev")
    ol = frame[np.isfinite(frame["offered_iops"])]
    assert sorted(ol["requested_iops"]) == [400.0, 992.0]  # 16 jobs of 25 and of 62 IO/s
    # fio's Poisson lanes may offer a little more than asked: the point keeps what they offered
    assert (ol["offered_iops"] == np.maximum(ol["requested_iops"], ol["iops"])).all()
    # Poisson arrivals at a rate far below the file's capacity are served at that rate
    assert ol["iops"].to_numpy() == pytest.approx(ol["offered_iops"].to_numpy(), rel=0.25)
    assert (ol["numjobs"] == 16).all() and (ol["engine"] == "psync").all()
    assert (ol["latency_mean_us"] > 0).all()
    assert frame["offered_iops"].isna().sum() == 3
    _, _, clean = training_rows(frame.iloc[[0, 1, 2, 0, 1, 2, 3, 4]].reset_index(drop=True).pipe(
        lambda f: pd.concat([f] * 2, ignore_index=True)))
    assert clean["offered_iops"].isna().all()


def test_trace_prediction_uses_the_open_loop_points(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "home")
    d.catalog.ensure_device("dev")
    d.catalog.add_measurements("dev", _closed_rows())
    src = device_source(d, "dev", FakeMMcDevice(1000.0, 4))
    assert src.correction is None and src.loads == [(1, 1), (4, 1), (16, 1)] and src.notes
    row = {**_closed_rows()[0], "numjobs": 16, "offered_iops": 400.0, "latency_mean_us": 2000.0}
    d.catalog.add_measurements("dev", [row])
    src = device_source(d, "dev", FakeMMcDevice(1000.0, 4))
    assert src.correction is not None and not src.notes


def test_sweep_cli_open_loop_option(
    tmp_path: Path, fio_available: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from service.cli.main import app
    from service.config import get_settings

    monkeypatch.setenv("SSDPREDICT_HOME", str(tmp_path / "home"))
    get_settings.cache_clear()
    args = ["sweep", "--device", "f", "--target", str(tmp_path / "t.img"), "--size", "16MiB",
            "--plan", "grid", "--write-ratios", "0", "--queue-depths", "1,4", "--sizes", "4k",
            "--randomness", "1", "--runtime", "500ms", "--open-loop-requests", "100", "--open-loop", "0.2",
            "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["open_loop_sweep_id"] is not None
    frame = DataDir(tmp_path / "home").catalog.measurements("f")
    ol = frame[np.isfinite(frame["offered_iops"])]
    assert len(ol) >= 1 and (ol["engine"] == "psync").all()
    res = CliRunner().invoke(app, [*args[:-3], "--open-loop", "2", "--json"])
    assert res.exit_code == 2 and "fractions" in res.output


def test_sparse_points_run_long_enough_for_their_requests() -> None:
    assert point_runtime_ms(200, 2000, 1500) == 7500  # 1,500 requests at 200 IO/s
    assert point_runtime_ms(20_000, 2000, 1500) == 2000  # the sweep's runtime already holds them
    assert point_runtime_ms(1, 2000, 1500) == MAX_POINT_MS


def test_the_warm_up_is_a_second_unless_configured_and_is_part_of_the_phase(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from collectors.sweep.openloop import open_loop_key
    from collectors.sweep.settings import SweepSettings
    from service.config import Settings

    monkeypatch.delenv("SSDPREDICT_OPEN_LOOP_WARMUP_MS", raising=False)  # the suite's 200 ms
    assert Settings().open_loop_warmup_ms == 1000 == SweepSettings(target="/tmp/t.img").open_loop_warmup_ms
    monkeypatch.setenv("SSDPREDICT_OPEN_LOOP_WARMUP_MS", "-1")
    with pytest.raises(ValueError, match="open_loop_warmup_ms"):
        Settings()
    # points measured after another warm-up are another phase: a rerun does not mix them
    job = JobSettings(target="/tmp/t.img")
    plan = [(Workload(write_ratio=0.0, queue_depth=1, request_size=4096, randomness=1.0), 100)]
    assert open_loop_key("d", plan, job, 100) != open_loop_key("d", plan, job, 100, warmup_ms=200)
