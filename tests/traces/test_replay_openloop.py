"""``sweep --for-trace``'s open-loop points measured through the replay path (traces/replay/openloop.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from collectors.fio.jobs import JobSettings
from collectors.plans.for_trace import MixSpec, TracePlan
from collectors.plans.presets import Plan
from collectors.sweep.openloop import measure_open_loop, open_loop_key
from modeling.store import DataDir
from modeling.store.open_loop_rows import METHOD, OFFERED
from modeling.workload import Workload
from tests.traces.fake_devices import FakeMMcDevice
from traces.predict.windows import device_source
from traces.replay.openloop import REPLAYED_RATE, mix_trace, replay_open_point

READS = Workload(write_ratio=0.0, queue_depth=1, numjobs=16, request_size=4096, randomness=1.0)


def test_a_mix_trace_has_the_mix_its_rate_and_stays_in_the_span() -> None:
    mixed = Workload(write_ratio=0.3, queue_depth=1, numjobs=16, request_size=8192, read_size=4096,
                     write_size=65536, randomness=0.5, read_randomness=1.0, write_randomness=0.0)
    c = mix_trace(mixed, 2000.0, 2.0, 16 << 20)
    assert len(c) == 4000
    assert (len(c) - 1) / float(c.time_s[-1] - c.time_s[0]) == pytest.approx(2000.0, rel=0.1)
    w = np.asarray(c.is_write)
    assert w.mean() == pytest.approx(0.3, abs=0.05)
    sizes, off = np.asarray(c.size), np.asarray(c.offset)
    assert set(sizes[w]) == {65536} and set(sizes[~w]) == {4096}
    assert (off % 4096 == 0).all() and (off + sizes <= 16 << 20).all()
    # writes are sequential (each after the previous write, wrapping at the span), reads random
    wo, ws = off[w], sizes[w]
    follows = (wo[1:] == wo[:-1] + ws[:-1]) | (wo[1:] == 0)
    assert follows.all()
    ro = off[~w]
    assert np.mean(ro[1:] == ro[:-1] + 4096) < 0.01


class FakeReplayPoint:
    """A fake of :func:`traces.replay.openloop.replay_open_point` (no fio): a fixed latency per rate,
    failing once at ``fail_at`` as a killed sweep would stop."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[int] = []
        self.fail_at = fail_at

    def __call__(self, workload: Workload, rate: int) -> tuple[dict[str, Any], str]:
        if rate == self.fail_at:
            self.fail_at = None
            raise KeyboardInterrupt
        self.calls.append(rate)
        row = {**workload.as_row(), "iops": float(rate), OFFERED: float(rate), "engine": "psync",
               "latency_mean_us": 300.0 + rate / 100, "latency_p99_us": 900.0 + rate / 50,
               METHOD: REPLAYED_RATE}
        return row, "{}"


def test_replayed_points_are_stored_resumed_after_a_kill_and_corrected_on(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "home")
    d.catalog.ensure_device("dev")
    closed = [{**READS.as_row(), "numjobs": n, "iops": 1000.0 * min(n, 4), "engine": "psync",
               "latency_mean_us": 250.0, "latency_p99_us": 700.0} for n in (1, 2, 4, 8, 16)]
    d.catalog.add_measurements("dev", closed)
    job = JobSettings(target=str(tmp_path / "t.img"), engine="psync")
    plan = [(READS, r) for r in (200, 800, 2000, 3200)]
    fake = FakeReplayPoint(fail_at=2000)
    with pytest.raises(KeyboardInterrupt):
        measure_open_loop(d, "dev", job, plan=plan, measure_point=fake)
    sweep = measure_open_loop(d, "dev", job, plan=plan, measure_point=fake)
    assert fake.calls == [200, 800, 2000, 3200]  # each point measured once, the stored ones not again
    assert sweep.status == "complete" and sweep.n_points == 4
    assert sweep.info["open_loop_method"] == "replay"
    # a phase measured by fio's jobs is another phase: neither resumes the other
    assert open_loop_key("dev", plan, job, 1500) != open_loop_key("dev", plan, job, 1500, method="replay")
    frame = d.catalog.measurements("dev")
    assert (frame.loc[np.isfinite(frame[OFFERED]), METHOD] == REPLAYED_RATE).all()
    src = device_source(d, "dev", FakeMMcDevice(4000.0, 2))
    # corrected on, and not taken for the replay path's capacity (no cap, no capacity note)
    assert src.correction is not None and src.replay is None
    assert not any("replay path" in n for n in src.notes)


def test_the_plan_counts_replayed_points_at_their_own_cost() -> None:
    mix = MixSpec(READS.model_copy(update={"numjobs": 1}), [400.0], 1.0)
    plan = TracePlan(Plan("for-trace", (READS,)), [mix], 16, [1, 2, 4, 8, 16])
    fio, replayed = plan.seconds(1000), plan.seconds(1000, replayed=True)
    closed = 2.0  # one closed-loop point of 1 s and fio's start-up
    # 400 IO/s runs 3.75 s for 1,500 requests; the four fractions the sweep's 1 s
    assert fio - closed == pytest.approx((3.75 + 1 + 1.0) + 4 * (1 + 1 + 1.0))
    assert replayed - closed == pytest.approx((3.75 + 2.5) + 4 * (1 + 2.5))


@pytest.mark.slow
def test_a_replayed_point_measures_its_rate_through_the_replay(tmp_path: Path, fio_available: str) -> None:
    target = tmp_path / "t.img"
    job = JobSettings(target=str(target), engine="psync", size=16 << 20, runtime_ms=1000)
    row, raw = replay_open_point(READS, 400, job, min_requests=400)
    # the trace offered 400 IO/s for 1 s; the replay's lanes issue every request of it
    assert row[OFFERED] == pytest.approx(400.0, rel=0.15) and row["replay_requests"] == 400
    assert row[METHOD] == REPLAYED_RATE and row["engine"] == "psync" and row["numjobs"] == 16
    # a file far below its capacity: served at about the offered rate (loose: a busy suite's lanes slip)
    assert 0.5 * row[OFFERED] < row["iops"] < 1.5 * row[OFFERED]
    assert 0 < row["latency_p50_us"] <= row["latency_p99_us"] and row["latency_mean_us"] > 0
    assert row["read_iops"] == row["iops"] and "write_iops" not in row
    assert '"lanes": 16' in raw
