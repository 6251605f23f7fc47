"""fio job generation: the option whitelist, and each workload field's mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.fio.engines import resolve_engine
from collectors.fio.jobs import (
    JobSettings,
    build_fill_job,
    build_job,
    check_option,
    render_job,
    workload_options,
)
from collectors.fio.results import parse_fio_output, workload_from_options
from collectors.fio.runner import run_fio
from collectors.safety import prepare_file
from modeling.units import parse_duration_ms
from modeling.errors import FioError, InvalidInput
from modeling.workload import Workload


def _opts(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("exec_prerun", "rm -rf /"),
        ("exec_postrun", "true"),
        ("include", "/etc/passwd"),
        ("write_iolog", "/tmp/x"),
        ("filename", "/tmp/x\nexec_prerun=touch /tmp/pwned"),
        ("filename", "/tmp/a;b"),
        ("filename", "/tmp/${HOME}"),
        ("filename", "/tmp/a:/etc/passwd"),
        ("filename", "relative/path"),
        ("filename", "/tmp/../etc/passwd"),
        ("bs", "4k=1"),
        ("bs", "4k-64k"),
        ("iodepth", "8 # comment"),
        ("rw", "trim"),
        ("rwmixwrite", "101"),
        ("runtime", "1.5"),
        ("ioengine", "exec"),
        ("steadystate", "iops:20%;x"),
    ],
)
def test_whitelist_rejects(name: str, value: str) -> None:
    with pytest.raises(InvalidInput):
        check_option(name, value)


def test_render_rejects_bad_job_name_and_unknown_option() -> None:
    with pytest.raises(InvalidInput, match="job name"):
        render_job({}, {"a]\n[b": {"rw": "read"}})
    with pytest.raises(InvalidInput, match="not allowed"):
        render_job({"exec_prerun": "ls"}, {"p": {"rw": "read"}})


def test_bad_target_never_becomes_a_job(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        JobSettings(target=f"{tmp_path}/x\nexec_prerun=id")


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        (dict(write_ratio=0, queue_depth=8, request_size="4k", randomness=1),
         {"rw": "randread", "bs": "4k", "iodepth": "8", "numjobs": "1"}),
        (dict(write_ratio=1, queue_depth=1, request_size="128k", randomness=0),
         {"rw": "write", "bs": "128k"}),
        (dict(write_ratio=0.3, queue_depth=4, request_size="16k", randomness=0.25),
         {"rw": "randrw", "rwmixwrite": "30", "percentage_random": "25,25"}),
        (dict(write_ratio=0.5, queue_depth=4, request_size="8k", randomness=1, read_size="4k",
              write_size="64k", read_randomness=1, write_randomness=0, numjobs=4),
         {"rw": "randrw", "rwmixwrite": "50", "bs": "4k,64k", "percentage_random": "100,0",
          "numjobs": "4"}),
        (dict(write_ratio=0.5, queue_depth=2, request_size="8k", randomness=0), {"rw": "rw"}),
    ],
)
def test_workload_mapping(workload: dict, expected: dict[str, str]) -> None:
    options = workload_options(Workload(**workload))
    assert {k: options.get(k) for k in expected} == expected
    if expected["rw"] in ("randread", "write", "rw"):
        assert "percentage_random" not in options
    # the options read back to the same workload
    back = workload_from_options(options)
    w = Workload(**workload)
    assert (back.write_ratio, back.queue_depth, back.numjobs) == (w.write_ratio, w.queue_depth, w.numjobs)
    assert (back.read_size, back.write_size) == (w.read_size, w.write_size)


def test_global_options_use_milliseconds_and_whitelisted_reporting() -> None:
    settings = JobSettings(target="/tmp/x.img", engine="psync", size=16 << 20, offset=4096,
                           runtime_ms=1500, ramp_ms=500)
    opts = _opts(build_job(Workload(write_ratio=0, queue_depth=1, request_size=4096, randomness=0), settings))
    assert opts["runtime"] == "1500ms" and opts["ramp_time"] == "500ms" and opts["time_based"] == "1"
    assert opts["percentile_list"] == "50:90:99:99.9" and opts["lat_percentiles"] == "1"
    assert opts["direct"] == "1" and opts["ioengine"] == "psync" and opts["group_reporting"] == "1"
    assert opts["size"] == str(16 << 20) and opts["offset"] == "4096"
    assert opts["unified_rw_reporting"] == "both"
    fill = _opts(build_fill_job(settings, passes=2))
    assert fill["rw"] == "write" and fill["loops"] == "2" and "time_based" not in fill


@pytest.mark.parametrize(("text", "ms"),
                         [("500ms", 500), ("1s", 1000), ("1.5s", 1500), ("2m", 120000), (2, 2000),
                          ("1h", 3_600_000)])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "fast", "1.0001ms", "-1s", "1d"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(InvalidInput):
        parse_duration_ms(bad)


def test_spdk_is_refused_when_its_plugin_is_missing() -> None:
    with pytest.raises(InvalidInput, match="SPDK"):
        resolve_engine("spdk", "/tmp/x", spdk_plugin_path="/nonexistent/spdk_nvme")
    with pytest.raises(InvalidInput, match="SPDK"):
        JobSettings(target="/tmp/x", engine="spdk")
    with pytest.raises(InvalidInput, match="unknown engine"):
        resolve_engine("windowsaio", "/tmp/x")


@pytest.mark.fio
def test_generated_job_runs_in_fio_as_specified(fio_available: str, tmp_path: Path) -> None:
    """Real fio: a mixed, split-size, 2-job workload for 500 ms comes back as specified."""
    target = tmp_path / "t.img"
    prepare_file(target, 16 << 20)
    engine = resolve_engine(None, str(target))
    assert engine in ("io_uring", "libaio")
    w = Workload(write_ratio=0.3, queue_depth=4, request_size="8k", randomness=0.5, numjobs=2,
                 read_size="4k", write_size="16k")
    text = run_fio(build_job(w, JobSettings(target=str(target), engine=engine, size=16 << 20,
                                            runtime_ms=500)), timeout=60)
    (result,) = parse_fio_output(text)
    row = result.row
    assert 0.4 <= row["runtime_s"] <= 0.75  # 500 ms, not truncated to 0 or rounded to 1 s
    assert result.workload.numjobs == 2 and result.workload.read_size == 4096
    assert result.workload.write_size == 16384
    assert 0.2 < row["measured_write_ratio"] < 0.4
    assert row["iops"] > 0 and row["latency_p99_9_us"] >= row["latency_p50_us"] > 0
    assert row["iops"] == pytest.approx(row["read_iops"] + row["write_iops"], rel=1e-6)


@pytest.mark.fio
def test_engine_probe_falls_back_when_io_uring_fails(fio_available: str, tmp_path: Path) -> None:
    calls: list[str] = []

    def runner(job: str, **kw: object) -> str:
        calls.append(_opts(job)["ioengine"])
        if "io_uring" in job:
            raise FioError("fio failed: io_uring unavailable")
        return run_fio(job, **kw)  # type: ignore[arg-type]

    target = tmp_path / "p.img"
    prepare_file(target, 1 << 20)
    assert resolve_engine(None, str(target), runner=runner) == "libaio"
    assert resolve_engine(None, str(target), runner=runner) == "libaio"
    assert calls == ["io_uring", "libaio"]  # probed once, then cached
