"""Modeling fixtures: synthetic measurements from a known function, small fast candidates."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from modeling.training.selection import Candidate, make_candidate
from modeling.store import DataDir
from modeling.workload import MIB

GRID = {
    "write_ratio": (0.0, 0.3, 0.7, 1.0),
    "queue_depth": (1, 4, 16, 64),
    "request_size": (4096, 65536),
    "randomness": (0.0, 1.0),
    "numjobs": (1, 4),
}


def synthetic_rows(
    noise: float = 0.03, seed: int = 0, repeats: int = 1, grid: dict | None = None
) -> pd.DataFrame:
    """Measurement rows of a made-up device whose metrics follow queueing physics."""
    rng = np.random.default_rng(seed)
    rows = []
    g = grid or GRID
    for values in itertools.product(*g.values()):
        wl = dict(zip(g.keys(), values, strict=True))
        oio = wl["queue_depth"] * wl["numjobs"]
        for _ in range(repeats):
            iops = (
                2e5
                * oio
                / (oio + 8)
                * (4096 / wl["request_size"]) ** 0.7
                * (1 - 0.5 * wl["write_ratio"])
                * (1 - 0.3 * (1 - wl["randomness"]))
            ) * rng.lognormal(0, noise)
            lat = oio / iops * 1e6 * rng.lognormal(0, noise / 2)
            rows.append(
                {
                    **wl,
                    "read_size": wl["request_size"],
                    "write_size": wl["request_size"],
                    "read_randomness": wl["randomness"],
                    "write_randomness": wl["randomness"],
                    "iops": iops,
                    "bandwidth_mib_s": iops * wl["request_size"] / MIB,
                    "latency_mean_us": lat,
                    "latency_p99_us": lat * (3 + 2 * wl["write_ratio"]) * rng.lognormal(0, noise),
                    "fio_version": "fio-3.33",
                }
            )
    return pd.DataFrame(rows)


def fast_candidates() -> list[Candidate]:
    """Small, quick estimators for tests."""
    return [
        make_candidate("extended", "xgboost", n_estimators=40, max_depth=4, learning_rate=0.3),
        make_candidate("extended", "cart", min_samples_leaf=1, linear_base=True),
        make_candidate("basic", "extra_trees", n_estimators=10),
    ]


@pytest.fixture
def synthetic() -> pd.DataFrame:
    """128 noisy synthetic measurement rows."""
    return synthetic_rows()


@pytest.fixture
def device_with_data(datadir: DataDir, synthetic: pd.DataFrame) -> str:
    """A device called ``synth`` holding the synthetic rows as one sweep."""
    datadir.catalog.ensure_device("synth")
    datadir.catalog.add_measurements("synth", synthetic.to_dict("records"), info={"fio_version": "fio-3.33"})
    return "synth"


@pytest.fixture(scope="session")
def trained_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A data directory where ``synth`` holds the synthetic rows and one trained, active model
    version (trained once per worker: about 1.5 s each, in some thirty tests); and the version."""
    from modeling.training.train import train_device

    root = tmp_path_factory.mktemp("synth-trained")
    datadir = DataDir(root)
    datadir.catalog.ensure_device("synth")
    rows = synthetic_rows().to_dict("records")
    datadir.catalog.add_measurements("synth", rows, info={"fio_version": "fio-3.33"})
    mv = train_device(datadir, "synth", folds=3, candidates=fast_candidates())
    return root, mv.version


@pytest.fixture
def trained(trained_template: tuple[Path, str], home: Path) -> str:
    """``synth`` with one trained, active model version, copied into this test's data
    directory (which the test may change freely); returns the version."""
    root, version = trained_template
    shutil.copytree(root, home, dirs_exist_ok=True)
    return version


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """scikit-learn's common checks of the Gaussian-process families take most of this folder's
    time: they run in the slow set (``make test-slow``, and CI), the tree families' in both."""
    for item in items:
        if item.originalname == "test_sklearn_compatible" and (
            "GaussianProcessModel" in item.name or "LoadGatedModel" in item.name
        ):
            item.add_marker(pytest.mark.slow)
