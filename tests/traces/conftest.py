"""A device with a trained model, shared by the validation tests of a module."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from modeling.store import DataDir
from service.config import get_settings
from tests.service.utils import quick_train


def synthetic_rows(scale: float = 1.0) -> list[dict[str, float]]:
    """Measurements from a simple service-time model, ``scale`` x slower than the device ``synth``:
    the validation tests check plumbing, not accuracy."""
    rows = []
    for wr, qd, bs, rnd in itertools.product([0, 0.5, 1], [1, 4, 16, 64], [4096, 65536], [0, 1]):
        svc = scale * (20e-6 + bs / 2e9 + (30e-6 if rnd else 0) + wr * 10e-6)
        iops = min(qd / svc, 2e9 / bs / scale)
        lat = qd / iops * 1e6
        rows.append(
            dict(
                write_ratio=wr,
                queue_depth=qd,
                request_size=bs,
                randomness=rnd,
                numjobs=1,
                iops=iops,
                bandwidth_mib_s=iops * bs / 2**20,
                latency_mean_us=lat,
                latency_p99_us=lat * 1.5,
            )
        )
    return rows


@pytest.fixture(scope="module")
def trained_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding device ``synth`` with an active model (CART only: the default
    candidates took about 10 s per module and worker, for plumbing tests)."""
    root = tmp_path_factory.mktemp("trained-home")
    d = DataDir(root)
    d.catalog.ensure_device("synth")
    d.catalog.add_measurements("synth", synthetic_rows())
    quick_train(d, "synth")
    return root


@pytest.fixture
def trained(trained_root: Path, monkeypatch: pytest.MonkeyPatch) -> DataDir:
    """Point SSDPREDICT_HOME at the trained data directory for this test."""
    monkeypatch.setenv("SSDPREDICT_HOME", str(trained_root))
    get_settings.cache_clear()
    return DataDir(trained_root)
