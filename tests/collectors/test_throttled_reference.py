"""A throttled reference (zram under the kernel's block throttle) caps every fio ssdpredict runs on it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from collectors.devices.reference import create_reference, destroy_reference, list_references
from collectors.devices.throttle import cgroup_for, throttle_support
from collectors.fio.runner import run_fio
from modeling.errors import InvalidInput
from modeling.store import DataDir
from service.cli.main import app
from tests.traces.helpers import write_generic
from traces.replay.run import replay

MIB = 1 << 20
CAP = 2000


def _job(path: str, rw: str = "randread") -> str:
    return (f"[global]\nfilename={path}\ndirect=1\nrw={rw}\nbs=4k\nioengine=libaio\niodepth=16\n"
            "time_based=1\nruntime=1s\n[qd16]\n")


@pytest.fixture
def throttled(tmp_path: Path) -> tuple[DataDir, object]:
    if throttle_support() is None:
        pytest.skip("no block throttle here (cgroup v1 blkio or a v2 io controller)")
    d = DataDir(tmp_path / "home")
    try:
        ref = create_reference(d, "throttled", 16 * MIB, iops=CAP)
    except InvalidInput as exc:
        pytest.skip(f"no throttled reference here: {exc}")
    yield d, ref
    if list_references(d):
        destroy_reference(d, ref.path)


def test_fio_through_the_runner_meets_the_cap_and_fio_outside_does_not(throttled, fio_available: str) -> None:
    d, ref = throttled
    cgroup = cgroup_for(ref.path)
    assert cgroup is not None and ref.throttle["cgroup"] == str(cgroup) and ref.throttle["iops"] == CAP
    stored = json.loads((d.root / "reference.json").read_text())[0]
    assert stored["kind"] == "throttled" and stored["throttle"]["device"] == ref.throttle["device"]
    for rw in ("randread", "randwrite"):
        job = json.loads(run_fio(_job(ref.path, rw)))["jobs"][0]
        iops = job["read" if rw == "randread" else "write"]["iops"]
        assert iops == pytest.approx(CAP, rel=0.10), rw
    # the same job outside the cgroup is not capped: the cap comes from joining it
    out = subprocess.run([fio_available, "--output-format=json", "-"], input=_job(ref.path),
                         capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout)["jobs"][0]["read"]["iops"] > 3 * CAP


def test_replay_runs_in_the_cgroup(throttled, tmp_path: Path, fio_available: str) -> None:
    _, ref = throttled
    n = 600  # offered at 3,000 IO/s, 1.5 times the cap: the replay falls behind
    t = np.linspace(0, 0.2, n)
    trace = write_generic(tmp_path / "t.csv", t, np.zeros(n, bool), np.arange(n) * 4096, np.full(n, 4096))
    result = replay(str(trace), ref.path, destroy_data=True, window_s=0.2, lanes=16, slip_us=0.0)
    assert result.replay_rate < 0.8 * result.trace_rate


def test_destroy_removes_the_rules_and_the_cgroup(throttled, fio_available: str) -> None:
    d, ref = throttled
    cgroup = Path(ref.throttle["cgroup"])
    assert cgroup.is_dir()
    destroy_reference(d, ref.path)
    assert not cgroup.exists() and cgroup_for(ref.path) is None and not Path(ref.path).exists()
    assert list_references(d) == []


def test_cli_needs_iops_with_throttled_and_only_there(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["reference", "create", "--kind", "throttled"])
    assert r.exit_code == 2 and "needs --iops" in r.output
    r = CliRunner().invoke(app, ["reference", "create", "--kind", "zram", "--iops", "100"])
    assert r.exit_code == 2 and "--iops goes with --kind throttled" in r.output
    r = CliRunner().invoke(app, ["reference", "create", "--kind", "throttled", "--iops", "0"])
    assert r.exit_code == 2 and "--iops must be between" in r.output
