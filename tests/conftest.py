"""Shared fixtures: an isolated data directory per test, and fio availability."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from collections.abc import Iterator

import pytest

from modeling.store import DataDir
from service.config import get_settings
from threadpoolctl import threadpool_limits

pytest_plugins = ("tests.device_fixtures",)

# One BLAS/OpenMP thread per test process: `make test` starts one xdist worker per core, and
# a thread pool per worker on top puts two spinning threads on each core (on a loaded 2-core
# machine a 72-row Gaussian-process fit took 5-10x longer so). The pools loaded so far are
# limited here, those loaded later (xgboost's OpenMP) and subprocesses by the variables;
# the server does the same (service/config.py blas_threads).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
threadpool_limits(limits=1)
# Open-loop points run 200 ms before the requests they measure instead of the product's 1 s
# (service/config.py open_loop_warmup_ms): the tests' small files and 1 s runs have no token
# bucket to fill, and every open-loop point in the suite paid the second (subprocesses too).
os.environ.setdefault("SSDPREDICT_OPEN_LOOP_WARMUP_MS", "200")

REPO = Path(__file__).resolve().parent.parent
TEST_DATA = Path(__file__).resolve().parent / "data"
FIO_PLOT = TEST_DATA / "fio-plot"  # louwrentius/fio-plot results (BSD-3-Clause, LICENSE beside them)


def data_path(path: Path) -> Path:
    """A file or folder of the repository's test data; fails loudly when it is missing."""
    if not path.exists():
        pytest.fail(f"test data missing: {path} (it ships with the repository under tests/data/)")
    return path


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own empty SSDPREDICT_HOME and fresh settings."""
    path = tmp_path / "home"
    monkeypatch.setenv("SSDPREDICT_HOME", str(path))
    monkeypatch.delenv("SSDPREDICT_API_TOKEN", raising=False)
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


@pytest.fixture
def datadir(home: Path) -> DataDir:
    """The test's data directory."""
    return DataDir(home)


@pytest.fixture(scope="session")
def fio_available() -> str:
    """The fio binary; the suite requires it (``make test`` installs it)."""
    path = shutil.which("fio")
    if path is None:
        pytest.fail("fio is not installed: run `make test` (it installs fio) or `apt-get install fio`")
    return path


def small_plain_grid(feature_set: str = "extended") -> list:
    """The tail guard's plain XGBoost at test size (one of 60 trees, where the product's
    :func:`~modeling.training.tail_guard.plain_grid` fits 400 at three depths): the guard's rules,
    not the plain grid's size, are what its tests check."""
    from modeling.training.selection import make_candidate

    return [make_candidate(feature_set, "xgboost", n_estimators=60, max_depth=4, learning_rate=0.2,
                           subsample=0.8)]


@pytest.fixture(scope="module")
def small_plain_model() -> Iterator[None]:
    """Module-wide (so module-scoped trainings use it too): the plain model at test size."""
    from modeling.training import tail_guard

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tail_guard, "plain_grid", small_plain_grid)
        yield


_SLOW_MODULE = re.compile(r"^pytestmark = (pytest\.mark\.slow\b|\[[^\]]*pytest\.mark\.slow\b)", re.MULTILINE)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run that deselects the slow set (`-m "not slow"`: `make test`) does not import a module
    marked slow as a whole: all its tests would be deselected, and every test worker would pay
    for the import (schemathesis builds its cases while collecting)."""
    if config.option.markexpr != "not slow" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix == ".py" and _SLOW_MODULE.search(collection_path.read_text()):
        return True
    return None
