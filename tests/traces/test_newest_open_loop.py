"""A mix's open-loop points come from its newest open-loop sweep: a rerun replaces older points."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.store import DataDir
from tests.traces.fake_devices import FakeMMcDevice
from tests.traces.test_utilisation import _windows
from traces.predict.openloop import predict_open_loop
from traces.predict.windows import device_source, newest_open_loop

BASE = dict(write_ratio=0.0, queue_depth=1, request_size=4096, randomness=1.0, numjobs=16, engine="psync")


def _closed() -> list[dict[str, object]]:
    return [{**BASE, "numjobs": n, "iops": 1e4 * n, "latency_mean_us": 100.0, "latency_p99_us": 300.0}
            for n in (1, 2)]


def _open(mean_us: float, size: int = 4096) -> list[dict[str, object]]:
    return [{**BASE, "request_size": size, "offered_iops": r, "iops": r, "latency_mean_us": mean_us,
             "latency_p99_us": 3 * mean_us} for r in (200.0, 400.0, 800.0)]


def test_a_rerun_mix_takes_its_newest_points_and_other_mixes_keep_theirs(datadir: DataDir) -> None:
    datadir.catalog.ensure_device("d")
    datadir.catalog.add_measurements("d", _closed())
    datadir.catalog.add_measurements("d", _open(80.0) + _open(50.0, size=8192), source="open-loop")
    datadir.catalog.add_measurements("d", _open(20.0), source="open-loop")  # 4 KiB measured again
    frame = datadir.catalog.measurements("d")
    kept = newest_open_loop(frame)
    assert sorted(kept["latency_mean_us"]) == [20.0] * 3 + [50.0] * 3
    model = FakeMMcDevice(1e4, 1)
    source = device_source(datadir, "d", model)
    assert source.correction is not None
    win = _windows([400.0])
    pred = predict_open_loop(model, win, source.loads)
    mean_f, _ = source.correction.factors(win, pred, None)
    # the 4 KiB window at a measured rate is predicted as the newest points measured it
    assert float(pred["pred_latency_mean_us"].to_numpy()[0] * mean_f[0]) == pytest.approx(20.0, rel=0.01)
    assert np.isfinite(frame["offered_iops"]).sum() == 9
