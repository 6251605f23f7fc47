"""The device check tells the device's drift from the model's error: the probe runs the nearest stored
psync QD1 point's workload on zram and is compared with that point and with the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from modeling.errors import InvalidInput
from modeling.store import DataDir
from modeling.workload import MIB, Workload
from tests.device_fixtures import reference_or_skip
from tests.traces.fake_devices import FakeMMcDevice
from traces.validate import device_check
from traces.validate.device_check import check_device, stored_reference

SPAN = 32 * MIB


@pytest.fixture
def zram(tmp_path: Path, fio_available: str) -> Iterator[str]:
    with reference_or_skip(DataDir(tmp_path / "refs"), "zram", SPAN, skip_on=(InvalidInput, OSError)) as ref:
        yield ref.path


def _stored(mean_us: float, engine: str = "psync", sweep: int = 7) -> pd.DataFrame:
    row = dict(write_ratio=0.0, queue_depth=1, numjobs=1, request_size=4096, randomness=1.0,
               latency_mean_us=mean_us, latency_p99_us=3 * mean_us, iops=1e6 / mean_us, engine=engine,
               sweep_id=sweep)
    far = {**row, "request_size": 1 << 20, "latency_mean_us": 500.0, "sweep_id": 3}
    return pd.DataFrame([far, row])


class FakeProbe:
    """Stands in for fio's probe (traces.validate.device_check.measure_probe) where a test is
    about the verdict, not the device: a zram probe at 2.4 us moved by +52 % and +406 % under a
    parallel CI suite, more than any verdict's margin.  The real probe runs in the last test."""

    def __init__(self, mean_us: float) -> None:
        self.mean_us = mean_us

    def __call__(self, target: str, workload: Workload, **kw: object) -> dict[str, float]:
        return {"latency_mean_us": self.mean_us, "latency_p99_us": 3 * self.mean_us,
                "iops": 1e6 / self.mean_us}


def test_the_reference_is_the_nearest_psync_qd1_point() -> None:
    w, mean, sweep = stored_reference(_stored(10.0), 0.1, 8192) or (None, 0.0, None)
    assert w is not None and (w.request_size, w.write_ratio, mean, sweep) == (4096, 0.0, 10.0, 7)
    assert stored_reference(_stored(10.0, engine="io_uring"), 0.0, 4096) is None
    assert stored_reference(None, 0.0, 4096) is None


def test_a_device_slower_when_swept_is_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_check, "measure_probe", FakeProbe(10.0))
    model = FakeMMcDevice(1e6 / 30.0)  # the model learned the sweep exactly; the sweep met 30 us
    check = check_device(model, "/dev/fake", 0.0, 4096, span=SPAN, runtime_ms=500, stored=_stored(30.0))
    assert check.verdict == "drift" and check.stored_sweep == 7
    assert check.model_error == pytest.approx(0.0, abs=1e-9) and check.drift == pytest.approx(-2 / 3)
    assert "the device has changed since it was swept" in (check.warning or "")


@pytest.mark.parametrize("now_us, verdict", [(10.0, "model"), (25.0, "both")])
def test_a_wrong_model_is_model_error_and_drift_adds_both(monkeypatch: pytest.MonkeyPatch, now_us: float,
                                                          verdict: str) -> None:
    monkeypatch.setattr(device_check, "measure_probe", FakeProbe(now_us))
    model = FakeMMcDevice(1e6 / 30.0)  # the model says three times slower than what was swept
    check = check_device(model, "/dev/fake", 0.0, 4096, span=SPAN, runtime_ms=500, stored=_stored(10.0))
    assert check.verdict == verdict and check.model_error == pytest.approx(-2 / 3, rel=1e-6)
    if verdict == "model":
        assert "the model's error at this mix (-67 %), not drift" in (check.warning or "")


@pytest.mark.fio
def test_the_real_probe_is_compared_with_the_stored_point_and_the_model(zram: str) -> None:
    model = FakeMMcDevice(1e6 / 30.0)
    check = check_device(model, zram, 0.0, 4096, span=SPAN, runtime_ms=500, stored=_stored(10.0))
    # the model's error is stored point against model: no probe noise in it
    assert check.model_error == pytest.approx(-2 / 3, rel=1e-6) and check.verdict in ("model", "both")
    assert check.measured_mean_us > 0 and check.drift == pytest.approx(check.measured_mean_us / 10.0 - 1)


@pytest.mark.fio
def test_without_a_stored_psync_point_the_check_says_it_cannot_tell(zram: str) -> None:
    check = check_device(FakeMMcDevice(100.0), zram, 0.0, 4096, span=SPAN, runtime_ms=300,
                         stored=_stored(10.0, engine="io_uring"))
    assert check.verdict == "unknown" and check.stored_sweep is None
    assert "no stored psync measurement of this mix" in (check.warning or "")
