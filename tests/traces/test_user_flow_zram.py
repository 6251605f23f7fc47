"""The user's trace flow, exactly as the docs give it, on a fresh zram device:

    ssdpredict reference create --kind zram
    ssdpredict sweep --device D --target REF --destroy-data --for-trace TRACE --budget 10
    ssdpredict train --device D
    ssdpredict trace validate TRACE --device D --target REF --destroy-data --json

TRACE is the first 8 s of the MQSim wsrch trace in tests/data (3,337 requests, about 420
IO/s, 12-20 KiB random reads): sparse load, where the engine and the cold I/O path matter
most.  The bounds: this test measured a mean latency MRE of 13.6 % and a p99 MRE of 18.5 %
over its 8 windows (2026-11-27 14:08, beside other engineers' tests), 23.4 % and 20.9 % at a
load average of 20, and 45.7 % / 39.2 % in CI on 2026-11-29, where the slow set's other
worker ran fio beside it on a 2-core machine (zram's latency is CPU time, so what a
neighbour runs during the replay shows in the measured side).  The quiet
user-flow bench measures accuracy (docs/benchmarks.md, "The user's trace flow"); this test
asserts the flow works.  MRE_BOUND = 75 % leaves room for that shared-machine noise in an
8-window mean and still fails on either fault this flow fixes: an io_uring closed-loop
curve (108-211 % on such traces) or open-loop points measured at normal priority (159 % on
the whole trace).  The p99 bound is the same: a window's p99 rests on about 400 requests
(its 4th slowest).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_DATA, data_path

REPO = Path(__file__).resolve().parents[2]
MRE_BOUND = 0.75  # mean over windows of |predicted - measured| / measured, mean latency
P99_BOUND = 0.75
REQUESTS = 3337  # the wsrch trace's first 8 s


def _cut(tmp_path: Path) -> Path:
    lines = data_path(TEST_DATA / "traces" / "wsrch-small.trace").read_text().splitlines()[:REQUESTS]
    path = tmp_path / "wsrch-8s.trace"
    path.write_text("\n".join(lines) + "\n")
    return path


def _ssd(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # run where the user would, in a folder of their own: `trace validate` leaves its PNG there
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "service.cli.main", *args], env=env, cwd=home.parent,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.fio
def test_reference_sweep_for_trace_train_validate_on_zram(home: Path, tmp_path: Path,
                                                          fio_available: str) -> None:
    trace = str(_cut(tmp_path))
    made = _ssd(home, "reference", "create", "--kind", "zram", "--size", "64MiB")
    if made.returncode != 0:
        pytest.skip(f"zram cannot be made here: {made.stderr.strip()}")
    ref = made.stdout.split()[0]
    try:
        swept = _ssd(home, "sweep", "--device", "z", "--target", ref, "--destroy-data", "--budget", "10",
                     "--for-trace", trace)
        assert swept.returncode == 0, swept.stderr
        assert "plan for-trace:" in swept.stderr and "sizes rounded to 4096 B" in swept.stderr
        trained = _ssd(home, "train", "--device", "z")
        assert trained.returncode == 0, trained.stderr
        checked = _ssd(home, "trace", "validate", trace, "--device", "z", "--target", ref,
                       "--destroy-data", "--json")
        assert checked.returncode == 0, checked.stderr
    finally:
        _ssd(home, "reference", "destroy", ref)
    assert (home.parent / "wsrch-8s.trace.validation.png").is_file()
    report = json.loads(checked.stdout)
    # psync all the way: no engine warning, and the device check compares like with like
    assert not [w for w in report["warnings"] if "replay's engine" in w], report["warnings"]
    assert report["device_check"]["verdict"] != "unknown"
    errors = report["summary"]["errors"]
    mean, p99 = errors["latency_mean_us"], errors["latency_p99_us"]
    probe = report.get("open_loop_probe") or {}
    as_swept = (probe.get("as_swept") or {}).get("errors", {})
    print(f"user flow on zram: {mean['n']} windows, mean latency MRE {mean['mre']:.3f}, "
          f"p99 MRE {p99['mre']}; "
          f"as swept: {as_swept.get('latency_mean_us')}, {as_swept.get('latency_p99_us')}")
    assert mean["n"] >= 6
    assert mean["mre"] <= MRE_BOUND, (mean, p99, as_swept, report["warnings"])
    if p99["n"]:
        assert p99["mre"] <= P99_BOUND, (mean, p99, as_swept)
