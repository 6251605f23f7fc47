"""The loop reference queues: buffered, and its latency rises with the offered load (real fio).

The capacity validation's 1.0x check (bench/capacity.py --validate --loop) needs a device whose
latency rises gradually in the steady state; the loop device over tmpfs does because its
driver serves one cgroup's requests from a single worker (direct I/O off: the copy from tmpfs
is the service time).  Needs root and a free loop device; skipped where they cannot be had.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.fio.jobs import JobSettings, global_options, render_job, workload_options
from collectors.fio.results import load_fio_json, parse_fio_document
from collectors.fio.runner import run_fio
from collectors.sweep.openloop import LANES, measure_open_point, realtime_prefix
from modeling.store import DataDir
from modeling.workload import Workload
from tests.device_fixtures import reference_or_skip

MIB = 1 << 20


@pytest.fixture
def loop_ref(tmp_path: Path):  # type: ignore[no-untyped-def]
    with reference_or_skip(DataDir(tmp_path / "home"), "loop", 64 * MIB) as ref:
        yield ref


def test_loop_reference_is_buffered_over_tmpfs(loop_ref) -> None:  # type: ignore[no-untyped-def]
    sysfs = Path("/sys/block") / Path(loop_ref.path).name / "loop"
    assert (sysfs / "dio").read_text().strip() == "0"
    assert (sysfs / "backing_file").read_text().strip() == loop_ref.backing
    assert str(loop_ref.backing).startswith("/dev/shm/")


def _latency_at(w: Workload, settings: JobSettings, prefix: list[str]) -> dict[float, dict]:
    """One attempt: the closed-loop capacity, then open-loop points at 0.3x and 0.9x of it."""
    closed = render_job(global_options(settings), {"closed": workload_options(w)})
    doc = load_fio_json(run_fio(closed, prefix=prefix, timeout=60), source="closed loop")
    capacity = float(parse_fio_document(doc, source="closed loop")[0].row["iops"])
    rows = {}
    for frac in (0.3, 0.9):
        rows[frac], _ = measure_open_point(w, int(frac * capacity), settings,
                                           lambda job, **kw: run_fio(job, prefix=prefix, **kw),
                                           min_requests=1000, warmup_ms=300)
    return rows


@pytest.mark.slow
def test_loop_reference_latency_rises_with_the_offered_load(loop_ref, fio_available: str) -> None:  # type: ignore[no-untyped-def]
    w = Workload(queue_depth=1, numjobs=LANES, write_ratio=0.0, request_size=64 * 1024, randomness=1.0)
    settings = JobSettings(target=loop_ref.path, engine="psync", size=48 * MIB, runtime_ms=500)
    prefix = realtime_prefix()[0]
    # served in full at 0.9 (below saturation), and waiting for the one worker: on 2026-11-29
    # the mean at 0.9 was 2.1-6.2x that at 0.3 over 9 curves (bench/capacity_curve.py --kind loop);
    # zram, which completes in the submitter's context, is flat there.  Beside a busy test
    # suite the capacity measured first can be more than the open-loop phase gets (CI on
    # 2026-11-29 served 48.8k of 65.1k requested): such an attempt says nothing about the
    # steady state and is measured again, up to three times in all.  A flat device fails all three.
    attempts = []
    for _ in range(3):
        rows = _latency_at(w, settings, prefix)
        attempts.append(rows)
        served = rows[0.9]["iops"] >= 0.9 * rows[0.9]["requested_iops"]
        if served and rows[0.9]["latency_mean_us"] >= 1.5 * rows[0.3]["latency_mean_us"]:
            return
    pytest.fail(f"no attempt served 0.9x in full with its mean latency >= 1.5x that at 0.3x: {attempts}")
