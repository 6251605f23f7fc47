"""The device check tells the device's drift from the model's error: the probe runs the nearest stored
psync QD1 point's workload on zram and is compared with that point and with the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from collectors.devices.reference import create_reference, destroy_reference
from modeling.errors import InvalidInput
from modeling.store import DataDir
from modeling.workload import MIB, Workload
from tests.traces.fake_devices import FakeMMcDevice
from traces.validate.device_check import check_device, measure_probe, stored_reference

SPAN = 32 * MIB


@pytest.fixture
def zram(tmp_path: Path, fio_available: str) -> Iterator[str]:
    d = DataDir(tmp_path / "refs")
    try:
        ref = create_reference(d, "zram", SPAN)
    except (InvalidInput, OSError) as exc:
        pytest.skip(f"zram cannot be made here: {exc}")
    try:
        yield ref.path
    finally:
        destroy_reference(d, ref.path)


def _stored(mean_us: float, engine: str = "psync", sweep: int = 7) -> pd.DataFrame:
    row = dict(write_ratio=0.0, queue_depth=1, numjobs=1, request_size=4096, randomness=1.0,
               latency_mean_us=mean_us, latency_p99_us=3 * mean_us, iops=1e6 / mean_us, engine=engine,
               sweep_id=sweep)
    far = {**row, "request_size": 1 << 20, "latency_mean_us": 500.0, "sweep_id": 3}
    return pd.DataFrame([far, row])


def _probe_mean(path: str) -> float:
    w = Workload(write_ratio=0.0, request_size=4096, queue_depth=1, numjobs=1, randomness=1.0)
    runs = [measure_probe(path, w, span=SPAN, runtime_ms=500)["latency_mean_us"] for _ in range(3)]
    return float(sorted(runs)[1])


def test_the_reference_is_the_nearest_psync_qd1_point() -> None:
    w, mean, sweep = stored_reference(_stored(10.0), 0.1, 8192) or (None, 0.0, None)
    assert w is not None and (w.request_size, w.write_ratio, mean, sweep) == (4096, 0.0, 10.0, 7)
    assert stored_reference(_stored(10.0, engine="io_uring"), 0.0, 4096) is None
    assert stored_reference(None, 0.0, 4096) is None


@pytest.mark.fio
def test_a_device_slower_when_swept_is_drift(zram: str) -> None:
    now = _probe_mean(zram)
    then = 5 * now  # as if the sweep had met a device five times slower (the probe's own
    # noise on a loaded CI machine reached +52 % at 2.4 us, so -80 % keeps clear of -50 %)
    model = FakeMMcDevice(1e6 / then)  # the model learned the sweep exactly
    check = check_device(model, zram, 0.0, 4096, span=SPAN, runtime_ms=500, stored=_stored(then))
    assert check.verdict == "drift" and check.stored_sweep == 7
    assert check.model_error == pytest.approx(0.0, abs=1e-9) and check.drift < -0.5
    assert "the device has changed since it was swept" in (check.warning or "")


@pytest.mark.fio
def test_a_device_as_swept_with_a_wrong_model_is_model_error(zram: str) -> None:
    now = _probe_mean(zram)
    model = FakeMMcDevice(1e6 / (3 * now))  # the model says three times slower than what was swept
    check = check_device(model, zram, 0.0, 4096, span=SPAN, runtime_ms=500, stored=_stored(now))
    # the probe's own noise may add drift ("both"), never take the model's error away
    assert check.verdict in ("model", "both") and check.model_error == pytest.approx(-2 / 3, rel=1e-6)
    assert abs(check.drift) < 1.0  # the probe's noise: +52 % seen at 2.4 us under a parallel suite
    if check.verdict == "model":
        assert "the model's error at this mix (-67 %), not drift" in (check.warning or "")


@pytest.mark.fio
def test_without_a_stored_psync_point_the_check_says_it_cannot_tell(zram: str) -> None:
    check = check_device(FakeMMcDevice(100.0), zram, 0.0, 4096, span=SPAN, runtime_ms=300,
                         stored=_stored(10.0, engine="io_uring"))
    assert check.verdict == "unknown" and check.stored_sweep is None
    assert "no stored psync measurement of this mix" in (check.warning or "")
