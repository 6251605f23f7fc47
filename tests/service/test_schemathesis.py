"""Property-based run of schemathesis against the app's own OpenAPI schema: no 500, ever."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from modeling.store import DataDir
from service.api.main import create_app
from service.config import Settings
from tests.service.utils import fio_files, ingest_fio, quick_train

pytestmark = pytest.mark.slow

# The schema's examples name the device "nvme0": give it a small trained model, so the
# generated requests reach real predictions, uploads and retrains, not only 404s.
EXAMPLE_DEVICE = "nvme0"
# schemathesis generates the tests at import time, so this app has its own home.
_HOME = Path(tempfile.mkdtemp(prefix="ssdpredict-schemathesis-"))
APP = create_app(Settings(home=_HOME))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module", autouse=True)
def example_device() -> Iterator[None]:
    datadir = DataDir(_HOME)
    ingest_fio(datadir, EXAMPLE_DEVICE, fio_files(12))
    quick_train(datadir, EXAMPLE_DEVICE)
    yield
    APP.state.service.jobs.wait(timeout=60)  # retrains started by the run end before the home goes
    shutil.rmtree(_HOME, ignore_errors=True)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
