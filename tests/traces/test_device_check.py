"""Device check: a real QD1 fio probe on a small file, compared with an analytic fake model."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store import DataDir
from service.cli.main import app
from tests.device_fixtures import sha256_of
from tests.traces.fake_devices import FakeMMcDevice
from tests.traces.helpers import write_generic
from traces.validate import device_check
from traces.validate.device_check import check_device, probe_mix
from traces.validate.compare import validate_trace

SPAN = 8 << 20


class FakeModel(FakeMMcDevice):
    version = "fake"


class FakeRegistry:
    """Hands out one fake model, whatever device or version is asked for."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model

    def load(self, device: str, version: str | None = None) -> FakeModel:
        return self.model


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.img"
    path.write_bytes(os.urandom(SPAN))
    return path


def _reads(path: Path, n: int = 40, span_s: float = 0.2) -> Path:
    t = np.linspace(0, span_s, n)
    return write_generic(path, t, np.zeros(n, bool), np.arange(n) * 4096, np.full(n, 4096))


@pytest.mark.fio
def test_the_probe_is_measured_and_compared_with_the_model(user_file: Path, fio_available: str) -> None:
    model = FakeMMcDevice(mu=100.0)  # 10 ms a request: far slower than any file read
    check = check_device(model, str(user_file), 0.0, 4096, span=SPAN, runtime_ms=300)
    assert (check.write_ratio, check.request_size, check.queue_depth, check.numjobs) == (0.0, 4096, 1, 1)
    assert (check.predicted_mean_us, check.predicted_iops) == pytest.approx((1e4, 100.0))
    # one synchronous request at a time: IO/s x mean latency is (at most) one second per second
    assert 0.5 < check.measured_iops * check.measured_mean_us / 1e6 <= 1.05
    assert check.measured_p99_us >= check.measured_mean_us > 0
    assert check.mean_diff == pytest.approx(check.measured_mean_us / 1e4 - 1)
    assert check.iops_diff == pytest.approx(check.measured_iops / 100.0 - 1)
    assert check.note.startswith("device check: QD1 4 KiB reads measured")
    assert check.mean_diff < -0.5 and "device's drift" in (check.warning or "")
    assert dataclasses.replace(check, mean_diff=0.08).warning is None
    assert json.loads(json.dumps(check.to_dict()))["measured_iops"] == check.measured_iops


def test_the_probe_mix_is_the_traces_dominant_one() -> None:
    windows = pd.DataFrame({"requests": [100, 300, 50, 0], "write_ratio": [0.0, 0.5, 1.0, 1.0],
                            "request_size": [4096, 65536, 4096, 4096]})
    # request-weighted write ratio 200/450 = 0.44 -> the nearest swept 0.5; 65536 has the most requests
    assert probe_mix(windows, [0.0, 0.5, 1.0], [4096, 65536]) == (0.5, 65536)
    assert probe_mix(windows, [0.0, 1.0], [4096, 65536]) == (0.0, 65536)
    # sizes go to the nearest swept one by ratio: 64 KiB is 2x from 128 KiB and 4x from 16 KiB
    assert probe_mix(windows, [0.0, 1.0], [4096, 16384, 131072]) == (0.0, 131072)
    one = pd.DataFrame({"requests": [10], "write_ratio": [0.9], "request_size": [6144]})
    assert probe_mix(one, [0.0, 0.4, 1.0], [4096, 16384]) == (1.0, 4096)
    with pytest.raises(InvalidInput, match="swept write ratios"):
        probe_mix(windows, [], [4096])


@pytest.mark.fio
def test_a_write_probe_needs_destroy_data_on_a_users_file(user_file: Path, fio_available: str) -> None:
    before = sha256_of(user_file)
    with pytest.raises(UnsafeTarget, match="device check writes.*--destroy-data"):
        check_device(FakeMMcDevice(100.0), str(user_file), 0.5, 4096, span=SPAN, runtime_ms=200)
    assert sha256_of(user_file) == before
    check = check_device(FakeMMcDevice(100.0), str(user_file), 0.5, 4096, span=SPAN, runtime_ms=200,
                         destroy_data=True)
    assert check.write_ratio == 0.5 and check.measured_iops > 0
    assert user_file.stat().st_size == SPAN


def test_the_probe_never_creates_or_grows_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.img"
    with pytest.raises(InvalidInput, match="does not exist"):
        check_device(FakeMMcDevice(100.0), str(missing), 0.0, 4096, span=SPAN, destroy_data=True)
    assert not missing.exists()
    short = tmp_path / "short.img"
    short.write_bytes(os.urandom(1 << 20))
    with pytest.raises(InvalidInput, match="less than the probe's span"):
        check_device(FakeMMcDevice(100.0), str(short), 0.0, 4096, span=SPAN)
    assert short.stat().st_size == 1 << 20


@pytest.mark.fio
def test_validate_reports_the_device_check_and_warns_when_the_model_is_far_off(
        trained: DataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fio_available: str) -> None:
    monkeypatch.setattr(device_check, "RUNTIME_MS", 200)
    registry = FakeRegistry(FakeModel(mu=100.0))
    report = validate_trace(trained, "synth", _reads(tmp_path / "r.csv"), window_s=0.5,
                            target=str(tmp_path / "t.img"), registry=registry)  # type: ignore[arg-type]
    doc = json.loads(json.dumps(report.to_dict()))
    check = doc["device_check"]
    assert (check["write_ratio"], check["request_size"], check["predicted_mean_us"]) == (0.0, 4096, 1e4)
    assert check["mean_diff"] == pytest.approx(check["measured_mean_us"] / 1e4 - 1)
    assert [w for w in doc["warnings"] if w.startswith(check["note"]) and "drift" in w]
    assert doc["replay"]["requests"] == 40


@pytest.mark.fio
def test_no_device_check_leaves_it_out(trained: DataDir, tmp_path: Path, fio_available: str) -> None:
    args = ["trace", "validate", str(_reads(tmp_path / "r.csv")), "--device", "synth", "--target",
            str(tmp_path / "t.img"), "--window", "500ms", "--plot", str(tmp_path / "p.png")]
    res = CliRunner().invoke(app, [*args, "--no-device-check", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["device_check"] is None and not [w for w in doc["warnings"] if "device check" in w]
    assert doc["replay"]["requests"] == 40


@pytest.mark.fio
def test_validate_prints_the_device_check_line(
        trained: DataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fio_available: str) -> None:
    monkeypatch.setattr(device_check, "RUNTIME_MS", 200)
    res = CliRunner().invoke(app, ["trace", "validate", str(_reads(tmp_path / "r.csv")), "--device", "synth",
                                   "--target", str(tmp_path / "t.img"), "--window", "500ms",
                                   "--plot", str(tmp_path / "p.png")])
    assert res.exit_code == 0, res.output
    assert "device check: QD1 4 KiB reads measured" in res.output and "the model says" in res.output
