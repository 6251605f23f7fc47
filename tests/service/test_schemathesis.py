"""Property-based run of schemathesis against the app's own OpenAPI schema: no 500, ever.

The upload and trace-validation endpoints also get hostile bodies: the fuzz suite's CSV,
fio JSON and trace generators (tests/fuzz), N of each (SSDPREDICT_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from modeling.store import DataDir
from service.api.main import create_app
from service.config import Settings
from tests.fuzz.conftest import FUZZ
from tests.fuzz.test_fuzz_csv import csv_texts
from tests.fuzz.test_fuzz_fio import values
from tests.fuzz.test_fuzz_traces import FORMATS
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
    # retrains started by the run end before the home goes (a retrain of every device starts
    # a local Dask cluster first: minutes on a loaded machine)
    APP.state.service.jobs.wait(timeout=600)
    shutil.rmtree(_HOME, ignore_errors=True)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: Any) -> None:
    # every answer's status is one the schema documents (issue 25 item 9: 400/404 were not)
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance, status_code_conformance])


uploads = schema.include(path_regex=r"^/v1/devices/\{device\}/(sweeps|validate)$")


@uploads.parametrize()
@FUZZ
def test_upload_and_validate_no_server_errors(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])


FIO_TEXT = fio_files(1)[0].read_text()
hostile_uploads = st.one_of(
    csv_texts().map(str.encode),
    values.map(lambda v: FIO_TEXT.replace('"iops" :', f'"iops" : {v!r}, "x" :', 1).encode()),
    st.binary(max_size=500),
)


@FUZZ
@given(
    hostile_uploads,
    st.sampled_from(["m.csv", "r.json", "upload"]),
    st.sampled_from([None, '{"a": 1}', "[" * 5000]),
)
def test_hostile_uploads_are_never_500(body: bytes, name: str, metadata: str | None) -> None:
    data = {} if metadata is None else {"metadata": metadata}
    with TestClient(APP, raise_server_exceptions=False) as client:
        res = client.post("/v1/devices/fuzzed/sweeps", files={"file": (name, body)}, data=data)
    assert res.status_code in (201, 413, 422), res.text
    assert set(res.json()) == ({"error"} if res.status_code >= 400 else set(res.json()))


@FUZZ
@given(st.sampled_from(sorted(FORMATS)).flatmap(lambda f: st.tuples(st.just(f), FORMATS[f])), st.booleans())
def test_hostile_traces_are_never_500(fmt_and_body: tuple[str, str | bytes], auto: bool) -> None:
    fmt, body = fmt_and_body
    blob = body.encode() if isinstance(body, str) else body
    with TestClient(APP, raise_server_exceptions=False) as client:
        res = client.post(
            f"/v1/devices/{EXAMPLE_DEVICE}/validate",
            files={"file": ("t.trace", blob)},
            data={"format": "auto" if auto else fmt, "window_s": "0.5"},
        )
    assert res.status_code in (200, 404, 413, 422), res.text
