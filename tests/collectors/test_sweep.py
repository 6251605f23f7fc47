"""Sweeps with real fio on small files: storage, resume, repeats, quality options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.fio.runner import run_fio
from collectors.sweep.quality import SteadyStateRule, is_steady, run_until_steady
from collectors.sweep.run import run_sweep, sweep_key
from collectors.sweep.settings import SweepSettings
from modeling.errors import FioMissing, InvalidInput
from modeling.store import DataDir
from modeling.workload import METRICS, Workload
from tests.device_fixtures import sha256_of, tiny_plan

pytestmark = pytest.mark.fio


def _settings(tmp_path: Path, **kw: object) -> SweepSettings:
    """A 16 MiB file swept at 200 ms a point: these tests need completed runs, not steady numbers."""
    options: dict = {"target": str(tmp_path / "t.img"), "runtime": "200ms", "size": "16MiB", **kw}
    return SweepSettings(**options)


def test_sweep_stores_every_point_with_provenance(datadir: DataDir, tmp_path: Path,
                                                  fio_available: str) -> None:
    plan = tiny_plan(3)
    seen: list[tuple[int, int]] = []
    sweep = run_sweep(datadir, "file1", plan, _settings(tmp_path), metadata={"note": "t"},
                      progress=lambda done, total, w: seen.append((done, total)))
    assert sweep.status == "complete" and sweep.n_points == 3 == sweep.n_planned
    assert seen[-1] == (3, 3)
    dev = datadir.catalog.get_device("file1")
    assert dev.device_class == "ssd" and dev.metadata["note"] == "t"
    frame = datadir.catalog.measurements("file1")
    assert len(frame) == 3
    mixed = frame[frame["seq"] == 2].iloc[0]  # the 30 % write point
    for metric in METRICS:
        assert (frame[metric] > 0).all()
        assert mixed[f"read_{metric}"] > 0 and mixed[f"write_{metric}"] > 0
    assert (frame["latency_p99_9_us"] >= frame["latency_p50_us"]).all()
    row = frame.sort_values("seq").iloc[2]
    assert Workload.from_row(row.to_dict()) == plan.points[2]  # planned workload, numjobs included
    assert row["fio_version"].startswith("fio-") and row["kernel"] and row["measured_at"]
    assert row["engine"] in ("io_uring", "libaio") and row["target"] == str(tmp_path / "t.img")
    raw = datadir.catalog.raw_result(sweep.id, 0)
    assert raw is not None and "jobs" in json.loads(raw)
    assert sweep.info["fio_version"].startswith("fio-") and sweep.info["kernel"]


def test_interrupted_sweep_resumes_without_loss_or_duplicates(datadir: DataDir, tmp_path: Path,
                                                              fio_available: str) -> None:
    plan, settings = tiny_plan(3), _settings(tmp_path)

    def stop_after_one(done: int, total: int, w: Workload) -> None:
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(datadir, "file2", plan, settings, progress=stop_after_one)
    (partial,) = datadir.catalog.list_sweeps("file2")
    assert partial.status == "running" and partial.n_points == 1
    resumed = run_sweep(datadir, "file2", plan, settings)
    assert resumed.id == partial.id and resumed.n_points == 3
    assert sorted(datadir.catalog.completed_points(resumed.id)) == [(0, 0), (1, 0), (2, 0)]

    # an identical finished sweep is reused without running fio at all
    def no_fio(*a: object, **kw: object) -> str:
        raise AssertionError("fio must not run for a finished sweep")

    assert run_sweep(datadir, "file2", plan, settings, runner=no_fio).id == resumed.id
    # a different setting is a different sweep
    other = _settings(tmp_path, runtime="600ms")
    assert sweep_key("file2", plan, other) != sweep_key("file2", plan, settings)


def test_repeats_are_stored_with_their_spread(datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    sweep = run_sweep(datadir, "file3", tiny_plan(2), _settings(tmp_path, repeats=2))
    assert sweep.n_points == 4 == sweep.n_planned
    frame = datadir.catalog.sweep_points(sweep.id)
    assert sorted(zip(frame["seq"], frame["repeat"], strict=True)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    last = frame[frame["repeat"] == 1]
    assert (last["repeat_cv_iops"] >= 0).all()
    cv = sweep.info["repeat_cv"]["iops"]
    assert cv["points"] == 2 and 0 <= cv["median"] <= cv["max"]


def test_precondition_fills_the_span_and_fio_steady_state(datadir: DataDir, tmp_path: Path,
                                                          fio_available: str) -> None:
    # a file of the user's: only --destroy-data lets the sweep write over it
    settings = _settings(tmp_path, precondition=True, steady_state=True, steady_state_window="2s",
                         steady_state_max="3s", size="8MiB", destroy_data=True)
    target = Path(settings.target)
    from collectors.safety import prepare_file

    prepare_file(target, 8 << 20)
    before = sha256_of(target)
    sweep = run_sweep(datadir, "file4", tiny_plan(1), settings)
    assert sha256_of(target) != before
    assert sweep.info["precondition"]["passes"] == 2
    row = datadir.catalog.measurements("file4").iloc[0]
    assert row["steady_state_rule"] == "fio" and row["steady_state_criterion"].startswith("iops")
    assert row["runtime_s"] <= 3.2


def test_pts_steady_state_rule() -> None:
    rule = SteadyStateRule()
    assert not is_steady([100, 100, 100, 100], rule)  # fewer than 5 rounds
    assert is_steady([50, 300, 100, 101, 99, 100, 102], rule)
    assert not is_steady([100, 130, 100, 130, 100], rule)  # range 30 % of the mean
    assert not is_steady([100, 104, 108, 112, 116], rule)  # range 15 %, slope excursion 15 %
    rounds = iter([10.0, 500.0, 90.0, 100.0, 100.0, 100.0, 100.0, 100.0])
    row, raw, summary = run_until_steady(lambda: ({"iops": next(rounds)}, "{}"), rule)
    assert summary["steady_state_attained"] and summary["steady_state_rounds"] == 7
    never = run_until_steady(lambda: ({"iops": 1.0 if len(raw) % 2 else 2.0}, raw + "x"),
                             SteadyStateRule(max_rounds=6))
    assert never[2]["steady_state_rounds"] <= 6


def test_pts_rule_with_real_fio(datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    calls: list[str] = []

    def counting(job: str, **kw: object) -> str:
        calls.append(job)
        return run_fio(job, **kw)  # type: ignore[arg-type]

    settings = _settings(tmp_path, steady_state=True, steady_state_rule="pts", engine="psync", size="4MiB",
                         runtime="100ms", steady_state_rounds=7)
    run_sweep(datadir, "file5", tiny_plan(1), settings, runner=counting)
    row = datadir.catalog.measurements("file5").iloc[0]
    assert row["steady_state_rule"] == "pts"
    assert 5 <= row["steady_state_rounds"] == len(calls) <= 7
    if row["steady_state_rounds"] < 7:  # stopping early means the window was steady
        assert row["steady_state_attained"]


def test_bad_settings_and_missing_fio(datadir: DataDir, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="repeats"):
        _settings(tmp_path, repeats=0)
    with pytest.raises(InvalidInput, match="remote"):
        _settings(tmp_path, csd_path="internal", device_class="csd")
    with pytest.raises(InvalidInput, match="device class"):
        _settings(tmp_path, device_class="floppy")
    with pytest.raises(InvalidInput, match="steady-state rule"):
        _settings(tmp_path, steady_state_rule="forever")
    with pytest.raises(InvalidInput, match="invalid sweep setting repeats"):
        _settings(tmp_path, repeats="many")
    with pytest.raises(FioMissing, match="apt-get install fio"):
        run_sweep(datadir, "x", tiny_plan(1), _settings(tmp_path, fio="/nonexistent/fio"))
    assert not (tmp_path / "t.img").exists()  # failed before creating anything


def test_settings_are_parsed_once_into_typed_values(tmp_path: Path) -> None:
    s = _settings(tmp_path, runtime="500ms", ramp="250ms", offset="1MiB", steady_state_window=2,
                  engine="auto")
    timing = (s.runtime_ms, s.ramp_ms, s.steady_state_window_ms, s.steady_state_max_ms)
    assert timing == (500, 250, 2000, 30000)
    assert (s.size_bytes, s.offset_bytes) == (16 << 20, 1 << 20) and s.engine is None
    assert SweepSettings(target="x", runtime_ms=500, size_bytes=16 << 20) == SweepSettings(
        target="x", runtime="0.5s", size="16MiB")
    with pytest.raises(InvalidInput, match="duration"):
        _settings(tmp_path, runtime="soon")
    with pytest.raises(InvalidInput, match="remote"):
        _settings(tmp_path, remote="a b:1")


def test_sweep_identity_keeps_the_shape_of_stored_sweeps(tmp_path: Path) -> None:
    # sweeps stored before the settings were typed must still be found (resumed, reused)
    assert SweepSettings(target=str(tmp_path / "t.img")).identity() == {
        "target": str(tmp_path / "t.img"), "engine": None, "runtime": 1000, "ramp": 0,
        "size": 256 << 20, "offset": 0, "remote": None, "repeats": 1, "precondition": False,
        "precondition_passes": 2, "steady_state": False, "steady_state_rule": "fio",
        "steady_state_window": "5s", "steady_state_max": "30s", "steady_state_rounds": 25,
        "csd_path": None, "internal_target": None, "nvmeof": None,
    }
