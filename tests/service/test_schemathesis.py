"""Property-based run of schemathesis against the app's own OpenAPI schema, every check on.

Besides "no 500", the schema and the server must agree both ways: every schema-valid request
is accepted (positive_data_acceptance), every schema-invalid one refused
(negative_data_rejection), every answer's status, content type, headers and body are the
documented ones, the token is enforced where the schema says so (ignored_auth,
missing_required_header), and no answer takes longer than MAX_RESPONSE_S (the report
refits a model: the slowest route).

The upload and trace-validation endpoints also get hostile bodies: the fuzz suite's CSV,
fio JSON and trace generators (tests/fuzz), N of each (SSDPREDICT_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import re
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
from schemathesis.specs.openapi.checks import positive_data_acceptance

from modeling.store import DataDir
from modeling.workload import SIZE_STEP
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
# With a token, the mutating routes are guarded as the schema says (without one the server
# accepts them all, and schemathesis rightly reports that the documented guard is missing).
TOKEN = "schemathesis-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_RESPONSE_S = 10.0
# schemathesis generates the tests at import time, so this app has its own home.
_HOME = Path(tempfile.mkdtemp(prefix="ssdpredict-schemathesis-"))
APP = create_app(Settings(home=_HOME, api_token=TOKEN))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)

# A size string (format "size" in the schema): the pattern is its syntax, the value must be
# 64 B..64 MiB in steps of 64, which no regex can say; these are the strings it describes.
_SPACE = st.sampled_from(["", " "])
schemathesis.openapi.format("size", st.one_of(
    st.builds("{}{}{}{}".format, _SPACE, st.integers(1, 2**20).map(lambda n: n * SIZE_STEP), _SPACE, _SPACE),
    st.builds("{}{}{}".format, st.integers(1, 2**16), st.sampled_from(["k", "K", "KiB", "kb", "ki"]), _SPACE),
    st.builds("{}{}".format, st.integers(1, 64), st.sampled_from(["m", "M", "MiB", "mb"])),
))


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


def within_time(ctx: Any, response: Any, case: Any) -> bool | None:
    """No answer takes longer than MAX_RESPONSE_S (schemathesis' max_response_time, set here)."""
    assert response.elapsed <= MAX_RESPONSE_S, f"{case.operation.label} took {response.elapsed:.1f} s"
    return None


# What JSON Schema cannot say, so a schema-valid request may still be refused for it (422),
# with exactly this error: the columns of a batch must be equally long, a retrain's reference
# must not be the device of the path, a size string's value
# must be in bounds (format "size", which the coverage phase does not generate from), a
# multipart upload's file must be fio JSON, CSV or a trace, and its metadata a JSON object.
UNSAYABLE = re.compile(r"column \w+ has \d+ values, \w+ has \d+|device '[^']+' cannot be its own reference")


SIZE_FIELDS = {"request_size", "read_size", "write_size"}


def _value_at(body: Any, loc: list[Any]) -> Any:
    """The part of the request body an error's location (``["body", "workload", ...]``) names."""
    for key in loc[1:]:
        if isinstance(body, dict) and key in body:
            body = body[key]
        elif isinstance(body, list) and isinstance(key, int) and key < len(body):
            body = body[key]
        else:
            break
    return body


def _size_format_only(case: Any, error: dict[str, Any]) -> bool:
    """Every error is a size string whose value format "size" forbids (out of bounds, not a
    multiple of 64): the pattern cannot say it, the schema's format does."""
    details = error.get("details")
    return error["code"] == "validation_error" and isinstance(details, list) and bool(details) and all(
        SIZE_FIELDS & set(map(str, d["loc"])) and isinstance(_value_at(case.body, d["loc"]), str)
        for d in details
    )


def accepted_unless_unsayable(ctx: Any, response: Any, case: Any) -> bool | None:
    """positive_data_acceptance, less the refusals of :data:`UNSAYABLE`, of size strings the
    schema's format "size" forbids, and of an upload's content (never a pydantic
    `validation_error` of any other field the schema allowed)."""
    if response.status_code == 422 and case.meta is not None and case.meta.generation.mode.is_positive:
        error = response.json()["error"]
        if UNSAYABLE.search(error["message"]) or _size_format_only(case, error):
            return None
        if case.operation.path in UPLOAD_PATHS and error["code"] != "validation_error":
            return None  # the file's (or the metadata's) content
    return positive_data_acceptance(ctx, response, case)


UPLOAD_PATHS = {"/v1/devices/{device}/sweeps", "/v1/devices/{device}/validate",
                "/v1/devices/{device}/predict-trace"}
UPLOADS = r"^/v1/devices/\{device\}/(sweeps|validate|predict-trace)$"
everything_else = schema.exclude(path_regex=UPLOADS)


@everything_else.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_schema_and_server_agree(case: Any) -> None:
    # every default check of schemathesis (issue 25 item 9: 17 findings without them)
    case.call_and_validate(headers=AUTH, excluded_checks=[positive_data_acceptance],
                           additional_checks=[accepted_unless_unsayable, within_time])


uploads = schema.include(path_regex=UPLOADS)


@uploads.parametrize()
@FUZZ
def test_upload_and_validate_agree_with_the_schema(case: Any) -> None:
    case.call_and_validate(headers=AUTH, excluded_checks=[positive_data_acceptance],
                           additional_checks=[accepted_unless_unsayable, within_time])


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
        res = client.post("/v1/devices/fuzzed/sweeps", files={"file": (name, body)}, data=data, headers=AUTH)
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
            headers=AUTH,
        )
    assert res.status_code in (200, 404, 413, 422), res.text
