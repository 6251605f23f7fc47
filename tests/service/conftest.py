"""Fixtures of the API tests: a trained device (built once, copied per test) and clients."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from modeling.store import DataDir
from service.api.main import create_app
from service.config import Settings, get_settings
from tests.service.utils import DEVICE, fio_files, ingest_fio, quick_train


@pytest.fixture(scope="session")
def trained_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding DEVICE, ingested from real fio results and trained once."""
    root = tmp_path_factory.mktemp("trained-home")
    datadir = DataDir(root)
    ingest_fio(datadir, DEVICE, fio_files())
    quick_train(datadir, DEVICE)
    return root


@pytest.fixture
def trained(trained_template: Path, home: Path) -> DataDir:
    """This test's data directory with the trained device copied in."""
    shutil.copytree(trained_template, home, dirs_exist_ok=True)
    return DataDir(home)


@pytest.fixture
def make_app(home: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., FastAPI]:
    """Build an app over this test's home; keyword arguments become SSDPREDICT_* settings."""

    def make(**env: object) -> FastAPI:
        for key, value in env.items():
            monkeypatch.setenv(f"SSDPREDICT_{key.upper()}", str(value))
        get_settings.cache_clear()
        return create_app(Settings())

    return make


@pytest.fixture
def client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A client of an app over this test's home (lifespan run, server errors as responses)."""
    with TestClient(make_app(), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def api(trained: DataDir, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A client of an app whose home holds the trained device."""
    with TestClient(make_app(), raise_server_exceptions=False) as c:
        yield c
